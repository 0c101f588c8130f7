"""What the switch to quicktok costs the packs of a long-lived process, side by side.

Each run is a fresh interpreter (a long-lived process from its start) that builds a ``Packer`` with
default options (cl100k_base, budget 4,000) and packs ``--calls`` requests of 20 fresh chunks in a
loop, far past 4 M counted characters (the point a switch inside a pack would take). Chunks are
windows of 100-120 words (~150 tokens) at random offsets of the NQ passages
(``nq-open-oracle-dev.jsonl.gz``), never drawn twice in a run, so every pack counts fresh text.
Variants:

- ``before``: the checkout given by ``--before-src``, a tree whose counting switches by itself,
  which loads quicktok inside the pack whose counting crosses 4 M characters (the alternative).
- ``construct``: this tree; the ``Packer`` loads quicktok when it is constructed (its ``preload``),
  so no pack does.
- ``background``: this tree, ``Packer(preload=False)``, with quicktok loaded by another thread,
  started just before the call at which the chunks' characters pass ``--threshold`` (what a
  background switch would do). quicktok's load holds the GIL, so the packing thread waits for it.
- ``never``: this tree, ``Packer(preload=False)`` (what ``edgewise.pack`` uses): rs-bpe throughout.

Per call, wall ms (``perf_counter``, from the end of the call before, so that a wait for the GIL
between two calls is counted, as it would delay a request arriving then; the garbage collector runs
as it would, after ``gc.freeze()`` of the loaded input) and the packing thread's CPU ms
(``thread_time``, which other processes on the machine do not inflate); the stats
skip the first ``--skip`` calls (start-up costs of a first pack are not this benchmark's subject).
Columns: ``Packer() ms``, ``Packer() CPU ms``: wall and process CPU time of the construction; ``median``, ``p99``, ``max``: wall ms over
the calls; ``max / median (CPU)``: the same ratio in the thread's CPU time; ``switch``: where
counting changed to quicktok: inside a call (``before``), while another thread loaded
(``background``, the calls made meanwhile), ``at construction``, or ``never``; ``switch call``,
``its ms``, ``its ms / median``: the call that paid for the switch (for ``background`` the slowest
of the calls made while the other thread loaded; for the variants that switch at construction or
never, the call at which the round's ``before`` run switched, on the same input), its wall ms, its
ratio to the median, and the ratio of its CPU time to the median CPU time (a load in another thread
costs this thread no CPU: it waits). The variants run ``--rounds`` times, interleaved (each
round in a rotated order); the summary gives each column's median over the rounds.

First, why not load in the background: ``--gil-reps`` fresh interpreters each load quicktok's
cl100k and o200k (its ``Tokenizer`` class, uncached) while a second thread reads the clock in a
Python loop; the table gives the load's wall and CPU ms and the longest gap of that thread (time it
waited for the GIL).

    .venv/bin/python benchmarks/counter_switch.py --before-src /tmp/old-tok/src > docs/bench/counter-switch.txt
"""

from __future__ import annotations

import argparse
import gc
import gzip
import json
import os
import random
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT / "tests" / "data" / "nq-open-oracle-dev.jsonl.gz"
VARIANTS = ("before", "construct", "background", "never")
HEADER = ("variant", "counter at end", "Packer() ms", "Packer() CPU ms", "calls", "median ms", "p99 ms", "max ms",
          "max / median (CPU)", "switch", "switch call", "its ms", "its ms / median", "its CPU / median CPU")


def passages(path: Path) -> tuple[list[str], list[str], list[str]]:
    """The words of all distinct passages in a row, the passage title of each word, and the questions."""
    words, titles, questions, seen = [], [], [], set()
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            questions.append(row["question"])
            for ctx in row["ctxs"]:
                if ctx["text"] not in seen:
                    seen.add(ctx["text"])
                    split = ctx["text"].split()
                    words += split
                    titles += [ctx["title"]] * len(split)
    return words, titles, questions


def requests(path: Path, calls: int, seed: int) -> list[tuple[str, list[dict]]]:
    words, titles, questions = passages(path)
    rng, drawn, out = random.Random(seed), set(), []
    for _ in range(calls):
        chunks = []
        while len(chunks) < 20:
            start, n = rng.randrange(len(words) - 120), rng.randint(100, 120)
            if (start, n) not in drawn:
                drawn.add((start, n))
                chunks.append({"id": f"w{start}-{n}", "title": titles[start], "text": " ".join(words[start:start + n]),
                               "score": 1.0 - len(chunks) / 20})
        out.append((rng.choice(questions), chunks))
    return out


