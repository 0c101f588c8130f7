"""Which pruning threshold an evaluation condition may use: answers kept and tokens saved per threshold.

The qa task of ``edgewise eval run`` (NaturalQuestions, the gold passage plus BM25-mined distractors
that hold no answer string), built exactly as the evaluation builds it, but on questions the
evaluation does not report: by default the qa examples from built row 500 on (the evaluation asks
the first 100 or so), none of them among the rows the pruning heads were fitted on (1000-1999 of the
data file; the built rows from 500 on start near data row 520).

For each question, the prompt of the condition
``edgewise:order=edges,scorer=dense,rescore=true,prune=T,prune_scorer=SCORER`` (what
:func:`edgewise.eval.runner.build_prompt` builds for it) is checked for an answer string (SQuAD
normalisation, the question's own text taken out). "answers kept" counts, of the questions whose
unpruned prompt holds an answer, those whose pruned prompt still holds one; "tokens saved" is
1 - (pruned prompt tokens / unpruned prompt tokens), summed over the questions. The 95% interval is
Wilson's; the script names the largest threshold whose interval starts at or above 98%: the setting
the evaluation's pruned condition uses ("keeps >= 98% of answers", not the F1-best threshold).

    .venv/bin/python benchmarks/eval_prune_retention.py --data ../shared/data --docs 20
    .venv/bin/python benchmarks/eval_prune_retention.py --data FILE.jsonl.gz --examples 20 --offset 0
"""

from __future__ import annotations

import argparse
import platform
import sys
import time

from edgewise.eval.metrics import wilson
from edgewise.eval.nq import has_answer
from edgewise.eval.runner import build_prompt, parse_condition
from edgewise.eval.tasks import build_task

THRESHOLDS = (0.02, 0.05, 0.1, 0.2, 0.3)
TARGET = 0.98
PIPELINE = "edgewise:order=edges,scorer=dense,rescore=true"
HEADER = ("prune threshold", "prompts", "answer in prompt", "answers kept", "95% interval", "mean prompt tokens",
          "tokens saved", f"interval >= {TARGET:.0%}")


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default=None, help="the NQ dev file, or the folder holding it (default ../shared/data)")
    p.add_argument("--docs", type=int, default=20, help="documents per question (default 20)")
    p.add_argument("--examples", type=int, default=300, help="questions (default 300)")
    p.add_argument("--offset", type=int, default=500, help="first built qa example asked (default 500)")
    p.add_argument("--thresholds", default=",".join(map(str, THRESHOLDS)), help="prune thresholds to compare")
    p.add_argument("--prune-scorer", default="dense", help="sentence scorer of the pruned condition (default dense)")
    return p.parse_args(argv)


def _answer_in(prompt: str, question: str, answers: list[str]) -> bool:
    return has_answer(prompt.replace(question, " "), answers)


def measure(a: argparse.Namespace) -> tuple[list[list[str]], str | None]:
    task = build_task("qa", examples=a.examples, docs=a.docs, offset=a.offset, data=a.data)
    base = parse_condition(PIPELINE)
    thresholds = [float(t) for t in a.thresholds.split(",") if t.strip()]
    conds = [parse_condition(f"{PIPELINE},prune={t:g},prune_scorer={a.prune_scorer}") for t in thresholds]
    held, tokens0 = [], 0
    kept = [0] * len(conds)
    tokens = [0] * len(conds)
    for ex in task.examples:
        p0 = build_prompt(task, ex, 0, base)
        if not _answer_in(p0.text, ex.question, ex.answers):
            continue
        held.append(ex.id)
        tokens0 += p0.packed_tokens
        for i, c in enumerate(conds):
            p = build_prompt(task, ex, 0, c)
            kept[i] += _answer_in(p.text, ex.question, ex.answers)
            tokens[i] += p.packed_tokens
    n = len(held)
    rows = [["none", str(len(task.examples)), str(n), "100.0%", "-", f"{tokens0 / max(n, 1):.0f}", "0.0%", "-"]]
    chosen = None
    for t, k, tok in zip(thresholds, kept, tokens):
        lo, hi = wilson(k, n)
        ok = lo >= TARGET
        if ok:
            chosen = f"{t:g}"
        rows.append([f"{t:g}", str(len(task.examples)), str(n), f"{k / n:.1%} ({k}/{n})", f"{lo:.1%}–{hi:.1%}",
                     f"{tok / n:.0f}", f"{1 - tok / tokens0:.1%}", "yes" if ok else "no"])
    return rows, chosen


def main(argv: list[str] | None = None) -> None:
    a = parse(argv)
    start = time.perf_counter()
    rows, chosen = measure(a)
    print(f"# qa, {a.docs} documents, built examples {a.offset}-{a.offset + a.examples - 1}, condition "
          f"{PIPELINE},prune=T,prune_scorer={a.prune_scorer}")
    print(f"# {platform.machine()}, Python {platform.python_version()}, {time.perf_counter() - start:.0f} s")
    print("| " + " | ".join(HEADER) + " |")
    print("|" + "---|" * len(HEADER))
    for r in rows:
        print("| " + " | ".join(r) + " |")
    print(f"\nlargest threshold keeping >= {TARGET:.0%} of answers (interval's low end): {chosen or 'none'}")


if __name__ == "__main__":
    main(sys.argv[1:])
