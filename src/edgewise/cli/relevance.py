"""CLI subcommands for relevance: ``score``, ``prune`` and ``highlight``.

Each is one library call plus I/O: JSON in (a file or ``-`` for stdin), JSON out on stdout.
``add_commands(subparsers)`` adds them to the ``edgewise`` parser.

>>> import argparse
>>> from edgewise.cli.lazy import build_named
>>> parser = argparse.ArgumentParser(prog="edgewise")
>>> add_commands(parser.add_subparsers(dest="command"))
>>> build_named(parser, ["score"])
>>> parser.parse_args(["score", "-q", "x", "-c", "-", "--scorer", "bm25"]).scorer
'bm25'
"""

from __future__ import annotations

import argparse
import html
import sys
from typing import Any

from ..errors import InputError
from ..jsonin.files import read_chunks, text_arg
from .lazy import command
from .output import dump, write_out


def _chunks(source: str) -> list[Any]:
    from ..chunk import normalize

    chunks, _ = normalize(read_chunks(source))
    return chunks


def _query(value: str) -> str:
    q = text_arg(value, "query") or ""
    if not q.strip():
        raise InputError(f"query must be a non-empty string, but got {q!r}")
    return q


def cmd_score(a: argparse.Namespace) -> None:
    from dataclasses import replace

    from ..score import get_scorer
    from ..score.ranking import score_chunks

    query = _query(a.query)
    chunks = _chunks(a.chunks)
    s = get_scorer(a.scorer)
    scores = score_chunks(query, chunks, s)  # what pack(scorer=...) ranks by: meta.key, title, text
    order = sorted(range(len(chunks)), key=lambda i: (-scores[i], i))
    rank = {i: r for r, i in enumerate(order, 1)}
    out = [{**replace(chunks[i], score=scores[i]).to_dict(), "rank": rank[i]}
           for i in (order if a.sort else range(len(chunks)))]
    dump(out)
    if a.stats and hasattr(s, "stats"):
        print(f"{s.name}: {s.stats()}", file=sys.stderr)


def cmd_prune(a: argparse.Namespace) -> None:
    from ..prune.steps import _check_threshold, prune

    query = _query(a.query)
    _check_threshold(a.threshold)
    chunks = _chunks(a.chunks)
    out = []
    for c, p in zip(chunks, prune(query, chunks, a.threshold, relative=a.relative, scorer=a.prune_scorer)):
        out.append(p.apply(c).to_dict())
    dump(out)


_ANSI_ON, _ANSI_OFF = "\x1b[1;33m", "\x1b[0m"


def _render(text: str, spans: list[Any], fmt: str) -> str:
    pieces, pos = [], 0
    for s in spans:
        before = text[pos : s.start]
        pieces.append(html.escape(before) if fmt == "html" else before)
        if fmt == "html":
            pieces.append(f'<mark data-score="{s.score:.3f}">{html.escape(s.text)}</mark>')
        else:
            pieces.append(f"{_ANSI_ON}{s.text}{_ANSI_OFF}")
        pos = s.end
    tail = text[pos:]
    pieces.append(html.escape(tail) if fmt == "html" else tail)
    return "".join(pieces)


def cmd_highlight(a: argparse.Namespace) -> None:
    from ..chunk import Chunk
    from ..prune.steps import _check_threshold, highlight

    query = _query(a.query)
    _check_threshold(a.threshold)
    if (a.text is None) == (a.chunks is None):
        raise InputError("highlight needs exactly one of --text or --chunks")
    if a.text is not None:
        chunks = [Chunk(id="text", text=text_arg(a.text, "text") or "")]
    else:
        chunks = _chunks(a.chunks)
    results = [(c, highlight(query, c.text, threshold=a.threshold, title=c.title, scorer=a.prune_scorer)) for c in chunks]
    if a.format == "json":
        dump([{"id": c.id, "spans": [s.to_dict() for s in spans]} for c, spans in results])
    elif a.format == "html":
        body = "\n".join(f"<section id=\"{html.escape(c.id)}\"><h3>{html.escape(c.title or c.id)}</h3>"
                         f"<p>{_render(c.text, spans, 'html')}</p></section>" for c, spans in results)
        write_out(f"<!doctype html>\n<meta charset=\"utf-8\">\n<p><b>{html.escape(query)}</b></p>\n{body}")
    else:
        color = a.format == "ansi" or (a.format == "auto" and sys.stdout.isatty())
        for c, spans in results:
            write_out(f"== {c.id}{' — ' + c.title if c.title else ''}")
            write_out(_render(c.text, spans, "ansi") if color else c.text + "\n" + "\n".join(
                f"  [{s.start}:{s.end}] {s.score:.3f} {s.text}" for s in spans))


def _common(p: argparse.ArgumentParser, chunks_required: bool = True) -> None:
    p.add_argument("--query", "-q", required=True, help="the question (or @FILE)")
    p.add_argument("--chunks", "-c", required=chunks_required, metavar="FILE|-",
                   help="JSON array or JSONL of chunks; - for stdin")


def _sentence_opts(p: argparse.ArgumentParser) -> None:
    from ..options import option_argument
    from ..prune.steps import DEFAULT_THRESHOLD

    p.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD,
                   help=f"keep sentences scoring at least this, in [0, 1] (default {DEFAULT_THRESHOLD})")
    option_argument(p, "prune_scorer", "--scorer", help="sentence scorer: dense (models extra), dense2 (two embeddings per sentence, 2x the model work), lexical, or auto")


def _score_args(p: argparse.ArgumentParser) -> None:
    from ..options import option_argument

    _common(p)
    option_argument(p, "scorer", "--scorer", "-s", default="bm25", help="one of: {names} (cross:PATH, dense:PATH)",
                    hide=("given",))
    p.add_argument("--sort", action="store_true", help="print best first (default: input order)")
    p.add_argument("--stats", action="store_true", help="print the scorer's cache statistics on stderr")
    p.set_defaults(func=cmd_score)


def _prune_args(p: argparse.ArgumentParser) -> None:
    _common(p)
    _sentence_opts(p)
    p.add_argument("--relative", action="store_true", help="threshold relative to each chunk's best sentence")
    p.set_defaults(func=cmd_prune)


def _highlight_args(p: argparse.ArgumentParser) -> None:
    _common(p, chunks_required=False)
    p.add_argument("--text", help="a text to highlight (or @FILE), instead of --chunks")
    _sentence_opts(p)
    p.add_argument("--format", "-f", default="auto", choices=["auto", "ansi", "plain", "json", "html"],
                   help="auto: colours on a terminal, plain otherwise")
    p.set_defaults(func=cmd_highlight)


def add_commands(subparsers: Any) -> None:
    """Add ``score``, ``prune`` and ``highlight`` to an argparse subparsers object (their flags are
    added when :func:`edgewise.cli.lazy.build_named` finds the command named)."""
    command(subparsers, "score", _score_args, help="score chunks against a query; JSON with scores and ranks")
    command(subparsers, "prune", _prune_args, help="drop the sentences of each chunk that do not help the query")
    command(subparsers, "highlight", _highlight_args, help="mark the sentences that answer the query")
