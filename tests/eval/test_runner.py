"""Runner, store, report and calibration logic, with a scripted fake model.

The fake answers with the value of the *first* record of a kv prompt, so which answers are right
follows from where the key record was placed: that checks the wiring (arrange -> pack -> metric
-> store), not any model's quality. Run as a script, this file starts a slow run for the kill -9
resume test.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from edgewise.cli import main as eval_main
from edgewise.errors import ConfigError, InputError
from edgewise.eval.backends import BackendError, Completion
from edgewise.eval.calibrate import calibrate
from edgewise.eval.report import paired, report, summarize
from edgewise.eval.runner import Interrupted, parse_condition, run
from edgewise.eval.store import Store, StoreWarning
from edgewise.eval.tasks import build_task
from edgewise.order import load_profile, place

FIRST_VALUE = re.compile(r'\{"[^"]*": "([^"]*)"')


class FirstRecordLLM:
    """Answers the first record's value; optionally slow, failing, or concurrent."""

    name = "fake"

    def __init__(self, model="first-record", concurrency=1, delay=0.0, fail_after=None):
        self.model, self.concurrency, self.delay, self.fail_after = model, concurrency, delay, fail_after
        self.calls = 0
        self.threads = set()
        self._lock = threading.Lock()

    def describe(self):
        return {"backend": "fake", "model": self.model, "temperature": 0.0}

    def complete(self, prompt, *, max_tokens, stop):
        with self._lock:
            self.calls += 1
            if self.fail_after is not None and self.calls > self.fail_after:
                raise BackendError("fake endpoint failed after 3 attempts (last: HTTP 503)")
        self.threads.add(threading.get_ident())
        time.sleep(self.delay)
        first = FIRST_VALUE.search(prompt)
        return Completion((first.group(1) if first else "I do not know") + "\n", len(prompt) // 4, 20, self.delay)


def kv_task(examples=3):
    return build_task("kv", examples=examples, pairs=5, generate=True, seed=3, positions=[0, 2, 4])


CONDITIONS = ["baseline", "edgewise:order=edges"]


def table(results):
    """(condition, position) -> (accuracy, key's place in the prompt) over the results."""
    groups = {}
    for r in results:
        groups.setdefault((r["condition"], r["position"]), []).append(r)
    return {k: (sum(r["correct"] for r in rs) / len(rs), sorted({r["prompt_position"] for r in rs}))
            for k, rs in sorted(groups.items())}


def test_run_scores_each_condition_and_position(tmp_path):
    llm = FirstRecordLLM()
    summary = run(kv_task(), CONDITIONS, llm, str(tmp_path), progress=False)
    assert (summary.total, summary.skipped, summary.done, llm.calls) == (18, 0, 18, 18)
    results = Store(tmp_path).load()
    # edges puts ranks [0, 2, 4, 3, 1] in prompt order: rank 2 goes second, rank 4 third
    assert table(results) == {
        ("baseline", 0): (1.0, [0]), ("baseline", 2): (0.0, [2]), ("baseline", 4): (0.0, [4]),
        ("edgewise:order=edges", 0): (1.0, [0]), ("edgewise:order=edges", 2): (0.0, [1]),
        ("edgewise:order=edges", 4): (0.0, [2]),
    }
    assert len({r["key"] for r in results}) == 18
    first = results[0]
    assert sorted(first) == sorted([
        "key", "task", "example", "condition", "position", "slot", "prompt_position", "n_docs", "model", "backend",
        "prediction", "answers", "correct", "prompt_tokens", "packed_tokens", "prompt_sha256", "build_seconds", "completion_tokens", "seconds",
        "attempts", "meta", "at"])
    manifest = json.loads((tmp_path / "run.json").read_text())
    assert (manifest["task"], manifest["conditions"], manifest["positions"]) == ("kv", CONDITIONS, [0, 2, 4])


def test_rerun_resumes_and_new_parameters_start_new_results(tmp_path):
    run(kv_task(), CONDITIONS, FirstRecordLLM(), str(tmp_path), progress=False)
    again = FirstRecordLLM()
    s = run(kv_task(), CONDITIONS, again, str(tmp_path), progress=False)
    assert (s.total, s.skipped, s.done, again.calls) == (18, 18, 0, 0)
    other = FirstRecordLLM(model="another-model")
    s = run(kv_task(), ["baseline"], other, str(tmp_path), progress=False)
    assert (s.skipped, s.done, other.calls) == (0, 9, 9)
    assert Counter(r["model"] for r in Store(tmp_path).load()) == {"first-record": 18, "another-model": 9}


def test_reference_conditions_are_asked_once_per_example(tmp_path):
    llm = FirstRecordLLM()
    s = run(kv_task(), ["baseline", "oracle", "closedbook"], llm, str(tmp_path), progress=False)
    assert (s.total, s.done, llm.calls) == (15, 15, 15)
    results = Store(tmp_path).load()
    assert Counter((r["condition"], r["position"]) for r in results) == {
        ("baseline", 0): 3, ("baseline", 2): 3, ("baseline", 4): 3, ("oracle", None): 3, ("closedbook", None): 3}
    oracle = [r for r in results if r["condition"] == "oracle"]
    assert [(r["n_docs"], r["prompt_position"], r["correct"]) for r in oracle] == [(1, 0, 1.0)] * 3
    rows = report(tmp_path)["rows"]
    assert [(r["condition"], r["position"], r["n"]) for r in rows] == [
        ("baseline", 0, 3), ("baseline", 2, 3), ("baseline", 4, 3), ("baseline", "all", 9),
        ("oracle", "all", 3), ("closedbook", "all", 3)]


def test_more_examples_extend_a_run(tmp_path):
    run(kv_task(2), CONDITIONS, FirstRecordLLM(), str(tmp_path), progress=False)
    s = run(kv_task(3), CONDITIONS, FirstRecordLLM(), str(tmp_path), progress=False)
    assert (s.total, s.skipped, s.done) == (18, 12, 6)
    assert kv_task(2).examples == kv_task(3).examples[:2]


def test_http_style_backends_run_concurrently(tmp_path):
    llm = FirstRecordLLM(concurrency=4, delay=0.05)
    s = run(kv_task(4), CONDITIONS, llm, str(tmp_path), progress=False)
    assert (s.done, len(Store(tmp_path).load())) == (24, 24)
    assert len(llm.threads) > 1


def test_backend_failure_stops_the_run_and_keeps_what_was_answered(tmp_path):
    with pytest.raises(BackendError, match="failed after 3 attempts"):
        run(kv_task(), CONDITIONS, FirstRecordLLM(fail_after=5), str(tmp_path), progress=False)
    assert len(Store(tmp_path).load()) == 5
    s = run(kv_task(), CONDITIONS, FirstRecordLLM(), str(tmp_path), progress=False)
    assert (s.skipped, s.done, len(Store(tmp_path).load())) == (5, 13, 18)


def test_progress_bar_goes_to_the_given_stream(tmp_path):
    import io

    err = io.StringIO()
    run(kv_task(1), ["baseline"], FirstRecordLLM(), str(tmp_path / "a"), stream=err, progress=True)
    final = err.getvalue().rstrip("\n").split("\r")[-1]  # a tqdm bar: redrawn after \r, one line at the end
    assert re.fullmatch(r"kv first-record: 100%\|#+\| 3/3 \[00:0\d<00:00, +[\d.]+answer/s, accuracy 0\.33\]", final), final
    # by default the bar shows only on a terminal: a StringIO is not one
    quiet = io.StringIO()
    run(kv_task(1), ["baseline"], FirstRecordLLM(), str(tmp_path / "b"), stream=quiet)
    assert quiet.getvalue() == ""


def test_torn_last_line_is_skipped_then_cut_off(tmp_path):
    store = Store(tmp_path)
    store.append({"key": "a", "correct": 1.0})
    with open(store.path, "ab") as fh:
        fh.write(b'{"key": "b", "corr')  # what a kill -9 in the middle of a write could leave
    with pytest.warns(StoreWarning, match="torn last line"):
        assert [r["key"] for r in Store(tmp_path).load()] == ["a"]
    with pytest.warns(StoreWarning, match=r"cut off a torn last line \(18 bytes without a newline"):
        Store(tmp_path).append({"key": "b", "correct": 0.0})
    assert store.path.read_text().splitlines() == ['{"correct": 1.0, "key": "a"}', '{"correct": 0.0, "key": "b"}']


class CtrlC(FirstRecordLLM):
    """Ctrl-C at the ``at``-th request: raised in the request itself, or (``signal=True``) sent to the
    main thread as a SIGINT, while the request goes on."""

    def __init__(self, at, sigint=False, **kw):
        super().__init__(**kw)
        self.at, self.sigint = at, sigint
        self.started = 0  # counted apart from `calls`, in one step: exactly one request is the at-th

    def complete(self, prompt, *, max_tokens, stop):
        with self._lock:
            self.started += 1
            n = self.started
        if n == self.at:
            if not self.sigint:
                with self._lock:
                    self.calls += 1
                raise KeyboardInterrupt
            signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
        return super().complete(prompt, max_tokens=max_tokens, stop=stop)


def test_ctrl_c_keeps_every_answer_unlocks_and_resume_does_exactly_the_rest(tmp_path):
    llm = CtrlC(at=3)
    with pytest.raises(Interrupted) as err:
        run(kv_task(), CONDITIONS, llm, str(tmp_path), progress=False)
    assert isinstance(err.value, KeyboardInterrupt)
    assert str(err.value) == "stopped; run the same command to resume (2 answers stored now, 16 left)"
    assert (err.value.summary.total, err.value.summary.skipped, err.value.summary.done) == (18, 0, 2)
    first = Store(tmp_path).load()
    assert len(first) == 2 and (tmp_path / "run.lock").read_text() == ""
    again = FirstRecordLLM()
    s = run(kv_task(), CONDITIONS, again, str(tmp_path), progress=False)  # the lock was released
    assert (s.skipped, s.done, again.calls) == (2, 16, 16)
    final = Store(tmp_path).load()
    assert final[:2] == first and len({r["key"] for r in final}) == len(final) == 18


def test_ctrl_c_with_requests_in_flight_stores_those_answers(tmp_path):
    llm = CtrlC(at=5, sigint=True, concurrency=4, delay=0.05)
    with pytest.raises(Interrupted) as err:
        run(kv_task(4), CONDITIONS, llm, str(tmp_path), progress=False)
    stored = len(Store(tmp_path).load())
    assert stored == llm.calls == err.value.summary.done  # every request that was sent was answered and stored
    assert 5 <= stored < 24
    again = FirstRecordLLM()
    s = run(kv_task(4), CONDITIONS, again, str(tmp_path), progress=False)
    assert (s.skipped, s.done, again.calls, len(Store(tmp_path).load())) == (stored, 24 - stored, 24 - stored, 24)


def test_report_flags_an_incomplete_grid_at_the_top(tmp_path):
    with pytest.raises(BackendError):
        run(kv_task(), [*CONDITIONS, "oracle"], FirstRecordLLM(fail_after=5), str(tmp_path), progress=False)
    out = report(tmp_path, charts=False)
    lines = out["markdown"].splitlines()
    assert lines[2] == (
        "> **Incomplete grid: 16 of 21 planned results are missing** (condition × position × example, as the last "
        "`edgewise eval run` into this directory planned them; run the same command to finish). Missing: "
        "`baseline` 7 of 9 (position 0: 2, position 2: 2, position 4: 3); "
        "`edgewise:order=edges` 7 of 9 (position 0: 2, position 2: 2, position 4: 3); "
        "`oracle` 2 of 3 (once per example: 2).")
    assert (out["missing"]["planned"], out["missing"]["missing"]) == (21, 16)
    run(kv_task(), [*CONDITIONS, "oracle"], FirstRecordLLM(), str(tmp_path), progress=False)
    done = report(tmp_path, charts=False)
    assert done["missing"]["missing"] == 0
    assert "Incomplete grid" not in done["markdown"] and done["markdown"].splitlines()[2].startswith("21 results in ")
    # a run.json written before plans were recorded: the report says it could not check
    manifest = json.loads((tmp_path / "run.json").read_text())
    del manifest["plan"]
    (tmp_path / "run.json").write_text(json.dumps(manifest))
    assert report(tmp_path, charts=False)["markdown"].splitlines()[2] == (
        "`run.json` records no plan (it predates plans), so whether the grid is complete was not checked.")


def _slow_run(out_dir: str) -> None:
    run(kv_task(6), CONDITIONS, FirstRecordLLM(delay=0.03), out_dir, progress=False)


def test_kill_minus_9_and_resume_leaves_exactly_one_result_per_key(tmp_path):
    out = tmp_path / "run"
    results = out / "results.jsonl"
    for _ in range(2):  # killed twice, at different points
        before = len(Store(out).load())
        proc = subprocess.Popen([sys.executable, __file__, str(out)], stderr=subprocess.PIPE)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if results.exists() and len(results.read_bytes().splitlines()) >= before + 4:
                break
            time.sleep(0.005)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert proc.returncode == -signal.SIGKILL
    killed = len(Store(out).load())
    assert 8 <= killed < 36
    s = run(kv_task(6), CONDITIONS, FirstRecordLLM(), str(out), progress=False)
    final = Store(out).load()
    assert (s.total, s.skipped, s.done) == (36, killed, 36 - killed)
    lines = [json.loads(x) for x in results.read_text().splitlines()]
    assert Counter(r["key"] for r in lines).most_common(1)[0][1] == 1  # no duplicates at all in the file
    assert len(final) == 36
    assert sorted((r["example"], r["position"], r["condition"]) for r in final) == sorted(
        (f"kv5g-{i}", p, c) for i in range(6) for p in (0, 2, 4) for c in CONDITIONS)


def test_report_writes_table_and_png(tmp_path):
    pytest.importorskip("matplotlib", reason="the charts need matplotlib: pip install -e '.[eval]'")
    run(kv_task(), CONDITIONS, FirstRecordLLM(), str(tmp_path), progress=False)
    out = report(tmp_path)
    assert sorted(Path(p).name for p in out["paths"].values()) == ["accuracy.png", "report.md"]
    assert (tmp_path / "accuracy.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [(r["condition"], r["position"], r["n"], r["accuracy"]) for r in out["rows"]] == [
        ("baseline", 0, 3, 1.0), ("baseline", 2, 3, 0.0), ("baseline", 4, 3, 0.0), ("baseline", "all", 9, 1 / 3),
        ("edgewise:order=edges", 0, 3, 1.0), ("edgewise:order=edges", 2, 3, 0.0), ("edgewise:order=edges", 4, 3, 0.0),
        ("edgewise:order=edges", "all", 9, 1 / 3)]
    md = (tmp_path / "report.md").read_text()
    row = next(line for line in md.splitlines() if line.startswith("| baseline | 0 | 3 | 1.000 | 0.438–1.000 | 0.0 | "))
    assert row.endswith(" | 0% |")  # no empty answers


def test_report_pairs_each_condition_with_the_baseline_on_the_same_examples(tmp_path):
    # BM25 re-scoring finds the asked key, so the packer puts its record first whatever the retrieval
    # rank; the scripted model reads the first record, so only the middle and last positions differ
    rescored = "edgewise:order=edges,rescore=True,scorer=bm25"
    run(kv_task(), ["baseline", rescored], FirstRecordLLM(), str(tmp_path), progress=False)
    out = report(tmp_path, charts=False)
    rows = [(r["condition"], r["position"], r["pairs"], r["only_against"], r["only_condition"], r["difference"])
            for r in paired(Store(tmp_path).load())]
    assert rows == [(rescored, 0, 3, 0, 0, 0.0), (rescored, 2, 3, 0, 3, 1.0), (rescored, 4, 3, 0, 3, 1.0),
                    (rescored, "all", 9, 0, 6, 6 / 9)]
    assert f"| {rescored} | all | 9 | 0 | 6 | +0.667 | 0.031 |" in out["markdown"]
    assert "## Paired against baseline" in out["markdown"]


def test_needle_report_writes_a_heatmap(tmp_path):
    pytest.importorskip("matplotlib", reason="the charts need matplotlib: pip install -e '.[eval]'")
    needle = build_task("needle", examples=1, lengths=[100, 200], positions=[0, 100])
    run(needle, ["baseline"], FirstRecordLLM(), str(tmp_path), progress=False)
    out = report(tmp_path)
    assert sorted(Path(p).name for p in out["paths"].values()) == ["accuracy.png", "needle.png", "report.md"]
    assert (tmp_path / "needle.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "## By context length (tokens)" in out["markdown"]
    assert "| baseline | 100 | 2 | 0.000 |" in out["markdown"]


def test_calibrate_writes_a_profile_the_calibrated_order_reads(tmp_path):
    run(kv_task(), CONDITIONS, FirstRecordLLM(), str(tmp_path / "run"), progress=False)
    prof = calibrate(tmp_path / "run", tmp_path / "profile.json")
    assert prof["accuracy"] == [1.0, 0.5, 0.0, 0.0, 0.0]
    assert load_profile(str(tmp_path / "profile.json")) == [1.0, 0.5, 0.0, 0.0, 0.0]
    assert place(f"calibrated:{tmp_path / 'profile.json'}", 5) == [0, 1, 2, 3, 4]
    with pytest.raises(InputError, match=r"condition must be one of the run's conditions \['baseline', 'edgewise:order=edges'\], but got 'edges'"):
        calibrate(tmp_path / "run", condition="edges")


def test_report_on_an_empty_or_missing_run_directory(tmp_path):
    with pytest.raises(InputError, match=f"run directory '{tmp_path}' holds no results"):
        report(tmp_path)
    with pytest.raises(InputError, match="run directory '.*nope' does not exist"):
        report(tmp_path / "nope")


def test_bad_input():
    with pytest.raises(ConfigError, match="unknown task 'squad'; choose one of: kv, qa, needle, custom"):
        build_task("squad")
    with pytest.raises(InputError, match="position must be in 0..4 for 5 documents, but got 5"):
        build_task("kv", examples=1, pairs=5, generate=True, positions=[0, 5])
    with pytest.raises(InputError, match="needle positions are depths in percent, so must be in 0..100, but got 150"):
        build_task("needle", examples=1, lengths=[100], positions=[150])
    with pytest.raises(ConfigError, match="condition must be baseline, closedbook, oracle or 'edgewise:key=value,...', but got 'edges'"):
        parse_condition("edges")
    with pytest.raises(ConfigError, match="must not be told the key chunk"):
        parse_condition("edgewise:order=position:3")
    with pytest.raises(ConfigError, match=r"scorer= has no effect .* unless rescore=true, but got 'edgewise:scorer=dense'"):
        parse_condition("edgewise:scorer=dense")
    assert parse_condition("edgewise:scorer=dense,rescore=true").name == "edgewise:order=edges,rescore=True,scorer=dense"
    with pytest.raises(InputError, match="pairs must be > 0, but got 0"):
        build_task("kv", pairs=0)


def test_the_question_cue_closes_a_sections_prompt_as_the_papers_layout_does():
    from edgewise.eval.runner import build_prompt

    task = build_task("qa", examples=1, docs=5, positions=[0])
    ex = task.examples[0]
    plain = parse_condition("edgewise:layout=sections,budget=600")
    cued = parse_condition("edgewise:layout=sections,budget=600,cue=question")
    assert cued.name == "edgewise:budget=600,cue=question,layout=sections,order=edges"
    a, b = build_prompt(task, ex, 0, plain), build_prompt(task, ex, 0, cued)
    assert b.text == a.text + f"\n\nQuestion: {ex.question}\nAnswer:"
    assert (b.packed_tokens, b.prompt_position, b.n_docs) == (a.packed_tokens, a.prompt_position, a.n_docs)
    with pytest.raises(ConfigError, match="cue must be one of question, but got 'answer' in 'edgewise:cue=answer'"):
        parse_condition("edgewise:cue=answer")


def test_unknown_pack_option_fails_before_any_request(tmp_path):
    llm = FirstRecordLLM()
    with pytest.raises(ConfigError, match="unknown pack option .colour.; choose from: budget"):
        run(kv_task(), ["edgewise:order=edges,colour=blue"], llm, str(tmp_path), progress=False)
    with pytest.raises(ConfigError, match="unknown order 'middle'"):
        run(kv_task(), ["edgewise:order=middle"], llm, str(tmp_path), progress=False)
    assert llm.calls == 0


def test_cli_errors_are_one_line_with_status_2(tmp_path, capsys):
    assert eval_main(["eval", "run", "--task", "squad", "-o", str(tmp_path)]) == 2
    assert capsys.readouterr().err == "edgewise: error: unknown task 'squad'; choose one of: kv, qa, needle, custom\n"
    assert eval_main(["eval", "run", "--task", "kv", "--pairs", "5", "--generate", "--positions", "0,7", "-o",
                      str(tmp_path)]) == 2
    assert capsys.readouterr().err == "edgewise: error: position must be in 0..4 for 5 documents, but got 7\n"
    assert eval_main(["eval", "run", "--task", "kv", "--backend", "vllm", "-n", "1", "-o", str(tmp_path)]) == 2
    assert capsys.readouterr().err == "edgewise: error: unknown backend 'vllm'; choose one of: local, openai\n"
    assert eval_main(["eval", "report", str(tmp_path)]) == 2
    assert "holds no results" in capsys.readouterr().err


def test_other_tasks_build():
    needle = build_task("needle", examples=2, lengths=[120, 300], seed=1)
    assert [e.id for e in needle.examples] == ["needle-120-0", "needle-120-1", "needle-300-0", "needle-300-1"]
    assert needle.positions == [0, 25, 50, 75, 100]
    ex = needle.examples[0]
    assert ex.answers[0] in next(c["text"] for c in ex.chunks if c["id"] == "needle")
    last = len(ex.chunks) - 1
    assert [needle.slot(ex, d) for d in (0, 50, 100)] == [0, round(last / 2), last]
    kv = build_task("kv", examples=2, pairs=10)  # the paper's data file
    assert kv.positions == [0, 2, 4, 7, 9] and kv.params["generate"] is False
    assert all(len(e.chunks) == 10 and e.answers[0] in [c["text"] for c in e.chunks] for e in kv.examples)


def test_qa_task_moves_the_gold_passage_and_the_baseline_prompt_is_the_papers():
    from edgewise.eval.runner import build_prompt
    from edgewise.eval.tasks import arrange

    qa = build_task("qa", examples=2, docs=10)
    assert (qa.positions, qa.layout, qa.metric) == ([0, 4, 9], "paper", "best_subspan_em")
    ex = qa.examples[0]
    assert (ex.id, ex.question, ex.answers) == ("nq-0", "who got the first nobel prize in physics", ["Wilhelm Conrad Röntgen"])
    assert [c["id"] for c in arrange(ex, 4)] == ["d1", "d2", "d3", "d4", "gold", "d5", "d6", "d7", "d8", "d9"]
    prompt = build_prompt(qa, ex, 4, parse_condition("baseline"))
    lines = prompt.text.split("\n")
    assert lines[0].startswith("Write a high-quality answer for the given question using only the provided search results")
    assert lines[6] == "Document [5](Title: List of Nobel laureates in Physics) " + ex.chunks[0]["text"]
    assert lines[-2:] == ["Question: who got the first nobel prize in physics", "Answer:"]
    assert prompt.prompt_position == 4
    # edges, told nothing: the gold passage ranked 5th (rank 4) goes third (ranks 0, 2, 4, ... from the front)
    assert build_prompt(qa, ex, 4, parse_condition("edgewise:order=edges")).prompt_position == 2
    with pytest.raises(InputError, match="position must be in 0..9 for 10 documents, but got 10"):
        build_task("qa", examples=1, docs=10, positions=[10])


def test_custom_task(tmp_path):
    data = tmp_path / "mine.jsonl"
    data.write_text("\n".join(json.dumps(r) for r in [
        {"question": "q1", "answers": ["x"], "chunks": ["a", "b x", "c"], "key_id": "chunk-1"},
        {"question": "q2", "answers": "y", "chunks": [{"id": "k", "text": "y"}, {"id": "o", "text": "z"}], "key_id": "k"},
    ]) + "\n")
    t = build_task("custom", data=str(data))
    assert ([e.key_id for e in t.examples], t.positions, t.metric) == (["chunk-1", "k"], [0, 1], "best_subspan_em")
    from edgewise.eval.runner import build_prompt

    pr = tmp_path / "prune.jsonl"
    pr.write_text(json.dumps({"question": "what is the capital of france", "answers": ["Paris"], "key_id": "k", "chunks": [
        {"id": "k", "text": "Bananas are yellow. Paris is the capital of France."},
        {"id": "o", "text": "Lyon is a city. Its food is famous."}]}) + "\n")
    pt = build_task("custom", data=str(pr))
    cond = parse_condition("edgewise:order=edges,prune=0.99,prune_scorer=lexical")
    assert build_prompt(pt, pt.examples[0], 1, cond).text.splitlines()[2:4] == [
        "Document [1](Title: ) Lyon is a city.", "Document [2](Title: ) Paris is the capital of France."]
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"question": "q", "answers": ["x"], "chunks": ["a"], "key_id": "zz"}) + "\n")
    with pytest.raises(InputError, match=f"{bad} line 1: key_id must name one of the chunks, but got 'zz'"):
        build_task("custom", data=str(bad))
    with pytest.raises(InputError, match="task 'custom' needs a JSONL file: --data FILE"):
        build_task("custom")


