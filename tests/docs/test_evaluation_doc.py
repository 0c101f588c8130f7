"""EVALUATION.md is what the committed raw results say, under today's code.

The raw results of every run quoted in EVALUATION.md are committed in ``docs/eval/runs/NAME/``
(``results.jsonl`` and ``run.json``, as ``edgewise eval run`` wrote them). These tests recompute
from them what the document states, so a table edited by hand, a metric changed after the run, or
a task builder that no longer builds the same examples fails here.
"""

from __future__ import annotations

import gzip
import inspect
import json
import re
from pathlib import Path

import pytest

from edgewise.eval.metrics import get_metric
from edgewise.eval.report import building, building_markdown, markdown, paired, paired_markdown, summarize
from edgewise.eval.runner import build_prompt, parse_condition
from edgewise.eval.store import Store
from edgewise.eval.tasks import TASKS, build_task

from ..conftest import DATA, ROOT

RUNS = ROOT / "docs" / "eval" / "runs"
DOC = (ROOT / "EVALUATION.md").read_text(encoding="utf-8")
RUN_DIRS = sorted(p for p in RUNS.iterdir() if (p / "run.json").exists()) if RUNS.is_dir() else []


def _rebuilt(run: Path) -> object:
    """A run whose prompts have summaries an LLM wrote is rebuilt from their cache, but the local
    backend loads Gemma (the ``eval`` extra) to name the model; a condition packed for a local model
    (``model=gemma-3-270m``) counts with that model's own vocabulary, read from its GGUF file (the
    ``eval`` extra too): those checks are make test's."""
    manifest = (run / "run.json").read_text(encoding="utf-8")
    local = "summaries=llm" in manifest or "model=gemma-3-270m" in manifest or "model=qwen" in manifest
    return pytest.param(run, id=run.name, marks=[pytest.mark.slow] if local else [])


def _load(run: Path) -> tuple[list[dict], dict]:
    return Store(run).load(), json.loads((run / "run.json").read_text(encoding="utf-8"))


def _task(manifest: dict):
    builder = TASKS[manifest["task"]]
    accepted = inspect.signature(builder).parameters
    opts = {k: v for k, v in manifest["task_params"].items() if k in accepted}
    return build_task(manifest["task"], positions=manifest["positions"], **opts)


def test_every_run_quoted_in_the_document_is_committed():
    quoted = set(re.findall(r"docs/eval/runs/([a-z0-9_.-]+)", DOC))
    assert quoted, "EVALUATION.md quotes no run"
    committed = {p.name for p in RUNS.iterdir() if p.is_dir()}  # rag: benchmarks/retrieval.py's, no run.json
    assert quoted <= committed, f"quoted but not committed: {quoted - committed}"


def _against(manifest: dict) -> str:
    """What a run's conditions are paired with: the baseline, or (a run without one, such as a
    comparison of three pipelines) its first condition, as ``edgewise eval report --against``."""
    names = [parse_condition(c).name for c in manifest["conditions"]]
    return "baseline" if "baseline" in names else names[0]


@pytest.mark.parametrize("run", RUN_DIRS, ids=lambda p: p.name)
def test_document_tables_are_the_report_of_the_committed_results(run: Path):
    results, manifest = _load(run)
    assert len({r["key"] for r in results}) == len(results)
    pairs = paired(results, against=_against(manifest))
    others = {r["condition"] for r in results if r.get("position") is not None} - {_against(manifest)}
    assert pairs or not others, f"{run.name}: no condition is paired with {_against(manifest)}"  # a pilot: baseline alone
    table = markdown(summarize(results)).splitlines()[2:] + paired_markdown(pairs).splitlines()[2:]
    table += building_markdown(building(results)).splitlines()[2:]  # runs that recorded build_seconds
    missing = [line for line in table if line not in DOC]
    assert not missing, f"rows of {run.name} not in EVALUATION.md (regenerate it): {missing}"


