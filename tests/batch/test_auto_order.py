"""``order="auto"`` in a batch job: each row is placed by its model's profile, and the output's
``placement`` column records the choice, so an output row reads back as what ``pack()`` gives.

The profile is synthetic (``tests/position_profiles.py``), in a directory ``$EDGEWISE_PROFILES``
names; the pool's workers are spawned processes and see it as this process does.
"""

from __future__ import annotations

import json

import pytest

import edgewise
from edgewise.batch import packed_dict, run
from edgewise.cli import main

from ..position_profiles import CHUNKS, PLACED_BY_EDGES, PLACED_BY_LAST_BEST, QUERY, placement, write_profile

pq = pytest.importorskip("pyarrow.parquet")

JOB = {"model": "gpt-4o", "order": "auto", "layout": "paper"}
ROWS = [{"id": "auto", "query": QUERY, "chunks": CHUNKS},
        {"id": "no-profile", "query": QUERY, "chunks": CHUNKS, "options": {"model": "gpt-4.1"}},
        {"id": "edges", "query": QUERY, "chunks": CHUNKS, "options": {"order": "edges"}}]


@pytest.fixture
def job(tmp_path, monkeypatch):
    """The rows as JSON Lines, the profile, and the profile directories (both empty but for it)."""
    env, config = tmp_path / "env", tmp_path / "config"
    monkeypatch.setenv("EDGEWISE_PROFILES", str(env))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config))
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    return src, write_profile(env), (env, config / "edgewise" / "profiles")


def check(files, path, dirs):
    """The output rows: what pack() in a loop gives for ROWS, each with its placement."""
    from edgewise.order.profiles import SHIPPED

    rows = pq.read_table(files[0]).to_pylist()
    assert [(r["id"], r["error"]) for r in rows] == [("auto", None), ("no-profile", None), ("edges", None)]
    assert [packed_dict(r) for r in rows] == [
        edgewise.pack(r["query"], r["chunks"], **{**JOB, **r.get("options", {})}).to_dict() for r in ROWS]
    assert [r["placement"] for r in rows] == [
        placement(path, "profile gpt-4o/qa-paper-4"),
        placement(None, f"no profile for model 'gpt-4.1' (looked in {dirs[0]}, {dirs[1]}, {SHIPPED}): auto places "
                        "by edges", order="edges"),
        None]
    assert [r["order"] for r in rows] == [PLACED_BY_LAST_BEST, PLACED_BY_EDGES, PLACED_BY_EDGES]


def test_a_job_in_this_process_places_each_row_by_its_model_s_profile(job, tmp_path):
    src, path, dirs = job
    summary = run(src, tmp_path / "out", JOB, engine="local", chunk_records=True)
    assert (summary.rows, summary.errors) == (3, 0)
    check(summary.files, path, dirs)


def test_spawned_workers_find_the_same_profiles(job, tmp_path, capsys):
    src, path, dirs = job
    out = tmp_path / "out"
    code = main(["batch", "--input", str(src), "--output", str(out), "--engine", "local", "--concurrency", "2",
                 "--rows-per-unit", "1", "--chunk-records", "--model", "gpt-4o", "--order", "auto", "--layout", "paper"])
    assert code == 0
    summary = json.loads(capsys.readouterr().out)
    assert (summary["rows"], summary["errors"], summary["concurrency"]) == (3, 0, 2)
    check(summary["files"], path, dirs)
