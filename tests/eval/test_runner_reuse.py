"""A run asks each distinct prompt once: cells whose prompt is identical take the answer already given."""

from __future__ import annotations

import json
import threading

from edgewise.eval.backends import Completion
from edgewise.eval.runner import run
from edgewise.eval.store import Store
from edgewise.eval.tasks import build_task


class CountingLLM:
    """Answers "v<n>" for the n-th distinct prompt it sees, and counts every call by prompt."""

    name = "fake"
    model = "counting"
    concurrency = 1

    def __init__(self):
        self.calls: dict[str, int] = {}
        self._lock = threading.Lock()

    def describe(self):
        return {"backend": "fake", "model": self.model, "temperature": 0.0}

    def complete(self, prompt, *, max_tokens, stop):
        with self._lock:
            self.calls[prompt] = self.calls.get(prompt, 0) + 1
            n = list(self.calls).index(prompt)
        return Completion(f"v{n}\n", len(prompt) // 4, 2, 0.5 + n)


def _task():
    return build_task("kv", examples=3, pairs=4, generate=True, seed=5, positions=[0, 1, 3])


# re-scoring with BM25 finds the asked key whatever its retrieval rank: one prompt per example
RESCORED = "edgewise:order=edges,rescore=true,scorer=bm25"


def test_identical_prompts_are_asked_once_and_their_cells_name_the_source(tmp_path):
    llm = CountingLLM()
    summary = run(_task(), ["baseline", RESCORED], llm, str(tmp_path), progress=False)
    records = Store(str(tmp_path)).load()
    assert summary.done == len(records) == 3 * 3 * 2
    assert all(n == 1 for n in llm.calls.values())  # no prompt asked twice
    rescored = [r for r in records if r["condition"] != "baseline"]
    by_example: dict[str, list[dict]] = {}
    for r in rescored:
        by_example.setdefault(r["example"], []).append(r)
    for rows in by_example.values():
        assert len({r["prompt_sha256"] for r in rows}) == 1  # the same prompt at every retrieval rank
        first, *others = rows  # in the order written: the first cell of a prompt is the one asked
        assert "reused" not in first
        for r in others:  # same answer, tokens and seconds as the cell that was asked, and where it came from
            assert r["reused"] == first["key"]
            for k in ("prediction", "prompt_tokens", "completion_tokens", "seconds", "attempts", "correct"):
                assert r[k] == first[k]
    asked = [r for r in records if "reused" not in r]
    assert len(asked) == len(llm.calls) == 3 * 3 + 3  # every baseline cell, one re-scored cell per example
    baseline = [r for r in records if r["condition"] == "baseline"]
    assert len({r["prompt_sha256"] for r in baseline}) == 9 and not any("reused" in r for r in baseline)


def test_a_resumed_run_reuses_answers_stored_by_an_earlier_one(tmp_path):
    first = CountingLLM()
    run(build_task("kv", examples=3, pairs=4, generate=True, seed=5, positions=[0]), [RESCORED], first,
        str(tmp_path), progress=False)
    assert len(first.calls) == 3
    second = CountingLLM()
    run(_task(), [RESCORED], second, str(tmp_path), progress=False)  # positions 1 and 3 added
    assert second.calls == {}  # every new cell's prompt was answered by the first run
    records = Store(str(tmp_path)).load()
    assert len(records) == 9 and sum("reused" in r for r in records) == 6


def test_reuse_off_asks_every_cell_and_another_model_never_reuses(tmp_path):
    llm = CountingLLM()
    run(_task(), [RESCORED], llm, str(tmp_path / "a"), progress=False, reuse=False)
    assert sorted(llm.calls.values()) == [3, 3, 3]
    records = Store(str(tmp_path / "a")).load()
    assert not any("reused" in r for r in records)
    other = CountingLLM()
    other.model = "another"
    run(_task(), [RESCORED], other, str(tmp_path / "a"), progress=False)
    assert sorted(other.calls.values()) == [1, 1, 1]  # answers of "counting" are not "another"'s


def test_the_cli_flag_turns_reuse_off(tmp_path, monkeypatch):
    from edgewise.cli import main

    llm = CountingLLM()
    monkeypatch.setattr("edgewise.eval.backends.get_backend", lambda *a, **k: llm)
    out = tmp_path / "run"
    args = ["eval", "run", "--task", "kv", "--generate", "--pairs", "4", "--examples", "2", "--positions", "0,3",
            "--condition", RESCORED, "--quiet", "--no-reuse", "-o", str(out)]
    try:
        main(args)
    except SystemExit as exc:
        assert exc.code in (0, None)
    lines = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert len(lines) == 4 and not any("reused" in r for r in lines)
    assert sorted(llm.calls.values()) == [2, 2]  # each example's one prompt asked at both positions


def test_a_report_pairs_the_conditions_with_the_one_it_is_told(tmp_path):
    from edgewise.errors import InputError
    from edgewise.eval.report import report

    run(_task(), ["baseline", RESCORED], CountingLLM(), str(tmp_path), progress=False)
    out = report(tmp_path, charts=False, against=RESCORED)
    assert "## Paired against edgewise:order=edges,rescore=True,scorer=bm25" in out["markdown"]  # the canonical name
    # every answer differs between prompts ("v<n>" per distinct prompt) and none is right: no discordant pair
    assert "| baseline | all | 9 | 0 | 0 | +0.000 | 1.000 |" in out["markdown"]
    try:
        report(tmp_path, charts=False, against="edgewise:order=nowhere")
    except InputError as exc:
        assert "against must be a condition of the run" in str(exc) and "'edgewise:order=nowhere'" in str(exc)
    else:
        raise AssertionError("an unknown condition was accepted")
