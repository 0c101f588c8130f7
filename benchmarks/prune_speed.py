"""Pruning 20 fresh passages with the dense sentence head, against scoring the same 20 passages.

Each repetition takes one NQ question's 20-document set (``edgewise.eval.nq.build``: gold at 9,
seed 0, BM25 distractors), empties the dense model's vector cache, and times on the same set:

- **score**: ``shared_dense().score(question, passages)``, the passages as ``title\\ntext``;
- **prune**: ``edgewise.prune.steps.prune(question, chunks, scorer="dense")``, every sentence of every
  chunk in one model call.

Wall and CPU seconds (process time, all threads) per 20-passage set: median (min-max) over
``--questions`` questions x ``--reps`` repetitions, the two alternated. "model texts" is how many
texts went through the model for one set (median over the sets) (the query included): the cost that changes when pruning
embeds each sentence once instead of twice. To compare two versions of the library, run this
script twice, once with ``PYTHONPATH=<other checkout>/src``.

    .venv/bin/python benchmarks/prune_speed.py [--questions 3] [--reps 3] [--data FILE]
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import subprocess
import time
from pathlib import Path

import edgewise
from edgewise.chunk import Chunk
from edgewise.eval.data import data_path
from edgewise.eval.nq import DEV_FILE, build, read_jsonl
from edgewise.prune.steps import prune
from edgewise.score.dense import EmbeddingCache, shared_dense


def commit(path: Path) -> str:
    try:
        out = subprocess.run(["git", "-C", str(path), "describe", "--always", "--dirty"], capture_output=True,
                             text=True, check=True)
        return out.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main(argv: list[str] | None = None) -> dict[str, list[int]]:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--questions", type=int, default=3, help="20-document sets (the first N questions)")
    p.add_argument("--reps", type=int, default=3, help="repetitions over the sets")
    p.add_argument("--data", help="nq-open-oracle-dev.jsonl.gz, or the folder holding it")
    a = p.parse_args(argv)
    rows = read_jsonl(data_path(DEV_FILE, a.data))
    sets = list(itertools.islice(build(rows, docs=20, gold_at=9, seed=0, progress=False), a.questions))
    dense = shared_dense()
    dense.embed(["warm up"])
    calls: list[int] = []
    embed = dense.embed

    def counting(texts, *args, **kwargs):  # noqa: ANN001, ANN202 - counts the texts sent to the model
        calls.append(len(texts))
        return embed(texts, *args, **kwargs)

    dense.embed = counting  # type: ignore[method-assign]
    times: dict[str, tuple[list[float], list[float]]] = {"score": ([], []), "prune": ([], [])}
    texts: dict[str, list[int]] = {"score": [], "prune": []}
    for _ in range(a.reps):
        for s in sets:
            q = s["question"]
            chunks = [Chunk(id=c["id"], text=c["text"], title=c["title"]) for c in s["ctxs"]]
            passages = [f"{c['title']}\n{c['text']}" for c in s["ctxs"]]
            for what, fn in (("score", lambda q=q, p=passages: dense.score(q, p)),
                             ("prune", lambda q=q, c=chunks: prune(q, c, scorer="dense"))):
                dense.cache = EmbeddingCache()
                calls.clear()
                wall, cpu = time.perf_counter(), time.process_time()
                fn()
                times[what][0].append(time.perf_counter() - wall)
                times[what][1].append(time.process_time() - cpu)
                texts[what].append(sum(calls))
    root = Path(edgewise.__file__).resolve().parents[2]
    print(f"edgewise {commit(root)}; {len(sets)} questions x {a.reps} repetitions; "
          f"{len(os.sched_getaffinity(0))} cores; load average {' / '.join(f'{x:.2f}' for x in os.getloadavg())}\n")
    print("| what | model texts per set | wall s, median (min-max) | CPU s, median (min-max) |")
    print("|---|---:|---:|---:|")
    for what, (wall, cpu) in times.items():
        print(f"| {what} 20 passages | {statistics.median(texts[what]):.0f} | {statistics.median(wall):.3f} ({min(wall):.3f}-{max(wall):.3f}) "
              f"| {statistics.median(cpu):.3f} ({min(cpu):.3f}-{max(cpu):.3f}) |")
    ratio = statistics.median(times["prune"][1]) / statistics.median(times["score"][1])
    print(f"\nprune / score, CPU medians: {ratio:.2f}x")
    dense.embed = embed  # type: ignore[method-assign]
    return texts


if __name__ == "__main__":
    main()
