"""``edgewise batch``: pack every row of a JSON Lines or Parquet input into Parquet, on Ray or a process pool.

One library call (:func:`edgewise.batch.run`) plus I/O: the summary (rows, error rows, the files
written, seconds) is printed as JSON on stdout, and a row that could not be packed is in the
output with its ``error`` cell, never dropped. One job at a time writes an output folder: a second
one (new, or ``--resume``) stops at once, naming the one that holds it.

>>> import argparse
>>> from edgewise.cli.lazy import build_named
>>> parser = argparse.ArgumentParser(prog="edgewise")
>>> add_commands(parser.add_subparsers(dest="command"))
>>> build_named(parser, ["batch"])
>>> a = parser.parse_args(["batch", "--input", "in.jsonl", "--output", "out", "--concurrency", "2", "--budget", "500"])
>>> a.engine, a.concurrency, a.ray_address, a.budget
('auto', 2, None, 500)
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..jsonin.files import text_arg
from .lazy import command
from .output import dump


def cmd_batch(a: argparse.Namespace) -> None:
    from ..batch import run
    from ..options import from_args

    summary = run(a.input, a.output, from_args(a, read_text=text_arg), engine=a.engine, concurrency=a.concurrency,
                  address=a.ray_address, rows_per_unit=a.rows_per_unit, resume=a.resume,
                  chunk_records=a.chunk_records)
    start = f"; Ray start-up {summary.startup_seconds:.1f} s" if summary.engine == "ray" and summary.startup_seconds else ""
    print(f"edgewise: packed {summary.rows} rows ({summary.errors} with an error) into {a.output} in "
          f"{summary.seconds:.1f} s on {summary.engine} with {summary.concurrency} "
          f"worker{'s' if summary.concurrency > 1 else ''}{start}", file=sys.stderr)
    dump(summary.to_dict())


def _batch_args(p: argparse.ArgumentParser) -> None:
    from ..batch import ENGINES
    from ..options import add_arguments

    p.add_argument("--input", "-i", required=True, metavar="FILE|DIR",
                   help="JSON Lines or Parquet rows of {query, chunks, options?, id?}; a directory: every .jsonl, "
                        ".json, .ndjson and .parquet file under it, in name order")
    p.add_argument("--output", required=True, metavar="DIR",
                   help="a new or empty directory (or, with --resume, a stopped job's); the rows land in "
                        "DIR/part-00000.parquet, and _edgewise_batch.json says \"done\" once it is read back whole; "
                        "one job at a time: a job on a DIR another job holds stops at once, naming it")
    p.add_argument("--engine", default="auto", choices=ENGINES,
                   help="ray (Ray Data; without --ray-address on a local Ray instance started for the job), "
                        "local (a process pool), or auto: ray with --ray-address, local without (default auto)")
    p.add_argument("--ray-address", default=None, metavar="ADDR",
                   help="a running Ray cluster (e.g. ray://head:10001, or auto for the one this machine is in)")
    p.add_argument("--concurrency", type=int, default=1, metavar="N",
                   help="workers, each holding one Packer (models loaded once per worker) (default 1)")
    p.add_argument("--resume", action="store_true",
                   help="finish the job that stopped in --output (same input and options): the units it wrote are "
                        "kept, the rest packed, no row twice (refused while the job still runs)")
    p.add_argument("--chunk-records", action="store_true",
                   help="fill the chunks column: one record per input chunk (where it went and why); off by default, "
                        "as it costs more than the packing at 200 chunks; dropped lists every chunk left out either way")
    p.add_argument("--rows-per-unit", type=int, default=None, metavar="N",
                   help="rows a worker reads and packs at a time (default: about four units per worker, at most 500)")
    add_arguments(p)
    p.set_defaults(func=cmd_batch)


def add_commands(subparsers: Any) -> None:
    """Add ``batch`` (its flags are added when the command is named)."""
    command(subparsers, "batch", _batch_args,
            help="pack every row of a JSON Lines or Parquet file into Parquet (Ray Data or a process pool)")