def child(variant: str, path: Path, calls: int, seed: int, threshold: int) -> dict:
    """One run, in this interpreter: the per-call times and where the switch happened."""
    from edgewise.packing.packer import Packer
    from edgewise.tokens.tokenizers import get_tokenizer

    work = requests(path, calls, seed)
    gc.collect()
    gc.freeze()
    start, start_cpu = time.perf_counter(), time.process_time()
    packer = Packer(budget=4000) if variant in ("before", "construct") else Packer(budget=4000, preload=False)
    construct_ms, construct_cpu = (time.perf_counter() - start) * 1e3, (time.process_time() - start_cpu) * 1e3
    tok = get_tokenizer("cl100k_base")
    wall, cpu, switched, loading, chars, loader = [], [], None, [], 0, None
    last = time.perf_counter()
    for i, (query, chunks) in enumerate(work):
        chars += sum(len(c["text"]) for c in chunks)
        if variant == "background" and loader is None and chars > threshold:
            loader = threading.Thread(target=tok.speed_up)
            loader.start()
        was, alive = getattr(tok, "counter", None), loader is not None and loader.is_alive()
        c = time.thread_time()
        packer.pack(query, chunks)
        cpu.append((time.thread_time() - c) * 1e3)
        now = time.perf_counter()
        wall.append((now - last) * 1e3)  # from the end of the call before: a wait between calls is counted too
        last = now
        if alive:  # the load ran, at least when this call started
            loading.append(i)
        if switched is None and getattr(tok, "counter", None) != was:
            switched = i
    if loader is not None:
        loader.join()
    return {"variant": variant, "counter": getattr(tok, "counter", "?"), "construct_ms": construct_ms,
            "construct_cpu": construct_cpu,
            "wall": wall, "cpu": cpu, "switched": switched, "loading": loading}


def gil_child(name: str) -> dict:
    """quicktok's load of ``name`` in this thread, and the longest a pure-Python thread beside it
    went without running (it reads the clock in a loop: a gap is time it waited for the GIL)."""
    from quicktok import Tokenizer  # the class itself: quicktok.get_encoding would return a cached one

    stop, gaps = threading.Event(), []

    def spin() -> None:
        last, worst = time.perf_counter(), 0.0
        while not stop.is_set():
            now = time.perf_counter()
            worst, last = max(worst, now - last), now
        gaps.append(worst)

    spinner = threading.Thread(target=spin)
    spinner.start()
    time.sleep(0.02)
    start, start_cpu = time.perf_counter(), time.thread_time()
    Tokenizer(name, "")
    load_ms, load_cpu = (time.perf_counter() - start) * 1e3, (time.thread_time() - start_cpu) * 1e3
    stop.set()
    spinner.join()
    return {"encoding": name, "load ms": load_ms, "load CPU ms": load_cpu, "longest stall ms": gaps[0] * 1e3}


def gil_table(reps: int) -> str:
    rows = []
    for _ in range(reps):
        for name in ("cl100k_base", "o200k_base"):
            done = subprocess.run([sys.executable, __file__, "--child-gil", name], capture_output=True, text=True,
                                  check=True)
            rows.append(json.loads(done.stdout.splitlines()[-1]))
    keys = ("encoding", "load ms", "load CPU ms", "longest stall ms")
    lines = ["| " + " | ".join(keys) + " | stall / load |", "|" + "---|" * (len(keys) + 1)]
    lines += ["| " + " | ".join(fmt(k, r[k]) for k in keys) + f" | {r['longest stall ms'] / r['load ms']:.2f}× |"
              for r in rows]
    return "\n".join(lines)


def run(variant: str, src: Path, args: argparse.Namespace) -> dict:
    env = {**os.environ, "PYTHONPATH": str(src)}
    cmd = [sys.executable, __file__, "--child", variant, "--data", str(args.data), "--calls", str(args.calls),
           "--seed", str(args.seed), "--threshold", str(args.threshold)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"the {variant} run failed:\n{done.stderr}")
    return json.loads(done.stdout.splitlines()[-1])


