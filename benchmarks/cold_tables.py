"""Counting fresh ``<doc>`` blocks with a counter's tables cold, and warm: quicktok, rs-bpe, tiktoken.

In ``benchmarks/pack.py`` other work runs between two packs (drawing fresh chunks, the encode
passes, ``gc.collect()``), so a pack starts with the counter's tables out of the CPU caches. This
times each counter on N fresh blocks (the blocks an N-chunk pack counts, N from ``--sizes``,
default 20) **cold**, right after drawing new chunks and a ``gc.collect()``, and **warm**, right
after it counted N other fresh blocks. Printed: median ms over ``--reps`` (fewer for larger N: at
most 6,000 blocks a counter and state), and characters counted per µs, cold. quicktok (the ``fast``
extra) is left out, and said so, where it is not installed.

    .venv/bin/python benchmarks/cold_tables.py [--reps 300] [--sizes 20,200,2000] [--data FILE]
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
from edgewise.tokens.tokenizers import get_tokenizer  # noqa: E402


def blocks(chunks: list[dict]) -> list[str]:
    return [doc_block(Item(Chunk(c["id"], c["text"], title=c["title"]), "whole", c["text"], 0)) + "\n" for c in chunks]


def main(argv: list[str] | None = None) -> dict[tuple[str, int, str], float]:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--reps", type=int, default=300)
    p.add_argument("--sizes", default="20", help="blocks a call, comma-separated (default 20)")
    p.add_argument("--data", help="nq-open-oracle-dev.jsonl.gz, or the folder holding it")
    a = p.parse_args(argv)
    maker = ChunkMaker(data_path(DEV_FILE, a.data), seed=1)
    tok = get_tokenizer("cl100k_base")
    counters = {"tiktoken": lambda text: len(tok.encoding.encode_ordinary(text))}
    if tok._fast is not None:
        counters["rs-bpe"] = tok._fast.count
    try:
        import quicktok
    except ImportError:
        print("quicktok is not installed (pip install -e '.[fast]'): left out\n")
    else:
        counters["quicktok"] = quicktok.get_encoding("cl100k_base").count
    times: dict[tuple[str, int, str], list[float]] = {}
    chars: dict[tuple[str, int], list[int]] = {}

    def timed(key: tuple[str, int, str], count, texts: list[str], collect: bool) -> None:  # noqa: ANN001
        if collect:
            gc.collect()
        start = time.perf_counter()
        for text in texts:
            count(text)
        times.setdefault(key, []).append(time.perf_counter() - start)

    sizes = [int(n) for n in a.sizes.split(",")]
    for n in sizes:
        for _ in range(max(1, min(a.reps, 6000 // n))):
            for name, count in counters.items():
                first, second = blocks(maker.chunks(n)), blocks(maker.chunks(n))
                timed((name, n, "cold"), count, first, True)
                timed((name, n, "warm"), count, second, False)
                chars.setdefault((name, n), []).append(sum(map(len, first)))
    out = {key: statistics.median(ts) * 1000 for key, ts in times.items()}
    print(f"fresh blocks, median ms over {a.reps} repetitions (at most 6,000 blocks a counter and state)\n")
    print("| counter | blocks | cold ms | warm ms | characters / µs, cold |\n|---|---:|---:|---:|---:|")
    for n in sizes:
        for name in counters:
            cold, warm = out[name, n, "cold"], out[name, n, "warm"]
            print(f"| {name} | {n:,} | {cold:.3f} | {warm:.3f} | {statistics.median(chars[name, n]) / (cold * 1000):.1f} |")
    return out


if __name__ == "__main__":
    main()
