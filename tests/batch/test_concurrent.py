"""Two batch jobs on one output folder: one writer at a time (the folder's lock), and ``done`` only
for a result read back whole. The race tests run the real CLI as subprocesses, each bounded by a
timeout: a job killed by ``kill -9``, then two ``--resume`` racing for its folder; a ``--resume`` and
a new job started while a job holds the folder."""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from edgewise.batch import run
from edgewise.batch.job import Job, ResultError, read_manifest, verify
from edgewise.batch.local import write_packed_unit
from edgewise.batch.lock import LOCK, OutputLock, OutputLocked
from edgewise.batch.units import plan
from edgewise.errors import InputError
from edgewise.packing.packer import Packer

from ..processes import alive, children

pq = pytest.importorskip("pyarrow.parquet")

ROWS, PER_UNIT = 1200, 30
TIMEOUT = 120  # seconds any one CLI run may take
HELD = (r"^edgewise: error: output directory '{out}' is being written by another edgewise batch \(pid {pid} on "
        r"{host}, started \d{{4}}-\d\d-\d\dT\d\d:\d\d:\d\dZ: \S*edgewise\S* batch .*\); let it finish \(or stop it, "
        r"then re-run with --resume\), or give another directory\n$")


@pytest.fixture(scope="module")
def big_input(nq_rows, tmp_path_factory):
    """Rows enough that a job with two workers runs for seconds; ids q0, q1, ..."""
    path = tmp_path_factory.mktemp("concurrent") / "in.jsonl"
    with open(path, "w", encoding="utf-8") as f:
        for i in range(ROWS):
            chunks = [{"id": f"p{(i + k) % len(nq_rows)}", "text": nq_rows[(i + k) % len(nq_rows)]["ctxs"][0]["text"],
                       "score": round(1 - k / 40, 3)} for k in range(20)]
            f.write(json.dumps({"id": f"q{i}", "query": nq_rows[i % len(nq_rows)]["question"], "chunks": chunks}) + "\n")
    return path


def _cli(src, out, *extra):
    return [sys.executable, "-m", "edgewise", "batch", "-i", str(src), "--output", str(out), "--concurrency", "2",
            "--rows-per-unit", str(PER_UNIT), "--budget", "600", *extra]


def _start(cmd, log):
    with open(log, "w") as f:
        return subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT if log.suffix == ".all" else f)


def _units_written(out):
    d = out / ".units"
    try:
        return sum(1 for f in d.iterdir() if f.name.endswith(".arrow"))
    except OSError:
        return 0


def _wait_for_units(proc, out, n, log):
    deadline = time.monotonic() + TIMEOUT
    while _units_written(out) < n:
        assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
        time.sleep(0.005)


def _kill_all(procs, kids=()):
    """The test's own clean-up: whatever it started and is still running, killed."""
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait(30)
    for k in kids:
        if alive(k):
            os.kill(k, signal.SIGKILL)


def _assert_whole(out):
    """The folder of a finished job: every input row once, by id and in order, marked done."""
    table = pq.read_table(out / "part-00000.parquet", columns=["index", "id", "error"])
    assert table.column("id").to_pylist() == [f"q{i}" for i in range(ROWS)]
    assert table.column("index").to_pylist() == list(range(ROWS))
    manifest = json.loads((out / "_edgewise_batch.json").read_text())
    assert (manifest["state"], manifest["rows"], manifest["errors"]) == ("done", ROWS, 0)
    assert sorted(p.name for p in out.iterdir()) == ["_edgewise_batch.json", "part-00000.parquet"]


