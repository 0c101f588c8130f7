"""edgewise batch --concurrency 2 stopped (kill -9, SIGTERM, Ctrl-C) at several points: no worker or
resource tracker outlives it, nothing left behind looks finished, and ``--resume`` finishes the job
with every row exactly once, byte-equal to one uninterrupted run. The real CLI, as a subprocess."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from edgewise.batch import run
from edgewise.errors import InputError

from ..processes import alive, children

pq = pytest.importorskip("pyarrow.parquet")

ROWS, PER_UNIT, UNITS = 1200, 30, 40
TIMEOUT = 120  # seconds any one CLI run may take


@pytest.fixture(scope="module")
def big_input(nq_rows, tmp_path_factory):
    d = tmp_path_factory.mktemp("resume")
    path = d / "in.jsonl"
    with open(path, "w", encoding="utf-8") as f:
        for i in range(ROWS):
            chunks = [{"id": f"p{(i + k) % len(nq_rows)}", "text": nq_rows[(i + k) % len(nq_rows)]["ctxs"][0]["text"],
                       "score": round(1 - k / 40, 3)} for k in range(20)]
            row = {"id": f"q{i}", "query": nq_rows[i % len(nq_rows)]["question"], "chunks": chunks}
            if i == 77:
                row["options"] = {"budget": 2**63}  # an error cell, in every run alike
            f.write(json.dumps(row) + "\n")
    return path


def _cli(src, out, *extra):
    return [sys.executable, "-m", "edgewise", "batch", "-i", str(src), "--output", str(out), "--concurrency", "2",
            "--rows-per-unit", str(PER_UNIT), "--budget", "600", *extra]


@pytest.fixture(scope="module")
def reference(big_input, tmp_path_factory):
    """The result of one uninterrupted run: the Parquet file's bytes and the manifest."""
    out = tmp_path_factory.mktemp("ref") / "out"
    done = subprocess.run(_cli(big_input, out), capture_output=True, text=True, timeout=TIMEOUT)
    assert done.returncode == 0, done.stderr
    table = pq.read_table(out / "part-00000.parquet")
    assert table.column("index").to_pylist() == list(range(ROWS))
    assert table.num_rows - table.column("error").null_count == 1
    return (out / "part-00000.parquet").read_bytes(), json.loads((out / "_edgewise_batch.json").read_text())


def _units_written(out):
    d = out / ".units"
    return sum(1 for f in d.iterdir() if f.name.endswith(".arrow")) if d.is_dir() else 0


def _stop_at(src, out, units, sig):
    """Start the CLI, send ``sig`` once ``units`` units are written; returns its exit code, stderr and
    the pids of its workers and resource tracker, each checked gone within 15 s."""
    err_path = out.parent / f"{out.name}.stderr"
    with open(err_path, "w") as err:
        proc = subprocess.Popen(_cli(src, out), stdout=subprocess.DEVNULL, stderr=err)
    deadline = time.monotonic() + TIMEOUT
    try:
        while len(children(proc.pid)) < 3 or _units_written(out) < units:  # 2 workers + the tracker
            assert proc.poll() is None and time.monotonic() < deadline, err_path.read_text()
            time.sleep(0.005)
        kids = children(proc.pid)
        proc.send_signal(sig)
        code = proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
    gone_by = time.monotonic() + 15
    while any(alive(k) for k in kids) and time.monotonic() < gone_by:
        time.sleep(0.1)
    left = [k for k in kids if alive(k)]
    for k in left:
        os.kill(k, signal.SIGKILL)  # the test cleans up what the job failed to
    assert left == [], f"still running after the job ended: {left}"
    return code, err_path.read_text()


def _assert_unfinished(out, killed=False):
    """The folder of a stopped job; one killed by ``kill -9`` also holds its lock file (the lock
    itself went with the process; a job that stopped on its own removed the file)."""
    manifest = json.loads((out / "_edgewise_batch.json").read_text())
    assert manifest["state"] == "running"
    assert not (out / "part-00000.parquet").exists()
    assert sorted(p.name for p in out.iterdir()) == [".units", "_edgewise_batch.json"] + (
        ["_edgewise_batch.lock"] if killed else [])
    assert all(f.name.startswith("unit-") for f in (out / ".units").iterdir())