if __name__ == "__main__":  # the subprocess of the kill -9 test
    _slow_run(sys.argv[1])


def test_summary_counts_empty_answers_by_their_first_line():
    rs = [{"condition": "baseline", "position": 0, "correct": 0.0, "model": "m", "prediction": p}
          for p in ("", "  \n Paris", "Paris\n", "\n")]
    (row, _all) = summarize(rs)
    assert row["empty"] == 0.5  # scored on the first line after leading white space, as the metric reads it


BLOCK_MATPLOTLIB = "import sys; sys.modules['matplotlib'] = None; "  # what a fast-tier install without matplotlib sees
NO_CHARTS = ("the report's charts need matplotlib: pip install -e '.[eval]' (in an edgewise checkout); "
             "wrote report.md without them")


def test_report_without_matplotlib_writes_the_markdown_and_says_how_to_get_the_charts(tmp_path, monkeypatch):
    run(kv_task(), ["baseline", "oracle", "closedbook"], FirstRecordLLM(), str(tmp_path / "run"), progress=False)
    whole = report(tmp_path / "run", tmp_path / "plain", charts=False)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    out = report(tmp_path / "run")
    assert (out["markdown"], out["rows"], out["notes"]) == (whole["markdown"], whole["rows"], [NO_CHARTS])
    assert out["paths"] == {"markdown": str(tmp_path / "run" / "report.md")}
    assert not list((tmp_path / "run").glob("*.png"))
    assert (tmp_path / "run" / "report.md").read_text() == whole["markdown"]
    assert report(tmp_path / "run", charts=False)["notes"] == []
    with pytest.raises(ImportError, match=r"^the report's charts need matplotlib: pip install -e '\.\[eval\]'"):
        report(tmp_path / "run", charts=True)  # asked for by name: loud


