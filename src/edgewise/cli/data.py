"""``edgewise data nq``: build evaluation data sets (a thin layer over :mod:`edgewise.eval.nq`)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..errors import InputError
from .lazy import command


def cmd_data_nq(a: argparse.Namespace) -> None:
    from ..eval.nq import build, read_jsonl, write_jsonl

    rows = read_jsonl(a.source)
    pool = [row for path in a.pool or () for row in read_jsonl(path)]
    skipped: list[dict[str, Any]] = []
    # built before the output is opened, so a bad parameter leaves no empty file behind
    out = list(build(rows, docs=a.docs, gold_at=a.gold_at, seed=a.seed, skipped=skipped, pool=pool or None))
    if a.output == "-":
        n = write_jsonl(out, sys.stdout)
    else:
        try:
            with open(a.output, "w", encoding="utf-8") as f:
                n = write_jsonl(out, f)
        except OSError as exc:
            raise InputError(f"output file {a.output!r} could not be written: {exc.strerror}") from None
    print(f"edgewise: wrote {n} rows ({a.docs} documents, gold at {a.gold_at}, seed {a.seed}) to {a.output}",
          file=sys.stderr)
    for s in skipped:
        print(f"edgewise: skipped row {s['row']} ({s['question']!r}): {s['reason']}", file=sys.stderr)


def _nq_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--source", required=True, help="a .jsonl or .jsonl.gz file in the oracle format")
    p.add_argument("--docs", type=int, default=20, help="documents per question (default 20)")
    p.add_argument("--gold-at", type=int, default=0, help="position of the gold document (default 0)")
    p.add_argument("--seed", type=int, default=0, help="seed for tie-breaking (default 0)")
    p.add_argument("--pool", nargs="+", metavar="FILE",
                   help="more rows in the same format to mine distractors from (a small pool gives easy distractors)")
    p.add_argument("--output", "-o", default="-", help="output JSONL file (default stdout)")
    p.set_defaults(func=cmd_data_nq)


def add_commands(subparsers: Any) -> None:
    """Add ``data nq`` (its flags are added when the command is named)."""

    def datasets(d: argparse.ArgumentParser) -> None:
        dsub = d.add_subparsers(dest="dataset", required=True)
        command(dsub, "nq", _nq_args, help="multi-document QA from NQ-open oracle rows (Lost in the Middle)")

    command(subparsers, "data", datasets, help="build evaluation data sets")
