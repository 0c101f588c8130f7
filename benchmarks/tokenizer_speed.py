"""Exact cl100k tokenizers side by side: tiktoken per text and batched, and the exact alternatives
installed from PyPI, on ~150-token chunks of real NQ text; ids checked on the whole corpus.

Implementations (each skipped, and said so, when its package is not installed):

- ``tiktoken``: the Encoding edgewise uses (:func:`edgewise.tokens.encodings.load_encoding`), one
  ``encode_ordinary`` call per text; ``tiktoken batch``: one ``encode_ordinary_batch`` call (its
  thread pool).
- ``bpe-openai``, ``rs-bpe``, ``riptoken``, ``quicktok-v1``: per text (``encode_ordinary`` or
  ``encode``) and, where the package has one, its batch call; ``rs-bpe count``: its ``count``,
  which builds no list of ids (edgewise needs counts more often than ids).

Ids: every text of the NQ file (each passage, title and question), ``--fuzz`` random strings of
tricky pieces (whitespace runs, CRLF, digits, apostrophes, several scripts, combining marks, emoji,
special-token strings) and every chunk timed is encoded
by each implementation and compared with tiktoken's ids; an implementation that differs anywhere
is marked, and may not be adopted whatever its speed. Load: CPU time of a fresh interpreter that
imports the package and builds the cl100k encoding (the bare interpreter's start-up is given too).

Times are CPU ms of this process (all threads: the batch calls use several) and wall ms, median
over ``--reps`` repetitions; within a repetition the implementations run in a rotated order on
the same chunks. Chunks are windows of 100-120 words at random offsets in the concatenated passages.

    .venv/bin/python benchmarks/tokenizer_speed.py --reps 5 > docs/bench/tokenizers-exact-cl100k-candidates.txt

(Implementations that are not installed are skipped, and the output says so.)
"""

from __future__ import annotations

import argparse
import gc
import gzip
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT / "tests" / "data" / "nq-open-oracle-dev.jsonl.gz"
WORDS = (100, 120)  # NQ passages run ~1.36 cl100k tokens a word: ~150 tokens

# name: (package, code that builds it in a fresh interpreter, per-text ids, batch ids or None)
Impl = tuple[str, str, Callable[[Any, str], list[int]], Callable[[Any, list[str]], list[list[int]]] | None]
IMPLS: dict[str, Impl] = {
    "tiktoken": ("tiktoken", "from edgewise.tokens.encodings import load_encoding; enc = load_encoding('cl100k_base')",
                 lambda e, t: e.encode_ordinary(t), lambda e, ts: e.encode_ordinary_batch(ts)),
    "bpe-openai": ("bpe_openai", "import bpe_openai; enc = bpe_openai.get_encoding('cl100k_base')",
                   lambda e, t: e.encode_ordinary(t), lambda e, ts: e.encode_ordinary_batch(ts)),
    "rs-bpe": ("rs_bpe", "import rs_bpe; enc = rs_bpe.openai.cl100k_base()",
               lambda e, t: e.encode(t), lambda e, ts: e.encode_batch(ts)[0]),  # (ids, tokens, seconds)
    "riptoken": ("riptoken", "import riptoken; from edgewise.tokens.encodings import load_encoding; "
                 "t = load_encoding('cl100k_base'); "
                 "enc = riptoken.CoreBPE(t._mergeable_ranks, t._special_tokens, t._pat_str)",
                 lambda e, t: e.encode_ordinary(t), lambda e, ts: e.encode_ordinary_batch(ts)),
    "quicktok-v1": ("quicktok", "import quicktok; enc = quicktok.get_encoding('cl100k_base')",
                    lambda e, t: e.encode_ordinary(t), None),
}
COUNTERS: dict[str, tuple[str, Callable[[Any, str], int]]] = {"rs-bpe count": ("rs-bpe", lambda e, t: e.count(t))}


def build(name: str) -> Any:
    scope: dict[str, Any] = {}
    exec(IMPLS[name][1], scope)  # the same code the load timing runs in a fresh interpreter
    return scope["enc"]