@pytest.mark.slow
@pytest.mark.parametrize("gap", [0.2, 0.0])
def test_two_resumes_racing_after_kill_9_finish_the_job_once(big_input, tmp_path, gap):
    out = tmp_path / "out"
    first = _start(_cli(big_input, out), tmp_path / "first.log")
    procs, kids = [first], []
    try:
        _wait_for_units(first, out, 3, tmp_path / "first.log")
        while len(kids := children(first.pid)) < 3:  # 2 workers and the resource tracker, to check on after
            assert first.poll() is None
            time.sleep(0.005)
        first.send_signal(signal.SIGKILL)
        assert first.wait(30) == -signal.SIGKILL
        gone_by = time.monotonic() + 15
        while any(alive(k) for k in kids) and time.monotonic() < gone_by:
            time.sleep(0.05)
        # the dead job's lock file is there, naming it: the next job takes it over
        assert json.loads((out / LOCK).read_text())["pid"] == first.pid
        logs = [tmp_path / "a.log", tmp_path / "b.log"]
        a = _start(_cli(big_input, out, "--resume"), logs[0])
        procs.append(a)
        time.sleep(gap)
        b = _start(_cli(big_input, out, "--resume"), logs[1])
        procs.append(b)
        codes = [a.wait(TIMEOUT), b.wait(TIMEOUT)]
    finally:
        _kill_all(procs, kids)
    outputs = [log.read_text() for log in logs]
    assert not any("Traceback" in o for o in outputs), outputs
    packed = [i for i, (code, o) in enumerate(zip(codes, outputs)) if code == 0 and "edgewise: packed" in o]
    assert packed, outputs  # the job was finished
    wrote = [i for i in packed if json.loads(outputs[i][outputs[i].index("{"):])["resumed_rows"] < ROWS]
    assert len(wrote) == 1, outputs  # by one of them: the other was refused, or found it done
    winner, other = wrote[0], 1 - wrote[0]
    if other not in packed:
        assert codes[other] == 2
        pattern = HELD.format(out=re.escape(str(out)), pid=[a, b][winner].pid, host=re.escape(socket.gethostname()))
        assert re.match(pattern, outputs[other]), outputs[other]
    _assert_whole(out)


@pytest.mark.slow
def test_a_resume_or_a_new_job_while_a_job_runs_is_refused_naming_it(big_input, tmp_path):
    out = tmp_path / "out"
    first = _start(_cli(big_input, out), tmp_path / "first.log")
    try:
        _wait_for_units(first, out, 2, tmp_path / "first.log")
        first.send_signal(signal.SIGSTOP)  # it holds the folder for as long as the test needs
        holder = json.loads((out / LOCK).read_text())
        assert (holder["pid"], holder["host"]) == (first.pid, socket.gethostname())
        resumed = subprocess.run(_cli(big_input, out, "--resume"), capture_output=True, text=True, timeout=TIMEOUT)
        second = subprocess.run(_cli(big_input, out), capture_output=True, text=True, timeout=TIMEOUT)
        first.send_signal(signal.SIGCONT)
        assert first.wait(TIMEOUT) == 0, (tmp_path / "first.log").read_text()
    finally:
        _kill_all([first])
    pattern = HELD.format(out=re.escape(str(out)), pid=first.pid, host=re.escape(socket.gethostname()))
    for refused in (resumed, second):
        assert refused.returncode == 2 and refused.stdout == ""
        assert re.match(pattern, refused.stderr), refused.stderr  # one line, no traceback
    assert "stopped with" not in second.stderr
    _assert_whole(out)  # the job they found running was not disturbed


def _small_input(tmp_path, n=6):
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"id": f"r{i}", "query": "q", "chunks": [f"c{i}"]}) + "\n" for i in range(n)))
    return src


def test_a_job_on_a_folder_another_holds_is_refused_at_once_and_leaves_it_as_it_was(tmp_path):
    src, out = _small_input(tmp_path), tmp_path / "out"
    with OutputLock(out):
        t0 = time.monotonic()
        for resume in (False, True):
            with pytest.raises(OutputLocked, match=rf"^output directory '{re.escape(str(out))}' is being written by "
                                                   rf"another edgewise batch \(pid {os.getpid()} on "):
                run(src, out, tokenizer="words", budget=300, rows_per_unit=2, resume=resume)
        assert time.monotonic() - t0 < 10  # refused, not waited
        assert [p.name for p in out.iterdir()] == [LOCK]
    assert list(out.iterdir()) == []  # the holder removed its lock file when it let go
    summary = run(src, out, tokenizer="words", budget=300, rows_per_unit=2)
    assert summary.rows == 6 and sorted(p.name for p in out.iterdir()) == ["_edgewise_batch.json", "part-00000.parquet"]