def test_eval_report_command_without_matplotlib(tmp_path):
    """`edgewise eval report` in a process where matplotlib cannot be imported: exit 0, the whole
    Markdown on stdout and in report.md, one note on stderr with the install command."""
    run(kv_task(), CONDITIONS, FirstRecordLLM(), str(tmp_path), progress=False)
    expected = report(tmp_path, tmp_path / "plain", charts=False)["markdown"]
    code = BLOCK_MATPLOTLIB + f"from edgewise.cli import main; raise SystemExit(main(['eval', 'report', {str(tmp_path)!r}]))"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert (r.returncode, r.stdout.rstrip("\n")) == (0, expected.rstrip("\n")), r.stderr
    assert r.stderr.splitlines() == [f"edgewise: note: {NO_CHARTS}", f"wrote: {tmp_path / 'report.md'}"]
    assert (tmp_path / "report.md").read_text() == expected and not (tmp_path / "accuracy.png").exists()


@pytest.mark.slow
def test_the_fast_tier_report_test_runs_without_matplotlib():
    """The runner's reference-condition test, which writes a report, passes where matplotlib is absent."""
    from ..conftest import ROOT  # here, not at the top: this file also runs as a script (the kill -9 test)

    code = BLOCK_MATPLOTLIB + ("import pytest; raise SystemExit(pytest.main(['-v', '-p', 'no:randomly', '-p', 'no:cacheprovider', "
                               f"{__file__ + '::test_reference_conditions_are_asked_once_per_example'!r}]))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                       cwd=ROOT)
    assert r.returncode == 0, r.stdout + r.stderr
    assert re.search(r"^=+ 1 passed in ", r.stdout, re.MULTILINE), r.stdout
