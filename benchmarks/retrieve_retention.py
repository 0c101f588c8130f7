"""What ``edgewise retrieve``'s pruning costs: answers kept and tokens saved per prune threshold.

Held-out NaturalQuestions questions, none of them among the rows the pruning heads and their
thresholds were fitted on (``benchmarks/relevance.py`` tunes on rows 1000-1999 and reports sentence
F1 on rows 0-499; by default this script asks rows 500-999 and draws distractors from rows 0-249).

1. Every question's gold passage (``ctxs[0]``), and the gold passages of the distractor rows, are
   written as one ``.txt`` file each (title on the first line, then the passage) and indexed with
   :func:`edgewise.index.index_paths`, as ``edgewise index`` does (cl100k, 256-token chunks):
   ~750 passages by default.
2. For each question, :func:`edgewise.index.search.retrieve` (hybrid, top 20), then
   :func:`edgewise.index.search.pack_hits` with a :class:`edgewise.Packer` whose options are
   ``--budget`` (2,000 cl100k tokens, the sections layout: what ``edgewise retrieve Q --budget 2000``
   runs) and, per row of the table, ``prune=THRESHOLD`` (absolute, ``prune_scorer="auto"``: the dense
   head with the ``models`` extra). ``edgewise ask`` packs its hits through the same ``Packer.pack``.
3. "answer in prompt": a SQuAD-normalised answer string is in the prompt (the question's own text
   taken out of it). "answers kept" counts, of the questions whose prompt holds an answer without
   pruning, those whose pruned prompt still holds one. "tokens saved" is 1 - (sum of pruned prompt
   tokens / sum of unpruned prompt tokens). The 95% interval is Wilson's; the script names the largest
   threshold whose interval starts at or above 98%, the rule ``retrieve``/``ask``'s default follows.

    .venv/bin/python benchmarks/retrieve_retention.py --data ../shared/data
    .venv/bin/python benchmarks/retrieve_retention.py --data FILE.jsonl.gz --questions 500:520 --distractors 0:30
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from edgewise.errors import InputError
from edgewise.eval.data import data_path
from edgewise.eval.nq import DEV_FILE, has_answer, read_jsonl

TUNE_ROWS = range(1000, 2000)  # what benchmarks/relevance.py fits the sentence heads and thresholds on
THRESHOLDS = (0.02, 0.05, 0.1, 0.15, 0.2, 0.3, 0.4)
TARGET = 0.98  # a default threshold must keep at least this share of answers
HEADER = ("prune threshold", "prompts", "answer in prompt", "answers kept", "95% interval", "mean prompt tokens",
          "tokens saved", "interval >= 98%")


def rows_arg(spec: str) -> range:
    start, _, end = spec.partition(":")
    try:
        r = range(int(start), int(end))
    except ValueError:
        raise argparse.ArgumentTypeError(f"rows must be START:END, but got {spec!r}") from None
    if r.start < 0 or r.stop <= r.start:
        raise argparse.ArgumentTypeError(f"rows must be START:END with 0 <= START < END, but got {spec!r}")
    return r


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default=None, help="the NQ dev file, or the folder holding it (default ../shared/data)")
    p.add_argument("--questions", type=rows_arg, default=range(500, 1000), metavar="START:END",
                   help="rows whose questions are asked (default 500:1000)")
    p.add_argument("--distractors", type=rows_arg, default=range(0, 250), metavar="START:END",
                   help="rows whose gold passages are indexed too, never asked (default 0:250)")
    p.add_argument("--thresholds", default=",".join(map(str, THRESHOLDS)), help="prune thresholds to compare")
    p.add_argument("--budget", type=int, default=2000)
    p.add_argument("--top-n", type=int, default=20)
    p.add_argument("--store", default=None, help="where the index is written (default: a temporary folder)")
    return p.parse_args(argv)


def check_rows(a: argparse.Namespace, n_rows: int) -> None:
    for name in ("questions", "distractors"):
        r = getattr(a, name)
        if r.stop > n_rows:
            raise InputError(f"--{name} {r.start}:{r.stop} needs {r.stop} rows, but the data file has {n_rows}")
        if r.start < TUNE_ROWS.stop and TUNE_ROWS.start < r.stop:
            raise InputError(f"--{name} {r.start}:{r.stop} overlaps the rows the pruning thresholds were tuned on "
                             f"({TUNE_ROWS.start}:{TUNE_ROWS.stop}); pick rows below {TUNE_ROWS.start}")
    if a.questions.start < a.distractors.stop and a.distractors.start < a.questions.stop:
        raise InputError(f"--questions {a.questions.start}:{a.questions.stop} and --distractors "
                         f"{a.distractors.start}:{a.distractors.stop} must not overlap")


def write_passages(rows: list[dict], idx: list[int], folder: Path) -> None:
    """One ``.txt`` per row: its gold passage's title on the first line, then the passage."""
    folder.mkdir(parents=True, exist_ok=True)
    for i in idx:
        ctx = rows[i]["ctxs"][0]
        (folder / f"nq-{i:04d}.txt").write_text(f"{ctx['title']}\n\n{ctx['text']}\n", encoding="utf-8")


@dataclass
class Tally:
    prompts: int = 0
    has_answer: int = 0
    kept: int = 0  # of the questions whose unpruned prompt holds an answer
    tokens: int = 0
    lost: list[str] = field(default_factory=list)