def test_a_refusal_names_the_job_that_took_the_folder_over_not_the_dead_one_before_it(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait(30)
    out = tmp_path / "out"
    taker = OutputLock(out)
    fd = taker.open()
    assert taker.try_take(fd)  # taken, but the file still names the job killed before (kill -9 leaves its name)
    os.pwrite(fd, json.dumps({"pid": dead.pid, "host": socket.gethostname(), "started": "before",
                              "command": "edgewise batch (killed)"}).encode(), 0)
    writes_its_name = threading.Timer(0.3, taker.hold, args=(fd,))
    writes_its_name.start()
    try:
        with pytest.raises(OutputLocked, match=rf"another edgewise batch \(pid {os.getpid()} on "):
            OutputLock(out).acquire()
    finally:
        writes_its_name.join()
        taker.release()


def test_a_folder_of_other_things_is_refused_without_a_lock_file_made_in_it(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    with pytest.raises(InputError, match="is not empty; give a new or empty directory$"):
        run(_small_input(tmp_path), out, tokenizer="words", budget=300)
    assert [p.name for p in out.iterdir()] == ["notes.txt"]


def _packed_job(tmp_path, n=6):
    """A job of ``n`` rows in units of 2, every unit written, not yet joined."""
    src = _small_input(tmp_path, n)
    packer = Packer(tokenizer="words", budget=300)
    options = {**packer.options.to_dict(), "chunk_records": False}  # what run(..., tokenizer="words", budget=300) records
    job = Job.open(tmp_path / "out", plan(src, rows_per_unit=2), options, rows_per_unit=2, resume=False)
    for i in job.todo():
        write_packed_unit(packer, job.unit_path(i), job.units[i])
    return job


def test_done_only_for_a_result_whose_row_count_is_the_inputs(tmp_path, monkeypatch):
    job = _packed_job(tmp_path)
    real, calls = pq.ParquetWriter.write_table, []

    def lossy(self, table, *args, **kwargs):  # a unit's rows lost on the way to the result
        calls.append(table.num_rows)
        if len(calls) != 2:
            real(self, table, *args, **kwargs)

    monkeypatch.setattr(pq.ParquetWriter, "write_table", lossy)
    with pytest.raises(ResultError, match=r"^the batch result '.*part-00000\.parquet\.tmp' did not verify \(it holds 4 "
                                          r"rows; the input has 6 rows\): the job is not marked done; re-run the same "
                                          r"command with --resume"):
        job.finish()
    assert read_manifest(job.out)["state"] == "running"
    assert sorted(p.name for p in job.out.iterdir()) == [".units", "_edgewise_batch.json"]  # no result, whole or not
    assert len(list((job.out / ".units").iterdir())) == 3  # every unit kept: a resume joins them again
    monkeypatch.undo()
    assert job.finish() == (6, 0)
    assert read_manifest(job.out)["state"] == "done"
    assert pq.read_table(job.out / "part-00000.parquet").column("id").to_pylist() == [f"r{i}" for i in range(6)]


def test_verify_reads_the_result_back_whole(tmp_path):
    job = _packed_job(tmp_path)
    job.finish()
    result = job.out / "part-00000.parquet"
    assert verify(result, job.units) == (6, 0)
    with pytest.raises(ResultError, match=r"did not verify \(it holds 6 rows; the input has 8 rows\)"):
        verify(result, job.units + [{**job.units[-1], "base": 6}])
    data = result.read_bytes()
    result.write_bytes(data[: len(data) // 2] + data[-8:])  # the footer intact, the pages it points to cut
    with pytest.raises(ResultError, match=r"did not verify \(it cannot be read back \("):
        verify(result, job.units)


def test_a_unit_file_cut_short_is_not_joined_and_is_packed_again_on_resume(tmp_path):
    src = _small_input(tmp_path)
    job = _packed_job(tmp_path)
    job.unit_path(1).write_bytes(job.unit_path(1).read_bytes()[:100])
    with pytest.raises(ResultError, match=r"^the batch job in '.*out' is not done: its unit file '.*unit-00001\.arrow' "
                                          r"cannot be read \(.*\); the file was removed, and the job is not marked "
                                          r"done; re-run the same command with --resume"):
        job.finish()
    assert not job.unit_path(1).exists() and read_manifest(job.out)["state"] == "running"
    assert not (job.out / "part-00000.parquet").exists()
    summary = run(src, job.out, tokenizer="words", budget=300, rows_per_unit=2, resume=True)
    assert (summary.rows, summary.extra["resumed_rows"]) == (6, 4)
    assert pq.read_table(job.out / "part-00000.parquet").column("id").to_pylist() == [f"r{i}" for i in range(6)]


def test_resuming_a_finished_job_changes_nothing(tmp_path):
    src, out = _small_input(tmp_path), tmp_path / "out"
    run(src, out, tokenizer="words", budget=300, rows_per_unit=2)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    summary = run(src, out, tokenizer="words", budget=300, rows_per_unit=2, resume=True)
    assert (summary.rows, summary.extra["resumed_rows"]) == (6, 6)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # no .units/ made again, no lock file left