def row(res: dict, skip: int, before_call: int | None) -> dict:
    """A run's table row; ``before_call`` is the call at which the 'before' run of the round switched,
    the call whose time is given for the variants that do not switch inside a call."""
    wall, cpu = res["wall"][skip:], res["cpu"][skip:]
    med, med_cpu = statistics.median(wall), statistics.median(cpu)
    p99 = sorted(wall)[min(len(wall) - 1, int(0.99 * len(wall)))]
    out = {"variant": res["variant"], "counter at end": res["counter"], "Packer() ms": res["construct_ms"],
           "Packer() CPU ms": res["construct_cpu"], "calls": len(wall), "median ms": med, "p99 ms": p99,
           "max ms": max(wall), "max / median (CPU)": max(cpu) / med_cpu}
    if res["loading"]:  # the calls made while another thread loaded: the worst of them
        at = res["loading"]
        call = max(at, key=lambda i: res["wall"][i])
        out["switch"] = f"calls {at[0]}-{at[-1]} (another thread loads)"
    elif res["switched"] is not None:
        call = res["switched"]
        out["switch"] = f"inside call {call}"
    else:
        call = before_call
        out["switch"] = "at construction" if res["counter"] == "quicktok" else "never"
    ms, ms_cpu = (res["wall"][call], res["cpu"][call]) if call is not None else (None, None)
    out.update({"switch call": call, "its ms": ms, "its ms / median": ms / med if ms is not None else None,
                "its CPU / median CPU": ms_cpu / med_cpu if ms_cpu is not None else None})
    return out


def fmt(key: str, value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.2f}×" if "/" in key else f"{value:.1f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def table(rows: list[dict]) -> str:
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(fmt(k, r[k]) for k in HEADER) + " |" for r in rows]
    return "\n".join(lines)


def summary(rows: list[dict], variants: list[str]) -> list[dict]:
    out = []
    for v in variants:
        mine = [r for r in rows if r["variant"] == v]
        s = dict(mine[0])
        for k in HEADER:
            values = [r[k] for r in mine]
            if all(isinstance(x, float) for x in values):
                s[k] = statistics.median(values)
        s["switch"] = "; ".join(dict.fromkeys(r["switch"] for r in mine))
        if all(r["switch"].startswith("calls ") for r in mine):  # the span of the calls made during the loads
            spans = [r["switch"].split()[1].split("-") for r in mine]
            s["switch"] = f"calls {min(int(a) for a, _ in spans)}-{max(int(b) for _, b in spans)} (another thread loads)"
        s["switch call"] = "; ".join(dict.fromkeys(str(r["switch call"]) for r in mine))
        out.append(s)
    return out


def main(argv: list[str] | None = None) -> list[dict]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", type=Path, default=DEFAULT_DATA)
    p.add_argument("--before-src", type=Path, help="src/ of a checkout to run as 'before' (omitted without it)")
    p.add_argument("--variants", default=",".join(VARIANTS))
    p.add_argument("--calls", type=int, default=700)
    p.add_argument("--skip", type=int, default=20)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threshold", type=int, default=4_000_000, help="characters after which 'background' starts its load")
    p.add_argument("--gil-reps", type=int, default=3, help="loads of each encoding timed beside a Python thread")
    p.add_argument("--child", choices=VARIANTS, help=argparse.SUPPRESS)
    p.add_argument("--child-gil", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child_gil:
        print(json.dumps(gil_child(args.child_gil)))
        return []
    if args.child:
        print(json.dumps(child(args.child, args.data, args.calls, args.seed, args.threshold)))
        return []
    variants = [v for v in args.variants.split(",") if v != "before" or args.before_src]
    if "before" in args.variants.split(",") and not args.before_src:
        print("(no --before-src: the 'before' variant is not run)")
    print(f"{args.calls} calls of 20 fresh NQ chunks (cl100k_base, budget 4,000) per run, the first {args.skip} "
          f"left out of the stats; {args.rounds} rounds, variants interleaved; python {sys.version.split()[0]}, "
          f"{os.cpu_count()} cores (shared with other work)\n")
    if args.gil_reps:
        print("quicktok's load (a fresh interpreter each), and the longest a Python thread beside it waited:\n")
        print(gil_table(args.gil_reps) + "\n")
    rows = []
    for r in range(args.rounds):
        order = variants[r % len(variants):] + variants[:r % len(variants)]
        results = {v: run(v, args.before_src if v == "before" else ROOT / "src", args) for v in order}
        before_call = results["before"]["switched"] if "before" in results else None
        rows += [row(results[v], args.skip, before_call) for v in variants]
    if not rows:
        return rows
    print("Every run:\n")
    print(table(rows))
    print("\nMedian over the rounds:\n")
    print(table(summary(rows, variants)))
    return rows


if __name__ == "__main__":
    main()