@pytest.mark.parametrize("run", RUN_DIRS, ids=lambda p: p.name)
def test_stored_correctness_is_the_metric_of_the_stored_prediction(run: Path):
    results, manifest = _load(run)
    metric = get_metric(manifest["metric"])
    wrong = [r["key"] for r in results if metric(r["prediction"], r["answers"]) != r["correct"]]
    assert not wrong


@pytest.mark.parametrize("run", [_rebuilt(r) for r in RUN_DIRS])
def test_the_examples_and_prompts_are_what_the_code_builds_today(run: Path, monkeypatch):
    monkeypatch.chdir(ROOT)  # conditions name files (calibrated:docs/eval/runs/...) as the commands did
    if not DATA.is_dir():
        pytest.skip(f"shared data not found at {DATA}")
    results, manifest = _load(run)
    task = _task(manifest)
    examples = {e.id: e for e in task.examples}
    # every stored result is for an example the task builds, with the same answers
    assert {r["example"] for r in results} <= set(examples)
    assert all(list(r["answers"]) == list(examples[r["example"]].answers) for r in results)
    # the whole grid was run: every (example, position, condition) once
    conds = [parse_condition(c) for c in manifest["conditions"]]
    expected = sum(len(task.positions) if c.positional else 1 for c in conds) * len(task.examples)
    assert len(results) == expected
    # prompts rebuilt today have the token counts that were measured (first two examples, every condition)
    first = [e.id for e in task.examples[:2]]
    for r in (r for r in results if r["example"] in first):
        c = next(c for c in conds if c.name == r["condition"])
        prompt = build_prompt(task, examples[r["example"]], r["position"], c)
        assert (prompt.packed_tokens, prompt.prompt_position) == (r["packed_tokens"], r["prompt_position"]), r["key"]


def test_the_answer_cue_table_is_the_committed_run():
    raw = (ROOT / "docs" / "bench" / "eval-answer-cue-qa20.txt").read_text(encoding="utf-8")
    rows = [line for line in raw.splitlines() if line.startswith("|")]
    assert len(rows) == 4 and all(line in DOC for line in rows)


def test_the_cost_of_writing_summaries_is_read_off_the_committed_run():
    """The questions whose LLM summaries this run wrote (the rest came from the cache) and what
    they cost, as EVALUATION.md states them."""
    results, _ = _load(RUNS / "summaries20")
    per: dict[str, float] = {}
    for r in results:
        if "summaries=llm" in r["condition"]:
            per[r["example"]] = per.get(r["example"], 0.0) + r["build_seconds"]
    fresh = [s for s in per.values() if s > 2]  # a cached question's cells cost hundredths of a second
    assert sorted(per.values())[len(per) - len(fresh) - 1] < 0.5  # the split is clean
    answer = sum(r["seconds"] for r in results if "summaries=llm" in r["condition"]) / len(per) / 3
    stated = (f"{sum(fresh):.0f} s for the {len(fresh)}, {sum(fresh) / len(fresh):.1f} s a question "
              f"({min(fresh):.0f}–{max(fresh):.0f} s), about {sum(fresh) / len(fresh) / answer:.1f} times the "
              f"{answer:.1f} s of answering it")
    assert stated in " ".join(DOC.split()), stated


def test_what_the_wrong_kv75_answers_are_is_read_off_the_committed_run():
    """The kinds of the baseline's wrong answers at 75 pairs, against the rows they were asked on
    (the test slice holds the run's 100 rows of the paper's file)."""
    results, _ = _load(RUNS / "kv75")
    rows = [json.loads(line) for line in gzip.open(DATA / "kv-retrieval-75_keys.jsonl.gz", "rt", encoding="utf-8")]
    kinds = {"digits": 0, "uuid": 0, "asked key": 0, "other key": 0, "value": 0, "nowhere": 0}
    wrong = [r for r in results if r["condition"] == "baseline" and not r["correct"]]
    for r in wrong:
        answer, row = r["prediction"].strip().strip('"'), rows[int(r["example"].split("-")[1])]
        assert row["value"] == r["answers"][0]  # the example is that row
        if re.fullmatch(r"[\d\s-]+", answer):
            kinds["digits"] += 1
        elif re.fullmatch(r"[0-9a-f-]{36}", answer):
            kinds["uuid"] += 1
            keys, values = zip(*row["ordered_kv_records"])
            kind = ("asked key" if answer == row["key"] else "other key" if answer in keys
                    else "value" if answer in values else "nowhere")
            kinds[kind] += 1
    stated = (f"Of the baseline's {len(wrong)} wrong answers, {kinds['digits']} are a run of digits and "
              f"{kinds['uuid']} are UUID-shaped: {kinds['asked key']} repeat the asked key, {kinds['other key']} "
              f"another key, {kinds['value']} another pair's value, {kinds['nowhere']} a UUID that is nowhere in "
              "the prompt.")
    assert stated in " ".join(DOC.split()), stated