def holds_answer(prompt: str, question: str, answers: list[str]) -> bool:
    return has_answer(prompt.replace(question, " "), answers)


def measure(a: argparse.Namespace, rows: list[dict], store_dir: Path) -> tuple[dict, dict]:
    from edgewise.index import index_paths
    from edgewise.index.lance import open_store
    from edgewise.index.search import pack_hits, retrieve
    from edgewise.options import PackOptions
    from edgewise.packing.packer import Packer

    docs = store_dir / "passages"
    write_passages(rows, [*a.questions, *a.distractors], docs)
    started = time.perf_counter()
    report = index_paths([docs], store_dir / "store")
    info = {"passages": len(a.questions) + len(a.distractors), "chunks": report.total_chunks,
            "index_seconds": time.perf_counter() - started}
    store = open_store(store_dir / "store")
    base = PackOptions(budget=a.budget)
    thresholds = [float(t) for t in a.thresholds.split(",") if t.strip()]
    packers = {None: Packer(base), **{t: Packer(base.replace(prune=t)) for t in thresholds}}
    tallies = {t: Tally() for t in packers}
    gold_found = 0
    started = time.perf_counter()
    for i in a.questions:
        q, answers = rows[i]["question"], rows[i]["answers"]
        hits = retrieve(store, q, top_n=a.top_n)
        gold_found += any(Path(h.row.source).name == f"nq-{i:04d}.txt" for h in hits)
        unpruned = None
        for t, packer in packers.items():
            packed = pack_hits(packer, q, hits)
            found = holds_answer(packed.prompt, q, answers)
            unpruned = found if t is None else unpruned
            tally = tallies[t]
            tally.prompts += 1
            tally.has_answer += found
            tally.tokens += packed.debug_info.prompt_tokens
            if unpruned:
                tally.kept += found
                if not found:
                    tally.lost.append(f"row {i}: {q!r} (answers {answers})")
    info.update(gold_retrieved=gold_found, pack_seconds=time.perf_counter() - started)
    return tallies, info


def table(tallies: dict) -> tuple[str, list[tuple], float | None]:
    """The table, its rows, and the largest threshold whose 95% interval of answers kept starts at or
    above 98% (None: no threshold does, so pruning should be off)."""
    from edgewise.eval.metrics import wilson

    base = tallies[None]
    out, chosen = [], None
    for t, tally in tallies.items():
        kept = tally.kept / base.has_answer if base.has_answer else 0.0
        low, high = wilson(tally.kept, base.has_answer) if base.has_answer else (0.0, 0.0)
        saved = 1 - tally.tokens / base.tokens if base.tokens else 0.0
        if t is not None and low >= TARGET:
            chosen = t if chosen is None else max(chosen, t)
        interval, meets = ("-", "-") if t is None else (f"{low:.1%}-{high:.1%}", "yes" if low >= TARGET else "no")
        out.append(("off" if t is None else f"{t:g}", tally.prompts, tally.has_answer,
                    f"{kept:.1%} ({tally.kept}/{base.has_answer})", interval,
                    round(tally.tokens / max(tally.prompts, 1)), f"{saved:.1%}", meets))
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in out]
    return "\n".join(lines), out, chosen


def machine() -> str:
    cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), "?")

    def v(dist: str) -> str:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            return "not installed"

    return (f"{cpu}, {len(os.sched_getaffinity(0))} cores (shared with other jobs), Python {platform.python_version()}, "
            f"edgewise {v('edgewise')}, lancedb {v('lancedb')}, onnxruntime {v('onnxruntime')}")


def main(argv: list[str] | None = None) -> tuple[list[tuple], float | None]:
    a = parse(argv)
    path = data_path(DEV_FILE, a.data)
    rows = read_jsonl(path)
    check_rows(a, len(rows))
    with tempfile.TemporaryDirectory(prefix="edgewise-retention-") as tmp:
        tallies, info = measure(a, rows, Path(a.store) if a.store else Path(tmp))
    from edgewise.prune.scores import _resolve

    text, out, chosen = table(tallies)
    n = len(a.questions)
    print(f"Machine: {machine()}.")
    print(f"Data: `{path.name}`, questions rows {a.questions.start}-{a.questions.stop - 1} ({n}), distractor rows "
          f"{a.distractors.start}-{a.distractors.stop - 1}; thresholds tuned on rows {TUNE_ROWS.start}-{TUNE_ROWS.stop - 1}.")
    print(f"Indexed {info['passages']} passages as {info['chunks']} chunks in {info['index_seconds']:.1f} s; the gold "
          f"passage among the top {a.top_n} hits for {info['gold_retrieved']} of {n} questions; retrieve + "
          f"{len(tallies)} packs per question: {info['pack_seconds']:.1f} s in all.")
    print(f"Packed with budget {a.budget} (cl100k_base, sections layout); sentence scorer: {_resolve('auto')}.\n")
    print(text)
    print(f"\nThe largest threshold whose 95% interval of answers kept starts at or above {TARGET:.0%}: "
          f"{'none (pruning off)' if chosen is None else f'{chosen:g}'}.")
    for t, tally in tallies.items():
        if t is not None and tally.lost:
            print(f"\nprune {t:g} lost the answer in {len(tally.lost)}: " + "; ".join(tally.lost[:5])
                  + ("; ..." if len(tally.lost) > 5 else ""))
    sys.stdout.flush()
    return out, chosen


if __name__ == "__main__":
    main()
