"""Counting 20 fresh ``<doc>`` blocks with a counter's tables cold, and warm: rs-bpe against tiktoken.

In ``benchmarks/pack.py`` other work runs between two packs (drawing fresh chunks, the encode
passes, ``gc.collect()``), so a pack starts with the counter's tables out of the CPU caches. This
times each counter on 20 fresh blocks (the blocks a 20-chunk pack counts) **cold**, right after
drawing new chunks and a ``gc.collect()``, and **warm**, right after it counted 20 other fresh
blocks. Times are medians over ``--reps``, in ms.

    .venv/bin/python benchmarks/cold_tables.py [--reps 300] [--data FILE]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pack import ChunkMaker  # noqa: E402

from edgewise.chunk import Chunk  # noqa: E402
from edgewise.eval.data import data_path  # noqa: E402
from edgewise.eval.nq import DEV_FILE  # noqa: E402
from edgewise.layout.base import Item, doc_block  # noqa: E402
from edgewise.tokens import get_tokenizer  # noqa: E402


def blocks(chunks: list[dict]) -> list[str]:
    return [doc_block(Item(Chunk(c["id"], c["text"], title=c["title"]), "whole", c["text"], 0)) + "\n" for c in chunks]


def main(argv: list[str] | None = None) -> dict[str, float]:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--reps", type=int, default=300)
    p.add_argument("--data", help="nq-open-oracle-dev.jsonl.gz, or the folder holding it")
    a = p.parse_args(argv)
    maker = ChunkMaker(data_path(DEV_FILE, a.data), seed=1)
    tok = get_tokenizer("cl100k_base")
    tiktoken_count = lambda text: len(tok.encoding.encode_ordinary(text))  # noqa: E731
    rs_count = tok._fast.count if tok._fast is not None else tiktoken_count
    times: dict[str, list[float]] = {}

    def timed(name: str, count, texts: list[str], collect: bool) -> None:  # noqa: ANN001
        if collect:
            gc.collect()
        start = time.perf_counter()
        for text in texts:
            count(text)
        times.setdefault(name, []).append(time.perf_counter() - start)

    for _ in range(a.reps):
        for name, count in (("rs-bpe", rs_count), ("tiktoken", tiktoken_count)):
            first, second = blocks(maker.chunks(20)), blocks(maker.chunks(20))
            timed(f"{name}, cold", count, first, True)
            timed(f"{name}, warm", count, second, False)
    out = {name: statistics.median(ts) * 1000 for name, ts in times.items()}
    print(f"20 fresh blocks a call, {a.reps} repetitions, median ms\n")
    print("| counter | ms |\n|---|---:|")
    for name, ms in out.items():
        print(f"| {name} | {ms:.3f} |")
    return out


if __name__ == "__main__":
    main()
