"""Whether a completion model answers a ``sections``-layout prompt, with and without ``cue=question``.

On held-out qa examples (``--offset``, default 500: rows no reported table uses), the pipeline's
``sections`` prompt at 20 documents (the conditions of EVALUATION.md's summaries table) is given to
the bundled Gemma 3 270M as it is and with the cue appended; the table counts the answers that are
not empty and the ones that are right (best-subspan exact match, the qa metric).

    .venv/bin/python benchmarks/eval_answer_cue.py --data ../shared/data > docs/bench/eval-answer-cue-qa20.txt
"""

from __future__ import annotations

import argparse

from edgewise.eval.metrics import first_line, get_metric
from edgewise.eval.runner import build_prompt, parse_condition
from edgewise.eval.tasks import build_task
from edgewise.llm.local import LocalBackend

PIPELINE = ("edgewise:order=edges,scorer=dense,rescore=true,layout=sections,budget=1200,high_importance_k=3,"
            "summary_tokens=40,summaries=auto")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", help="the NQ file or its folder (default: $EDGEWISE_DATA, else tests/data)")
    p.add_argument("--examples", type=int, default=20)
    p.add_argument("--offset", type=int, default=500)
    p.add_argument("--threads", type=int, default=2)
    a = p.parse_args(argv)
    task = build_task("qa", positions=[0], docs=20, examples=a.examples, offset=a.offset, data=a.data)
    metric = get_metric("best_subspan_em")
    llm = LocalBackend(n_threads=a.threads)
    rows = []
    for cue in (None, "question"):
        cond = parse_condition(PIPELINE + (f",cue={cue}" if cue else ""))
        answered = right = 0
        for ex in task.examples:
            out = llm.complete(build_prompt(task, ex, 0, cond).text, max_tokens=task.max_tokens, stop=["\n"]).text
            answered += bool(first_line(out).strip())
            right += metric(out, ex.answers) > 0
        rows.append((cue or "none", answered, right))
    print(f"qa, 20 documents, held-out examples {a.offset}-{a.offset + a.examples - 1}; {llm.model}; {PIPELINE}\n")
    print("| cue | examples | answers not empty | answers right |")
    print("| --- | ---: | ---: | ---: |")
    for cue, answered, right in rows:
        print(f"| {cue} | {a.examples} | {answered} | {right} |")


if __name__ == "__main__":
    main()
