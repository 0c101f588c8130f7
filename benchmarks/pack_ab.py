"""This checkout's ``pack`` against another checkout's, in one process, calls alternated (A/B).

Loads the other checkout's ``src/edgewise`` under the name ``edgewise_other``, builds chunks of ~110
words from the NQ passages (seeded, the same for both), warms both count caches, then alternates
calls, old then new, ``--reps`` times per row, and prints the median CPU time of each and the median
of the paired ratios. Alternating in one process keeps a shared machine's drift out of the ratio.

    git worktree add ../before <commit>
    .venv/bin/python benchmarks/pack_ab.py --against ../before [--sizes 20,200,2000] [--budgets 4000,32000]
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import random
import statistics
import sys
import time
from pathlib import Path

import edgewise


def load_other(checkout: Path):  # noqa: ANN201
    path = checkout / "src" / "edgewise"
    spec = importlib.util.spec_from_file_location("edgewise_other", path / "__init__.py",
                                                  submodule_search_locations=[str(path)])
    module = importlib.util.module_from_spec(spec)
    sys.modules["edgewise_other"] = module
    spec.loader.exec_module(module)
    return module


def _commit(module_file: Path) -> str:
    """The checkout a module comes from, by its git commit (dirty when it has uncommitted changes)."""
    import subprocess

    root = module_file.resolve().parents[2]
    out = subprocess.run(["git", "-C", str(root), "describe", "--always", "--dirty"], capture_output=True, text=True)
    return f"commit {out.stdout.strip()}" if out.returncode == 0 else "a checkout outside git"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--against", required=True, help="the other checkout (its src/edgewise is loaded)")
    parser.add_argument("--data", help="nq-open-oracle-dev.jsonl.gz or its folder (default: $EDGEWISE_DATA, ../shared/data)")
    parser.add_argument("--sizes", default="20,200,2000")
    parser.add_argument("--budgets", default="4000,32000")
    parser.add_argument("--reps", type=int, default=60)
    parser.add_argument("--counter", choices=["quicktok", "rs-bpe"], default="rs-bpe",
                        help="what this checkout counts on (default rs-bpe: a checkout before the switch has no other)")
    a = parser.parse_args()
    from pack import set_counter  # benchmarks/pack.py

    counter = set_counter(a.counter)
    from edgewise.eval.data import data_path

    other = load_other(Path(a.against))
    with gzip.open(data_path("nq-open-oracle-dev.jsonl.gz", a.data), "rt", encoding="utf-8") as f:
        words = [w for line in f for w in json.loads(line)["ctxs"][0]["text"].split()]
    print(f"this: {_commit(Path(edgewise.__file__))}\nother: {_commit(Path(other.__file__))}\n"
          f"warm pack, CPU time, median of {a.reps} alternated calls; this checkout counts on {counter}\n")
    print("| chunks | budget | other ms | this ms | this / other (median of paired ratios) |")
    print("|---:|---:|---:|---:|---:|")
    rng = random.Random(0)
    for n in (int(s) for s in a.sizes.split(",")):
        chunks = []
        for i in range(n):
            start = rng.randrange(len(words) - 120)
            chunks.append({"id": f"c{i}", "title": "T", "text": " ".join(words[start:start + 110]), "score": 1 - i / n})
        for budget in (int(b) for b in a.budgets.split(",")):
            times: dict[str, list[float]] = {"other": [], "this": []}
            for module in (other, edgewise):
                module.pack("what?", chunks, budget=budget)
            for _ in range(a.reps):
                for name, module in (("other", other), ("this", edgewise)):
                    t = time.process_time()
                    module.pack("what?", chunks, budget=budget)
                    times[name].append(time.process_time() - t)
            ratio = statistics.median(x / y for x, y in zip(times["this"], times["other"]))
            print(f"| {n:,} | {budget:,} | {statistics.median(times['other']) * 1000:.2f} | "
                  f"{statistics.median(times['this']) * 1000:.2f} | {ratio:.3f} |")


if __name__ == "__main__":
    main()
