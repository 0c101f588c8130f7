"""Runs still in progress (docs/eval/incomplete/) obey the store's rules and are quoted nowhere."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from edgewise.eval.metrics import get_metric
from edgewise.eval.store import Store, plan_cells

from ..conftest import ROOT

INCOMPLETE = ROOT / "docs" / "eval" / "incomplete"
RUN_DIRS = sorted(p for p in INCOMPLETE.iterdir() if (p / "run.json").exists()) if INCOMPLETE.is_dir() else []
DOCS = [ROOT / "EVALUATION.md", ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


@pytest.mark.parametrize("run", RUN_DIRS, ids=lambda p: p.name)
def test_an_incomplete_run_holds_one_scored_result_per_planned_key(run: Path):
    results = Store(run).load()
    manifest = json.loads((run / "run.json").read_text(encoding="utf-8"))
    keys = [r["key"] for r in results]
    assert len(set(keys)) == len(keys)
    planned = {key for key, *_ in plan_cells(manifest["plan"])}
    assert set(keys) <= planned  # nothing stored that the plan does not ask for
    assert len(keys) < len(planned), f"{run.name} is complete: move it to docs/eval/runs/ and report it"
    metric = get_metric(manifest["metric"])
    assert [r["key"] for r in results if metric(r["prediction"], r["answers"]) != r["correct"]] == []
    by_key = {r["key"]: r for r in results}
    for r in results:  # a reused answer is the answer of a stored cell with the same prompt
        if "reused" in r:
            src = by_key[r["reused"]]
            assert (src["prompt_sha256"], src["prediction"]) == (r["prompt_sha256"], r["prediction"])


def test_no_document_quotes_an_incomplete_run():
    names = {p.name for p in RUN_DIRS}
    quoted = [(d.name, n) for d in DOCS for n in names
              if d.is_file() and d != INCOMPLETE / "README.md" and f"incomplete/{n}" in d.read_text(encoding="utf-8")]
    assert quoted == []
