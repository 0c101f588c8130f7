"""``edgewise pack``, ``variants`` and ``list``: one library call each, plus I/O.

The pack flags are generated from :class:`~edgewise.options.PackOptions` (one flag per option).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ..jsonin.files import read_chunks, text_arg
from ..packing.debug import PRUNED_KEY
from ..packing.front import FORMATS  # the output formats, defined with pack() (loaded by `import edgewise` anyway)
from .lazy import command
from .output import dumps, write_out


def _emit(packed: Any, fmt: str) -> str:
    if fmt == "text":
        return packed.prompt
    if fmt == "json":
        return dumps(packed.to_dict())
    return dumps(packed.messages(fmt))


def table(packed: Any) -> str:
    """A short human table of where each chunk went."""
    d = packed.debug_info
    rows = [("id", "rank", "outcome", "where", "tokens", "reason")]
    for r in d.chunks:
        where = "-" if r["position"] is None else f"#{r['position']} {r['section'] or ''}".strip()
        rank = "-" if r["rank"] is None else str(r["rank"] + 1)
        tokens = "-" if r["tokens"] is None else str(r["tokens"])
        rows.append((r["id"], rank, r["outcome"], where, tokens, r["reason"]))
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row[:5], widths)) + "  " + row[5] for row in rows]
    est = " (estimated)" if d.estimated else ""
    budget = "no budget" if d.budget is None else f"budget {d.budget}, {d.remaining_tokens} left"
    lines.append(f"prompt: {d.prompt_tokens} tokens{est} ({d.tokenizer}), {budget}; "
                 f"cache prefix {d.cache_prefix_tokens} tokens; order {d.strategy}, layout {d.layout}")
    if (p := d.placement) is not None:  # order=auto: what placed the chunks, and why
        lines.append(f"order auto: {p['reason']}" + _profile_prune(p))
    return "\n".join(lines)


def _profile_prune(placement: dict[str, Any]) -> str:
    """What became of the pruning threshold the profile measured to pay, if it has one."""
    threshold = placement["profile_prune"]
    if threshold is None:
        return ""
    if placement["prune"] == threshold:
        return f"; pruned at {threshold:g}, the threshold the profile measured to pay"
    return f"; pruned at {placement['prune']:g} as given, not at the profile's {threshold:g}"


def left_out(packed: Any, where: str = "--table or --format json") -> str | None:
    """One line for stderr when chunks were left out of a prompt printed without its debug record.

    The text and message formats carry no record of the chunks that did not fit, so a prompt that
    lost some (or all) of them says so, with ``where`` to read each reason; ``None`` when none was
    left out.

    >>> from edgewise import pack
    >>> left_out(pack("q", ["a " * 300, "b"], budget=60, tokenizer="words", layout="paper"))
    'edgewise: 1 of 2 chunks left out of the prompt (budget 60 tokens): --table or --format json gives each reason'
    """
    d = packed.debug_info
    if not d.dropped:
        return None
    budget = "no budget" if d.budget is None else f"budget {d.budget} tokens"
    total = len(d.chunks)
    return (f"edgewise: {len(d.dropped)} of {total} chunk{'s' if total != 1 else ''} left out of the prompt ({budget}): "
            f"{where} gives each reason")


def pruned(packed: Any, where: str = "--table or --format json") -> str | None:
    """One line for stderr when pruning cut chunks of a prompt printed without its debug record.

    ``edgewise retrieve`` and ``ask`` prune by default, so a prompt whose chunks lost sentences says
    how many and how much of them it kept, with ``where`` to read each chunk's cut; ``None`` when no
    chunk in the prompt was cut (a chunk pruned, then left out, is counted by :func:`left_out`).

    >>> from edgewise import pack
    >>> text = "Paris is the capital of France. Bananas are yellow. The sea is salty."
    >>> pruned(pack("capital of France?", [text, "Lyon."], prune=0.3, prune_scorer="lexical", tokenizer="words"))
    'edgewise: 1 of 2 chunks in the prompt pruned to 31 of 69 characters (--prune 0 keeps every sentence): --table or --format json gives what each kept'
    """
    d = packed.debug_info
    if not d.pruned:
        return None
    records = [r for r in d.chunks if r["outcome"] != "dropped"]
    cut = [r[PRUNED_KEY] for r in records if PRUNED_KEY in r]
    if not cut:
        return None
    kept, chars, total = sum(c["kept_chars"] for c in cut), sum(c["original_chars"] for c in cut), len(records)
    return (f"edgewise: {len(cut)} of {total} chunk{'s' if total != 1 else ''} in the prompt pruned to {kept:,} of "
            f"{chars:,} characters (--prune 0 keeps every sentence): {where} gives what each kept")


def notes(packed: Any, where: str = "--table or --format json") -> str | None:
    """What a prompt printed without its debug record says on stderr: the chunks pruning cut
    (:func:`pruned`), then those left out (:func:`left_out`), a line each; ``None`` if neither."""
    lines = [line for line in (pruned(packed, where), left_out(packed, where)) if line is not None]
    return "\n".join(lines) if lines else None


def report(packed: Any, fmt: str, show_table: bool) -> None:
    """After the prompt, on stderr: the table when asked for, else a line if chunks were pruned and
    one if any chunk was left out."""
    if show_table:
        print("\n" + table(packed), file=sys.stderr)
    elif fmt != "json" and (note := notes(packed)) is not None:
        print(note, file=sys.stderr)


def _options(a: argparse.Namespace) -> Any:
    from ..options import from_args

    return from_args(a, read_text=text_arg)


def write_html(a: argparse.Namespace, query: str, chunks: Any, options: Any, packed: Any, source: str) -> None:
    """``--html FILE``: the inspector page of this pack in one self-contained file (the page
    ``edgewise serve`` shows at ``/ui``; :mod:`edgewise.serve.api.inspector`), and a line on stderr."""
    if a.html is None:
        return
    from ..serve.api import inspector

    inspector.write(a.html, inspector.view(query, chunks, options, packed, source=source))
    print(f"edgewise: wrote the inspector page of this pack to {a.html}", file=sys.stderr)


def cmd_pack(a: argparse.Namespace) -> None:
    from ..packing.front import pack

    query, chunks, options = text_arg(a.query, "query") or "", read_chunks(a.chunks), _options(a)
    packed = pack(query, chunks, options)
    write_html(a, query, chunks, options, packed, "edgewise pack")
    write_out(_emit(packed, a.format))
    report(packed, a.format, a.table)


def cmd_variants(a: argparse.Namespace) -> None:
    from ..packing.front import variants

    positions = [p.strip() for p in a.positions.split(",") if p.strip()]
    options = _options(a)  # the layout is the parser's default (layered) unless --layout names one
    opts = options.to_dict(changed_only=True)
    key_id = opts.pop("key_id")
    opts.pop("layout", None)
    out = variants(text_arg(a.query, "query") or "", read_chunks(a.chunks), key_id, positions,
                   layout=options.layout, **opts)
    if a.format == "text":
        write_out("\n\n".join(f"===== {name} =====\n{p.prompt}" for name, p in out.items()))
    else:
        write_out(dumps({name: json.loads(_emit(p, a.format)) for name, p in out.items()}))


def cmd_list(a: argparse.Namespace) -> None:
    from ..registry import describe

    for kind, entries in describe().items():  # plugins say which distribution they came from
        write_out(f"{kind}: " + ", ".join(name if source == "edgewise" else f"{name} ({source})" for name, source in entries))
    write_out(_profiles_text())


def _profiles_text() -> str:
    """The ``profiles:`` part of ``edgewise list``: each profile found, whether ``order=auto`` uses
    it (or why not), and where it is; then the directories looked in and unreadable files."""
    from ..order.profiles import directories, discover, table

    found = discover()
    lines = ["profiles (order=auto):" + ("" if found.profiles else " none")]
    for row in table(found):
        curve = " / ".join(f"{v:.0%}" for v in row["measured"])
        use = "used" if row["used"] else f"not used: {row['why_not']}"
        prune = f", prune {row['prune']:g}" if row["prune"] is not None else ""
        lines.append(f"  {row['name']} [{curve}{prune}] {use} ({row['origin']}: {row['path']})")
    lines.append("  looked in: " + ", ".join(f"{d} ({what})" for d, what in directories()))
    lines += [f"  unreadable: {path}: {error}" for path, error in found.errors]
    return "\n".join(lines)


def _io_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--query", "-q", required=True, help="the question (or @FILE)")
    p.add_argument("--chunks", "-c", required=True, metavar="FILE|-", help="JSON array or JSONL of chunks; - for stdin")
    p.add_argument("--format", "-f", default="text", choices=FORMATS)


def report_args(p: argparse.ArgumentParser) -> None:
    """``--table`` and ``--html``: where each chunk went, on stderr or as a page (``pack`` and ``retrieve``)."""
    p.add_argument("--table", action="store_true", help="after the prompt, print where each chunk went (stderr)")
    p.add_argument("--html", metavar="FILE", type=Path,
                   help="also write the inspector page of this pack (prompt, where each chunk went, budget, position "
                        "curve) to FILE: one self-contained HTML file that works offline, to attach to a bug report")


def _pack_args(p: argparse.ArgumentParser) -> None:
    from ..options import add_arguments

    _io_args(p)
    report_args(p)
    add_arguments(p)
    p.set_defaults(func=cmd_pack)


def _variants_args(v: argparse.ArgumentParser) -> None:
    from ..options import add_arguments

    _io_args(v)
    v.add_argument("--positions", default="first,middle,last",
                   help="comma-separated: first, middle, last, an index, or A, B, C (sections layout)")
    add_arguments(v, exclude=("order",), defaults={"layout": "layered"})
    for action in v._actions:  # the chunk to move is required here
        if action.dest == "key_id":
            action.required = True
    v.set_defaults(func=cmd_variants)


def add_commands(subparsers: Any) -> None:
    """Add ``pack``, ``variants`` and ``list`` (their flags are added when the command is named)."""
    command(subparsers, "pack", _pack_args, help="pack chunks for a query into a prompt")
    command(subparsers, "variants", _variants_args,
            help="one prompt per position of a key chunk (position-sensitivity test)")
    command(subparsers, "list", lambda p: p.set_defaults(func=cmd_list),
            help="list orders, layouts, scorers, tokenizers, models, the rest of the registries, "
                 "and the position profiles order=auto finds")
