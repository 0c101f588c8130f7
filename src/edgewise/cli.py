"""The ``edgewise`` command: a thin layer over the library. JSON in, JSON or text out.

Errors are one line on stderr naming the rule and the value, with exit status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .errors import EdgewiseError, InputError


def _read_chunks(source: str) -> list[Any]:
    from .chunk import loads

    if source == "-":
        return loads(sys.stdin.read(), "<stdin>")
    try:
        text = Path(source).read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"chunks file {source!r} could not be read: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise InputError(f"chunks file {source!r} must be UTF-8 text") from None
    return loads(text, source)


def _text_arg(value: str | None, what: str) -> str | None:
    """``@FILE`` reads the value from a file, as curl does."""
    if value is None or not value.startswith("@"):
        return value
    try:
        return Path(value[1:]).read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise InputError(f"{what} file {value[1:]!r} could not be read: {exc.strerror}") from None


def _pack_options(p: argparse.ArgumentParser) -> None:
    from .layout import layout_names
    from .score import scorer_names
    from .tokens import tokenizer_names

    p.add_argument("--query", "-q", required=True, help="the question (or @FILE)")
    p.add_argument("--chunks", "-c", required=True, metavar="FILE|-", help="JSON array or JSONL of chunks; - for stdin")
    p.add_argument("--budget", "-b", type=int, help="tokens for the whole rendered prompt")
    p.add_argument("--tokenizer", "-t", default="cl100k_base", help=f"one of: {', '.join(tokenizer_names())}")
    p.add_argument("--layout", "-l", default="sections", help=f"one of: {', '.join(layout_names())}")
    p.add_argument("--scorer", help=f"score chunks that have no score: {', '.join(scorer_names())}")
    p.add_argument("--rescore", action="store_true", help="score every chunk with --scorer, ignoring given scores")
    p.add_argument("--top-k", type=int, help="keep at most K chunks")
    p.add_argument("--min-score", type=float, help="drop chunks scoring below this")
    p.add_argument("--word-count-threshold", type=int, help="Haystack's LostInTheMiddleRanker threshold")
    p.add_argument("--min-truncated-tokens", type=int, default=32, help="shortest useful truncated chunk (default 32)")
    p.add_argument("--high-importance-k", type=int, default=8, help="key facts for Sections A and C (default 8)")
    p.add_argument("--system", help="system instruction (or @FILE)")
    p.add_argument("--profile", help="user profile / memory layer (or @FILE)")
    p.add_argument("--instructions", help="task instructions (or @FILE)")
    p.add_argument("--expected-output", help="expected output note (or @FILE)")
    p.add_argument("--trim-profile", action="store_true", help="truncate the profile if the fixed layers exceed the budget")
    p.add_argument("--query-aware", action="store_true", help="paper layout: ask the question before the documents too")
    p.add_argument("--prune", type=float, metavar="THRESHOLD", help="keep only sentences scoring at least this, in [0, 1]")
    p.add_argument("--prune-relative", action="store_true", help="--prune is relative to each chunk's best sentence")
    p.add_argument("--summaries", choices=["given", "auto"], default="given",
                   help="auto: extractive summaries for chunks without meta.summary")
    p.add_argument("--summary-tokens", type=int, default=60, help="cap of an automatic summary (default 60)")
    p.add_argument("--format", "-f", default="text", choices=["text", "json", "openai", "anthropic"])
    p.add_argument("--table", action="store_true", help="after the prompt, print where each chunk went (stderr)")


def _pack_kwargs(a: argparse.Namespace) -> dict[str, Any]:
    return dict(
        budget=a.budget, tokenizer=a.tokenizer, layout=a.layout, scorer=a.scorer, rescore=a.rescore,
        top_k=a.top_k, min_score=a.min_score, word_count_threshold=a.word_count_threshold,
        min_truncated_tokens=a.min_truncated_tokens, high_importance_k=a.high_importance_k,
        system=_text_arg(a.system, "system"), profile=_text_arg(a.profile, "profile"),
        instructions=_text_arg(a.instructions, "instructions"),
        expected_output=_text_arg(a.expected_output, "expected output"), trim_profile=a.trim_profile,
        query_aware=a.query_aware, prune=a.prune, prune_relative=a.prune_relative, summaries=a.summaries,
        summary_tokens=a.summary_tokens,
    )


def _emit(packed: Any, fmt: str) -> str:
    if fmt == "text":
        return packed.prompt
    if fmt == "json":
        return json.dumps(packed.to_dict(), ensure_ascii=False, indent=2)
    return json.dumps(packed.messages(fmt), ensure_ascii=False, indent=2)


def table(packed: Any) -> str:
    """A short human table of where each chunk went."""
    d = packed.debug_info
    rows = [("id", "rank", "outcome", "where", "tokens", "reason")]
    for r in d.chunks:
        where = "-" if r.get("position") is None else f"#{r['position']} {r.get('section') or ''}".strip()
        rank = "-" if r["rank"] is None else str(r["rank"] + 1)
        rows.append((r["id"], rank, r["outcome"], where, str(r.get("tokens", "-")), r["reason"]))
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row[:5], widths)) + "  " + row[5] for row in rows]
    est = " (estimated)" if d.estimated else ""
    budget = "no budget" if d.budget is None else f"budget {d.budget}, {d.remaining_tokens} left"
    lines.append(f"prompt: {d.prompt_tokens} tokens{est} ({d.tokenizer}), {budget}; "
                 f"cache prefix {d.cache_prefix_tokens} tokens; order {d.strategy}, layout {d.layout}")
    return "\n".join(lines)


def cmd_pack(a: argparse.Namespace) -> None:
    from .pack import pack

    packed = pack(_text_arg(a.query, "query") or "", _read_chunks(a.chunks), order=a.order, key_id=a.key_id, **_pack_kwargs(a))
    print(_emit(packed, a.format))
    if a.table:
        print("\n" + table(packed), file=sys.stderr)


def cmd_variants(a: argparse.Namespace) -> None:
    from .pack import variants

    positions = [p.strip() for p in a.positions.split(",") if p.strip()]
    kwargs = _pack_kwargs(a)
    out = variants(_text_arg(a.query, "query") or "", _read_chunks(a.chunks), a.key_id, positions, **kwargs)
    if a.format == "text":
        print("\n\n".join(f"===== {name} =====\n{p.prompt}" for name, p in out.items()))
    else:
        print(json.dumps({name: json.loads(_emit(p, a.format)) for name, p in out.items()}, ensure_ascii=False, indent=2))


def cmd_list(a: argparse.Namespace) -> None:
    from .layout import layout_names
    from .order import order_names
    from .score import scorer_names
    from .tokens import tokenizer_names

    for title, names in (("orders", order_names()), ("layouts", layout_names()),
                         ("scorers", scorer_names()), ("tokenizers", tokenizer_names())):
        print(f"{title}: {', '.join(names)}")


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr (status 2), like every other error."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    from .order import order_names

    parser = _Parser(prog="edgewise", description="Pack retrieved chunks into the prompt an LLM reads best.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    p = sub.add_parser("pack", help="pack chunks for a query into a prompt")
    _pack_options(p)
    p.add_argument("--order", "-o", default="edges", help="placement strategy: " + ", ".join(order_names()))
    p.add_argument("--key-id", help="the key chunk for --order position:K")
    p.set_defaults(func=cmd_pack)

    v = sub.add_parser("variants", help="one prompt per position of a key chunk (position-sensitivity test)")
    _pack_options(v)
    v.set_defaults(layout="layered")
    v.add_argument("--key-id", required=True, help="the chunk to move")
    v.add_argument("--positions", default="first,middle,last", help="comma-separated: first, middle, last or indexes")
    v.set_defaults(func=cmd_variants)

    ls = sub.add_parser("list", help="list orders, layouts, scorers and tokenizers")
    ls.set_defaults(func=cmd_list)

    from . import cli_eval, cli_relevance

    cli_relevance.add_commands(sub)  # score, prune, highlight, data nq
    cli_eval.add_commands(sub)  # eval run | report | calibrate
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        args.func(args)
    except (EdgewiseError, ImportError) as exc:  # ImportError: a missing extra, with its pip command
        print(f"edgewise: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # e.g. `edgewise pack ... | head`
        return 0
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