def installed(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(IMPLS[name][0]) is not None


def corpus(path: Path) -> tuple[list[str], list[str]]:
    """Every text of the NQ file (passages, titles, questions), and the passages' words in order."""
    texts, words = [], []
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            ctx = row["ctxs"][0]
            texts += [ctx["text"], ctx["title"], row["question"]]
            words += ctx["text"].split()
    return texts, words


# what a pre-tokenizer can get wrong: runs of spaces and line breaks, digits, apostrophes, case,
# several scripts, combining marks, emoji, and special-token strings (plain text here)
TRICKY = [" ", "  ", "\n", "\r\n", "\t", "\u00a0", "\u3000", "0", "12", "345", "'s", "'LL", "a", "Z", "é", "e\u0301",
          "Ж", "λ", "東京", "한국", "مرحبا", "हिन्दी", "🙂", "👩‍💻", "!", "...", "/", "<|endoftext|>", "<|fim_prefix|>", "$", "_"]


def fuzz(n: int, rng: random.Random) -> list[str]:
    """``n`` random strings of 1-40 pieces drawn from :data:`TRICKY` and ASCII words."""
    pool = TRICKY + ["the", "The", "NASA", "don't", "x1", "foo_bar", "http://a.b/c?d=1"]
    return ["".join(rng.choice(pool) for _ in range(rng.randint(1, 40))) for _ in range(n)]


def chunks(words: list[str], n: int, rng: random.Random) -> list[str]:
    lo, hi = WORDS
    out = []
    for _ in range(n):
        start = rng.randrange(len(words) - hi)
        out.append(" ".join(words[start : start + rng.randint(lo, hi)]))
    return out


def timed(fn: Callable[[], Any]) -> tuple[float, float]:
    gc.collect()
    c, w = time.process_time(), time.perf_counter()
    fn()
    return (time.process_time() - c) * 1000, (time.perf_counter() - w) * 1000


def load_cpu_ms(code: str, runs: int) -> float:
    """Median CPU ms of a fresh interpreter running ``code``."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    out = []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([sys.executable, "-c", code], check=True, env=env)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        out.append((after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000)
    return statistics.median(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="nq-open-oracle-dev.jsonl.gz")
    parser.add_argument("--sizes", default="20,200,2000,20000")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--load-runs", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--fuzz", type=int, default=5000, help="random tricky strings added to the ids check")
    args = parser.parse_args()
    names = [n for n in IMPLS if installed(n)]
    missing = [n for n in IMPLS if n not in names]
    encs = {n: build(n) for n in names}
    ref = encs["tiktoken"]
    texts, words = corpus(args.data)
    rng = random.Random(args.seed)
    sizes = [int(s) for s in args.sizes.split(",")]
    inputs = {n: chunks(words, n, rng) for n in sizes}
    odd = fuzz(args.fuzz, rng)
    all_texts = texts + odd + [t for n in sizes for t in inputs[n]]
    want = [ref.encode_ordinary(t) for t in all_texts]

    same: dict[str, str] = {}
    for n in names:
        one, batch = IMPLS[n][2], IMPLS[n][3]
        bad = sum(one(encs[n], t) != w for t, w in zip(all_texts, want))
        if batch is not None:
            bad += sum(list(g) != w for g, w in zip(batch(encs[n], all_texts), want))
        same[n] = "yes" if bad == 0 else f"NO ({bad} texts differ)"
    for c, (n, count) in COUNTERS.items():
        if n in encs:
            bad = sum(count(encs[n], t) != len(w) for t, w in zip(all_texts, want))
            same[c] = "yes (counts)" if bad == 0 else f"NO ({bad} counts differ)"

    bare = load_cpu_ms("pass", args.load_runs)
    loads = {n: load_cpu_ms(IMPLS[n][1], args.load_runs) for n in names}

    runs: dict[tuple[str, int], list[tuple[float, float]]] = {}
    jobs: list[tuple[str, Callable[[list[str]], Any]]] = []
    for n in names:
        e, one, batch = encs[n], IMPLS[n][2], IMPLS[n][3]
        jobs.append((n, lambda ts, e=e, one=one: [one(e, t) for t in ts]))
        if batch is not None:
            jobs.append((f"{n} batch", lambda ts, e=e, batch=batch: batch(e, ts)))
    for c, (n, count) in COUNTERS.items():
        if n in encs:
            jobs.append((c, lambda ts, e=encs[n], count=count: [count(e, t) for t in ts]))
    for size in sizes:
        ts = inputs[size]
        for rep in range(args.reps):
            k = rep % len(jobs)
            for label, fn in jobs[k:] + jobs[:k]:
                runs.setdefault((label, size), []).append(timed(lambda fn=fn, ts=ts: fn(ts)))

    load = " / ".join(open("/proc/loadavg").read().split()[:3]) if sys.platform == "linux" else "?"
    versions = {}
    from importlib import metadata

    for dist in ("tiktoken", "bpe-openai", "rs-bpe", "riptoken", "quicktok-v1"):
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            pass
    tokens = {s: sum(len(ref.encode_ordinary(t)) for t in inputs[s]) for s in sizes}
    print(f"Python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average {load}; "
          + ", ".join(f"{k} {v}" for k, v in versions.items()))
    print(f"data: {args.data.name}; ids compared on {len(all_texts):,} texts ({len(texts):,} from the file, "
          f"{len(odd):,} random tricky strings, the rest the chunks timed); "
          f"chunk tokens: " + ", ".join(f"{s:,} chunks = {tokens[s]:,}" for s in sizes))
    if missing:
        print("not installed (skipped): " + ", ".join(missing))
    print(f"\nload: fresh interpreter, import + build cl100k, median CPU ms of {args.load_runs} "
          f"(a bare `python -c pass` is {bare:.0f} ms)\n")
    print("| implementation | identical ids | load CPU ms |")
    print("|---|---|---:|")
    for n in names:
        print(f"| {n} | {same[n]} | {loads[n]:.0f} |")
    for c, (n, _) in COUNTERS.items():
        if c in same:
            print(f"| {c} | {same[c]} | (as {n}) |")
    print(f"\nencode: median CPU ms (wall ms) of {args.reps}; × = tiktoken per-text CPU time / this one's\n")
    print("| implementation | " + " | ".join(f"{s:,} chunks" for s in sizes) + " |")
    print("|---|" + "---:|" * len(sizes))
    base = {s: statistics.median(c for c, _ in runs[("tiktoken", s)]) for s in sizes}
    for label, _ in jobs:
        cells = []
        for s in sizes:
            cpu = statistics.median(c for c, _ in runs[(label, s)])
            wall = statistics.median(w for _, w in runs[(label, s)])
            cells.append(f"{cpu:.1f} ({wall:.1f}) {base[s] / cpu:.2f}×" if cpu else f"{cpu:.1f} ({wall:.1f})")
        print(f"| {label} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
