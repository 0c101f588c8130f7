"""The eval and data commands end to end: Ctrl-C in `eval run` is one line and the run resumes;
`eval report` flags an incomplete grid; `data nq --pool` mines distractors from a pool."""

import gzip
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from ..conftest import DATA
from ..servers import FakeCompletions

pytestmark = pytest.mark.slow  # subprocesses and a paced loopback LLM: seconds each


@pytest.fixture()
def llm():
    server = FakeCompletions(lambda prompt: "an answer", delay=0.2)
    yield server
    server.close()


def _eval(out_dir, url):
    return [sys.executable, "-m", "edgewise", "eval", "run", "--task", "kv", "--pairs", "6", "--examples", "6",
            "--positions", "0,5", "--backend", "openai", "--base-url", url, "--model", "m", "--concurrency", "1",
            "--condition", "baseline", "--quiet", "-o", str(out_dir)]


def test_ctrl_c_in_eval_run_is_one_line_and_the_same_command_resumes(tmp_path, llm):
    env = {**os.environ, "OPENAI_API_KEY": ""}
    proc = subprocess.Popen(_eval(tmp_path / "run", llm.url), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)
    results = tmp_path / "run" / "results.jsonl"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (results.exists() and results.read_text().count("\n") >= 2):
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert err.startswith("edgewise: stopped; run the same command to resume ("), err
    stored = results.read_text().count("\n")
    again = subprocess.run(_eval(tmp_path / "run", llm.url), capture_output=True, text=True, env=env, timeout=120)
    assert again.returncode == 0, again.stderr
    summary = json.loads(again.stdout)
    assert (summary["total"], summary["already_done"], summary["done_now"]) == (12, stored, 12 - stored)


def test_report_flags_an_incomplete_grid(tmp_path, llm):
    env = {**os.environ, "OPENAI_API_KEY": ""}
    run_dir = tmp_path / "run"
    assert subprocess.run(_eval(run_dir, llm.url), capture_output=True, env=env, timeout=120).returncode == 0
    lines = (run_dir / "results.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    (run_dir / "results.jsonl").write_text("".join(lines[:-3]), encoding="utf-8")  # three results lost
    out = subprocess.run([sys.executable, "-m", "edgewise", "eval", "report", str(run_dir), "--no-charts"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "Incomplete grid: 3 of 12 planned results are missing" in out.stdout
    assert "edgewise: warning: incomplete grid: 3 of 12 planned results are missing" in out.stderr


def test_data_nq_mines_distractors_from_a_pool(tmp_path):
    rows = [json.loads(line) for line in gzip.open(DATA / "nq-open-oracle-dev.jsonl.gz", "rt", encoding="utf-8")]
    small, pool = tmp_path / "small.jsonl", tmp_path / "pool.jsonl"
    small.write_text("".join(json.dumps(r) + "\n" for r in rows[:30]), encoding="utf-8")
    pool.write_text("".join(json.dumps(r) + "\n" for r in rows[30:1500]), encoding="utf-8")
    base = [sys.executable, "-m", "edgewise", "data", "nq", "--source", str(small), "--docs", "5"]
    alone = subprocess.run(base, capture_output=True, text=True, timeout=120)
    pooled = subprocess.run([*base, "--pool", str(pool)], capture_output=True, text=True, timeout=120)
    assert alone.returncode == pooled.returncode == 0, alone.stderr + pooled.stderr
    assert "edgewise: warning: " in alone.stderr and "passages" in alone.stderr  # 30 rows: a small pool
    assert "edgewise: warning: " not in pooled.stderr
    ids = lambda text: [[c["id"] for c in json.loads(line)["ctxs"]] for line in text.splitlines()]  # noqa: E731
    pooled_ids = ids(pooled.stdout)
    assert len(pooled_ids) == len(ids(alone.stdout)) == 30
    assert any(cid.startswith("pool-") for row in pooled_ids for cid in row)