def _resume_and_compare(src, out, reference):
    refused = subprocess.run(_cli(src, out), capture_output=True, text=True, timeout=TIMEOUT)
    assert refused.returncode == 2
    assert refused.stderr.startswith(f"edgewise: error: output directory '{out}' holds a batch job that stopped with ")
    assert refused.stderr.endswith(f" of {UNITS} units written; re-run the same command with --resume (resume=True) "
                                   "to pack the rest, or give a new or empty directory\n")
    done = subprocess.run(_cli(src, out, "--resume"), capture_output=True, text=True, timeout=TIMEOUT)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert (summary["rows"], summary["errors"], summary["files"]) == (ROWS, 1, [str(out / "part-00000.parquet")])
    table = pq.read_table(out)
    assert table.column("index").to_pylist() == list(range(ROWS))  # every row exactly once, in order
    data, manifest = reference
    assert (out / "part-00000.parquet").read_bytes() == data
    assert json.loads((out / "_edgewise_batch.json").read_text()) == manifest
    assert sorted(p.name for p in out.iterdir()) == ["_edgewise_batch.json", "part-00000.parquet"]
    return summary


@pytest.mark.slow
@pytest.mark.parametrize("units", [0, UNITS // 2, UNITS - 6])
def test_kill_9_mid_job_then_resume_is_one_uninterrupted_run(big_input, reference, tmp_path, units):
    out = tmp_path / "out"
    code, _ = _stop_at(big_input, out, units, signal.SIGKILL)
    assert code == -signal.SIGKILL
    _assert_unfinished(out, killed=True)
    summary = _resume_and_compare(big_input, out, reference)
    assert summary["resumed_rows"] % PER_UNIT == 0 and summary["resumed_rows"] >= units * PER_UNIT


@pytest.mark.slow
@pytest.mark.parametrize("sig, name", [(signal.SIGTERM, "SIGTERM"), (signal.SIGINT, "Ctrl-C")])
def test_sigterm_and_ctrl_c_stop_the_workers_and_say_how_to_resume(big_input, reference, tmp_path, sig, name):
    out = tmp_path / "out"
    code, err = _stop_at(big_input, out, 3, sig)
    assert code == 130
    head = f"edgewise: stopped ({name}): "
    assert err.startswith(head) and err.endswith(
        f" of {UNITS} units are written in '{out}'; re-run the same command with --resume (resume=True) to pack "
        "the rest\n"), err
    assert int(err[len(head):].split(" ")[0]) >= 3
    _assert_unfinished(out)
    _resume_and_compare(big_input, out, reference)


def test_resume_refuses_other_options_or_input_and_a_finished_job_is_refused_plainly(tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"query": "q", "chunks": [f"c{i}"]}) + "\n" for i in range(4)))
    out = tmp_path / "out"
    (out / ".units").mkdir(parents=True)
    run(src, tmp_path / "ref", tokenizer="words", budget=300, rows_per_unit=1)
    manifest = json.loads((tmp_path / "ref" / "_edgewise_batch.json").read_text())
    (out / "_edgewise_batch.json").write_text(json.dumps({**manifest, "state": "running", "files": None}))
    with pytest.raises(InputError, match=r"^cannot resume the batch job in '.*out': its pack options differ from "
                                         r"this run's \(budget: 300 there, 400 here\); resume with the same input and "
                                         r"options, or give a new or empty directory$"):
        run(src, out, tokenizer="words", budget=400, resume=True)
    src.write_text(src.read_text() + json.dumps({"query": "q", "chunks": ["c"]}) + "\n")
    with pytest.raises(InputError, match=r"^cannot resume the batch job in '.*out': its input files differ"):
        run(src, out, tokenizer="words", budget=300, resume=True)
    with pytest.raises(InputError, match=r"^output directory '.*ref' holds a finished batch job \(4 rows\); give a "
                                         r"new or empty directory$"):
        run(src, tmp_path / "ref", tokenizer="words", budget=300)


@pytest.mark.slow
def test_a_worker_killed_stops_the_job_with_the_resume_hint(big_input, reference, tmp_path):
    out = tmp_path / "out"
    with open(tmp_path / "err", "w") as err:
        proc = subprocess.Popen(_cli(big_input, out), stdout=subprocess.DEVNULL, stderr=err)
    deadline = time.monotonic() + TIMEOUT
    try:
        while len(children(proc.pid)) < 3 or _units_written(out) < 2:
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.005)
        kids = children(proc.pid)
        workers = [k for k in kids if b"spawn_main" in Path(f"/proc/{k}/cmdline").read_bytes()]
        os.kill(workers[0], signal.SIGKILL)
        code = proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
    err = (tmp_path / "err").read_text()
    assert code == 2
    assert err.startswith("edgewise: error: a batch worker died (killed, or out of memory): ") and err.endswith(
        f" of {UNITS} units are written in '{out}'; re-run the same command with --resume (resume=True) to pack "
        "the rest\n"), err
    gone_by = time.monotonic() + 15
    while any(alive(k) for k in kids) and time.monotonic() < gone_by:
        time.sleep(0.1)
    assert [k for k in kids if alive(k)] == []
    _assert_unfinished(out)
    _resume_and_compare(big_input, out, reference)