def _restated(run: str) -> tuple[list[dict], list[dict]]:
    """The hits of a run, and those whose matched answers all stand in their question: the paper's
    metric credits an answer string anywhere in the first line, so a long answer that restates the
    question scores when the answer is a phrase of the question (questions rebuilt from the data
    slice, as the run built them)."""
    from edgewise.eval.metrics import first_line, normalize_answer

    results, manifest = _load(RUNS / run)
    questions = {ex.id: ex.question for ex in _task(manifest).examples}
    hits = [r for r in results if r["correct"]]
    restated = []
    for r in hits:
        said, asked = normalize_answer(first_line(r["prediction"])), normalize_answer(questions[r["example"]])
        matched = [g for g in map(normalize_answer, r["answers"]) if g and g in said]
        if all(g in asked for g in matched):
            restated.append(r)
    return hits, restated


@pytest.mark.parametrize(("run", "said"), [("qwen-profile-qa10", "None of the pilot's {} hits is of that kind"),
                                           ("qwen-profile-qa20", "none of its {} hits restates its question")])
def test_no_hit_of_the_qwen_pilots_is_a_restated_question(run, said):
    hits, restated = _restated(run)
    closed = sum(1 for r in hits if r["condition"] == "closedbook")
    assert restated == []
    stated = said.format(len(hits))
    assert stated in " ".join(DOC.split()), stated
    assert f"its {closed} closed-book hits" in " ".join(DOC.split())


@pytest.mark.parametrize("run", ["qwen-qa10", "qwen-qa20"])
def test_the_qwen_comparisons_restated_hits_change_no_paired_difference(run):
    """Its restated hits are one question's, right under every condition at every position: both
    sides of every pair, so no McNemar count moves."""
    hits, restated = _restated(run)
    results, _ = _load(RUNS / run)
    examples = {r["example"] for r in restated}
    answered = [r for r in results if r["example"] in examples]
    assert (len(examples), all(r["correct"] for r in answered), len(restated)) == (1, True, len(answered))
    stated = (f"{len(restated)} of its {len(hits)} hits are one question whose answer is a word of the "
              f"question, right under every condition")
    assert stated in " ".join(DOC.split()), stated


def test_an_incomplete_run_is_named_with_the_command_that_resumes_it():
    """A run still growing is kept in docs/eval/incomplete/NAME (no table quotes it); the document
    names it and shows the command that resumes it, whose -o is that folder."""
    incomplete = ROOT / "docs" / "eval" / "incomplete"
    for run in sorted(p for p in incomplete.iterdir() if p.is_dir()) if incomplete.is_dir() else []:
        where = f"docs/eval/incomplete/{run.name}"
        assert f"`{where}`" in DOC, f"{where} is not named in EVALUATION.md"
        assert f"-o {where}\n" in DOC, f"EVALUATION.md shows no command that resumes {where}"
        stated = " ".join(DOC.split())
        conditions = json.loads((run / "run.json").read_text(encoding="utf-8"))["conditions"]
        shown = [c for c in conditions if f"--condition {c.lower()}" in stated.lower()
                 or f"--condition {c}" in stated]
        assert len(shown) >= 1, f"the command shown for {where} names none of its conditions {conditions}"
