"""The run directory under abuse (two runners at once, torn and corrupt lines, a corrupt run.json),
and the one resolver of the evaluation data files.

Run as a script (``python tests/eval/test_store.py DIR``), this file is the slow runner that the
two-process lock test starts.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time

import pytest

from edgewise.cli import main
from edgewise.errors import InputError
from edgewise.eval.backends import Completion
from edgewise.eval.report import report
from edgewise.eval.runner import run
from edgewise.eval.store import RunLocked, Store, StoreWarning
from edgewise.eval.tasks import build_task

CONDITIONS = ["baseline", "edgewise:order=edges"]


class SlowLLM:
    """Answers "x" after ``delay`` seconds; calls ``hook(n)`` before its n-th answer."""

    name = "fake"
    concurrency = 1

    def __init__(self, delay=0.0, hook=None, model="fake-model"):
        self.delay, self.hook, self.model, self.calls = delay, hook, model, 0

    def describe(self):
        return {"backend": "fake", "model": self.model, "temperature": 0.0}

    def complete(self, prompt, *, max_tokens, stop):
        self.calls += 1
        if self.hook is not None:
            self.hook(self.calls)
        time.sleep(self.delay)
        return Completion("x\n", 10, 1, self.delay)


def kv(examples=3):
    return build_task("kv", examples=examples, pairs=5, generate=True, seed=3, positions=[0, 2, 4])


def _lines(store: Store) -> list[dict]:
    return [json.loads(line) for line in store.path.read_bytes().decode("utf-8").split("\n") if line]


# ------------------------------------------------------------------------------------------- lock


@pytest.mark.slow  # a server of its own, or a wait for a timeout: seconds
def test_a_second_runner_in_another_process_stops_at_once_naming_the_holder(tmp_path):
    out = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, __file__, str(out)], stderr=subprocess.PIPE)
    try:
        lock = out / "run.lock"
        deadline = time.monotonic() + 60
        while not (lock.exists() and lock.read_text().strip()):
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read().decode()
            time.sleep(0.01)
        holder = json.loads(lock.read_text())
        assert (holder["pid"], holder["host"]) == (proc.pid, socket.gethostname())
        second = SlowLLM()
        with pytest.raises(RunLocked) as err:
            run(kv(6), CONDITIONS, second, str(out), progress=False)
        assert str(err.value) == (
            f"run directory {str(out)!r} is in use by another runner (pid {proc.pid} on {socket.gethostname()}, "
            f"started {holder['started']}: {holder['command']}); wait for it to finish or stop it, "
            "or write to another directory")
        assert second.calls == 0
        assert proc.wait(120) == 0, proc.stderr.read().decode()
    finally:
        proc.kill()
        proc.wait()
    lines = _lines(Store(out))
    assert len(lines) == 36 and len({r["key"] for r in lines}) == 36  # one runner's answers, each once
    assert lock.read_text() == ""  # released: the holder's name is cleared
    again = SlowLLM()
    s = run(kv(6), CONDITIONS, again, str(out), progress=False)
    assert (s.total, s.skipped, s.done, again.calls) == (36, 36, 0, 0)


def test_a_second_runner_in_the_same_process_is_refused_and_the_lock_is_released_after(tmp_path):
    refused = []

    def second_runner(n):
        if n == 2:
            with pytest.raises(RunLocked, match=r"is in use by another runner \(pid \d+ on "):
                run(kv(), CONDITIONS, SlowLLM(), str(tmp_path), progress=False)
            refused.append(n)

    first = SlowLLM(hook=second_runner)
    s = run(kv(), CONDITIONS, first, str(tmp_path), progress=False)
    assert (refused, s.done, first.calls, len(_lines(Store(tmp_path)))) == ([2], 18, 18, 18)

    def fail(n):
        raise RuntimeError("backend crashed")

    with pytest.raises(RuntimeError, match="backend crashed"):
        run(kv(), ["oracle"], SlowLLM(hook=fail), str(tmp_path), progress=False)
    # the failed run let go of the directory: the next one runs
    assert run(kv(), ["oracle"], SlowLLM(), str(tmp_path), progress=False).done == 3


# --------------------------------------------------------------------------------- torn and corrupt


def _half_line(key: str) -> bytes:
    """A result line cut inside a multi-byte character, as a write killed mid-way can leave it."""
    line = json.dumps({"key": key, "prediction": "東京タワー"}, ensure_ascii=False).encode("utf-8")
    cut = line.index("京".encode()) + 1  # one byte into a three-byte character
    return line[:cut]


def test_a_torn_tail_inside_a_utf8_character_is_cut_before_the_next_append(tmp_path):
    store = Store(tmp_path)
    store.append({"key": "a", "prediction": "Zürich"})
    half = _half_line("b")
    with open(store.path, "ab") as fh:
        fh.write(half)
    with pytest.warns(StoreWarning) as seen:
        assert [r["key"] for r in store.load()] == ["a"]
    assert str(seen[0].message) == (f"{store.path}: skipped 1 unusable line(s): line 2: torn last line ({len(half)} "
                                    "bytes without a newline, from an interrupted write; the next append cuts it off)")
    assert store.problems == [f"line 2: torn last line ({len(half)} bytes without a newline, from an interrupted "
                              "write; the next append cuts it off)"]
    with pytest.warns(StoreWarning) as seen:  # the same store object that appended before
        store.append({"key": "c", "prediction": "東京"})
    assert str(seen[0].message) == (f"{store.path}: cut off a torn last line ({len(half)} bytes without a newline, "
                                    "left by an interrupted write) before appending")
    assert store.path.read_bytes().decode("utf-8") == (
        '{"key": "a", "prediction": "Zürich"}\n{"key": "c", "prediction": "東京"}\n')
    assert [r["key"] for r in Store(tmp_path).load()] == ["a", "c"]


def test_a_run_resumes_over_a_torn_multibyte_tail(tmp_path):
    def stop(n):
        if n == 6:
            raise RuntimeError("killed")

    with pytest.raises(RuntimeError):
        run(kv(), CONDITIONS, SlowLLM(hook=stop), str(tmp_path), progress=False)
    store = Store(tmp_path)
    half = _half_line("torn")
    with open(store.path, "ab") as fh:
        fh.write(half)
    again = SlowLLM()
    with pytest.warns(StoreWarning) as seen:
        s = run(kv(), CONDITIONS, again, str(tmp_path), progress=False)
    assert [str(w.message).split(": ", 1)[1] for w in seen] == [
        f"skipped 1 unusable line(s): line 6: torn last line ({len(half)} bytes without a newline, from an "
        "interrupted write; the next append cuts it off)",
        f"cut off a torn last line ({len(half)} bytes without a newline, left by an interrupted write) before appending"]
    assert (s.total, s.skipped, s.done, again.calls) == (18, 5, 13, 13)
    lines = _lines(store)  # every line decodes: nothing of the torn write is left
    assert len(lines) == 18 and len({r["key"] for r in lines}) == 18
    assert Store(tmp_path).problems == [] and len(Store(tmp_path).load()) == 18


def test_bad_lines_inside_the_file_are_skipped_and_reported_by_number(tmp_path):
    store = Store(tmp_path)
    store.path.write_bytes(b'{"key": "a"}\n' + _half_line("b") + b'{"key": "c"}\n' + b'{"key": \n' + b"[1]\n"
                           + b'{"key": "d"}\n{"key": "a", "again": true}\n')
    with pytest.warns(StoreWarning, match=r"skipped 3 unusable line\(s\)"):
        assert [r["key"] for r in store.load()] == ["a", "d"]
    assert store.problems == ["line 2: not UTF-8 (byte 31: invalid continuation byte)",
                              "line 3: not JSON (Expecting value at column 9)",
                              "line 4: not a result (a JSON object with a 'key')"]


# -------------------------------------------------------------------------------------- run.json


@pytest.mark.parametrize("content, problem", [
    (b'{"task": "kv", ', "is not valid JSON (Expecting property name enclosed in double quotes at line 1 column 16)"),
    (b'["kv"]', "must hold a JSON object, but holds list"),
    (b'{"task": "k\xe9"}', "is not UTF-8 (byte 11: invalid continuation byte)"),
])
def test_a_corrupt_run_json_is_one_line_naming_the_file(tmp_path, capsys, content, problem):
    run(kv(1), ["baseline"], SlowLLM(), str(tmp_path), progress=False)
    path = tmp_path / "run.json"
    path.write_bytes(content)
    message = f"manifest {str(path)!r} {problem}; run the same `edgewise eval run` command to rewrite it"
    with pytest.raises(InputError) as err:
        report(tmp_path, charts=False)
    assert str(err.value) == message
    assert main(["eval", "report", str(tmp_path), "--no-charts"]) == 2
    assert capsys.readouterr().err == f"edgewise: error: {message}\n"
    # the same command rewrites it
    run(kv(1), ["baseline"], SlowLLM(), str(tmp_path), progress=False)
    assert Store(tmp_path).manifest()["task"] == "kv"


# ------------------------------------------------------------------------------------------ data


def test_data_path_order_explicit_then_environment_then_shared(tmp_path, monkeypatch):
    from edgewise.eval.data import data_path, shared_dirs

    env, given = tmp_path / "env", tmp_path / "given"
    for folder in (env, given):
        folder.mkdir()
        (folder / "d.jsonl").write_text("{}\n")
    monkeypatch.setenv("EDGEWISE_DATA", str(env))
    assert data_path("d.jsonl", given / "d.jsonl") == given / "d.jsonl"  # --data FILE
    assert data_path("d.jsonl", given) == given / "d.jsonl"  # --data FOLDER
    assert data_path("d.jsonl") == env / "d.jsonl"
    with pytest.raises(InputError) as err:
        data_path("d.jsonl", tmp_path / "nope.jsonl")
    assert str(err.value) == f"data file {str(tmp_path / 'nope.jsonl')!r} does not exist; pass an existing file with --data FILE"
    with pytest.raises(InputError) as err:
        data_path("other.jsonl")  # a set $EDGEWISE_DATA is the only place looked in
    assert str(err.value) == (f"data file 'other.jsonl' is not in $EDGEWISE_DATA ({env}); put it there, pass --data "
                              "FILE, or unset EDGEWISE_DATA to use ../shared/data")
    monkeypatch.delenv("EDGEWISE_DATA")
    checkout = tmp_path / "work" / "repo"
    checkout.mkdir(parents=True)
    (tmp_path / "work" / "shared" / "data").mkdir(parents=True)
    (tmp_path / "work" / "shared" / "data" / "d.jsonl").write_text("{}\n")
    monkeypatch.chdir(checkout)
    assert data_path("d.jsonl") == tmp_path / "work" / "shared" / "data" / "d.jsonl"  # ../shared/data beside the cwd
    with pytest.raises(InputError) as err:
        data_path("absent.jsonl")
    tried = shared_dirs()
    assert tried[0] == tmp_path / "work" / "shared" / "data" and len(tried) == 2
    assert str(err.value) == (
        "data file 'absent.jsonl' not found: --data was not given, $EDGEWISE_DATA is not set, and it is not in "
        f"{tried[0]} or {tried[1]}; pass --data FILE or set EDGEWISE_DATA=FOLDER")


def test_the_tasks_read_their_data_through_the_one_resolver(tmp_path, monkeypatch):
    monkeypatch.setenv("EDGEWISE_DATA", str(tmp_path))
    with pytest.raises(InputError, match=r"data file 'nq-open-oracle-dev.jsonl.gz' is not in \$EDGEWISE_DATA"):
        build_task("qa", examples=1)
    with pytest.raises(InputError, match=r"data file 'kv-retrieval-75_keys.jsonl.gz' is not in \$EDGEWISE_DATA"):
        build_task("kv", examples=1)


if __name__ == "__main__":  # the runner of the two-process lock test
    run(kv(6), CONDITIONS, SlowLLM(delay=0.04), sys.argv[1], progress=False)
