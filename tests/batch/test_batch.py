"""edgewise batch: one typed output row per input row, identical to pack() in a loop, on both engines.

The Ray tests run a real local Ray instance (2 CPUs, started once for the module); one of them
kills a Packer actor while the job runs and checks every row still comes out exactly once.
"""

import argparse
import json
import threading
import time

import pytest

import edgewise
from edgewise.batch import choose_engine, packed_dict, run, schema
from edgewise.batch.units import plan
from edgewise.errors import InputError
from edgewise.options import PackOptions

from ..conftest import ROOT

pq = pytest.importorskip("pyarrow.parquet")

N = 150  # good rows in the shared job
JOB = PackOptions(budget=600, tokenizer="cl100k_base")
BUDGET_ERROR = ("BudgetError: budget must hold the fixed layers: the fixed layers (system, instructions, profile, "
                "question) need {} tokens, but budget is 5")


def _passages(nq_rows, start, n, scored):
    out = []
    for j in range(start, start + n):
        row = nq_rows[j % len(nq_rows)]
        c = {"id": f"p{j % len(nq_rows)}", "title": row["ctxs"][0]["title"], "text": row["ctxs"][0]["text"]}
        if scored:
            c["score"] = round(1.0 - (j - start) / (2 * n), 4)
        out.append(c)
    return out


def requests(nq_rows, n, chunks=8):
    """``n`` good rows over the NQ passages: ids or none, given scores or bm25, options per row or none."""
    rows = []
    for i in range(n):
        row = {"query": nq_rows[i % len(nq_rows)]["question"] + "?", "chunks": _passages(nq_rows, i, chunks, i % 3 != 0)}
        if i % 3 == 0:
            row["options"] = {"scorer": "bm25"}
        elif i % 5 == 1:
            row["options"] = {"order": "relevance", "layout": "paper", "budget": 400}
        if i % 4 != 0:
            row["id"] = f"q{i}"
        rows.append(row)
    return rows


# Bad rows, each with the error its cell must hold, after its class and the file and row it is about
BAD = [
    ('{"query": "q", "chunks": ["a"], "colour": "red"}',
     "InputError: unknown row key 'colour'; a row has: id, query, chunks, options"),
    ('{"query": "q"}', "InputError: a row needs 'chunks', but this one has only: query"),
    ('{"query": "q", "chunks": "just text"}', "InputError: chunks must be a list of chunks, but got a string"),
    ('{"query": 7, "chunks": ["a"]}', "InputError: query must be a string, but got int"),
    ('{"id": [1], "query": "q", "chunks": ["a"]}', "InputError: id must be a string or an integer, but got an array"),
    ('{"query": "q", "chunks": ["a"], "options": {"budgt": 5}}', None),  # unknown option: message from PackOptions
    ('{"query": "q", "chunks": ["a"], "options": {"budget": 5}}', None),  # budget too small: message from pack()
    ('{"query": "q", "chunks": [', "InputError: invalid JSON (Expecting value at column 27)"),
    ('[{"query": "q", "chunks": ["a"]}]',
     "InputError: a row must be a JSON object with query and chunks, but got an array"),
    ('"q"', "InputError: a row must be a JSON object with query and chunks, but got a string"),
]


def _expected_error(line):
    obj = json.loads(line)
    try:
        edgewise.pack(obj["query"], obj["chunks"], JOB, **obj["options"])
    except edgewise.EdgewiseError as exc:
        return f"{type(exc).__name__}: {exc}"
    raise AssertionError(f"{line} packed")


def write_jsonl(path, rows, bad=()):
    with open(path, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
        for line, _ in bad:
            f.write(line + "\n")
    return path


def expected_rows(rows, bad=(), path=""):
    """What pack() in a loop gives for each row, as the packed_dict of its output row, or its error
    (naming the file ``path`` and the row)."""
    out = []
    for i, row in enumerate(rows):
        packed = edgewise.pack(row["query"], row["chunks"], JOB, **(row.get("options") or {}))
        out.append((i, row.get("id", str(i)), packed.to_dict(), None))
    for k, (line, message) in enumerate(bad):
        index = len(rows) + k
        kind, why = (_expected_error(line) if message is None else message).split(": ", 1)
        message = f"{kind}: {path} row {index}: {why}"
        out.append((index, str(index), None, message))
    return out


def read_output(files):
    table = pq.ParquetDataset(files).read() if len(files) > 1 else pq.read_table(files[0])
    assert table.schema == schema()
    return sorted(table.to_pylist(), key=lambda r: r["index"])


def assert_same(out_rows, expected):
    got = [(r["index"], r["id"], None if r["error"] else packed_dict(r), r["error"]) for r in out_rows]
    assert got == expected


@pytest.fixture(scope="module")
def job(nq_rows, tmp_path_factory):
    """N good rows then the bad ones, as JSON Lines, and what pack() in a loop makes of them."""
    d = tmp_path_factory.mktemp("batch")
    rows = requests(nq_rows, N)
    path = write_jsonl(d / "in.jsonl", rows, BAD)
    return path, expected_rows(rows, BAD, str(path))


def test_local_output_is_the_pack_loop_row_for_row(job, tmp_path):
    path, expected = job
    summary = run(path, tmp_path / "out", JOB, engine="local", chunk_records=True)
    assert (summary.engine, summary.rows, summary.errors) == ("local", N + len(BAD), len(BAD))
    assert_same(read_output(summary.files), expected)


def test_bad_rows_are_error_cells_with_nulls_elsewhere(job, tmp_path):
    path, expected = job
    summary = run(path, tmp_path / "out", JOB, engine="local", rows_per_unit=7)
    table = pq.read_table(summary.files[0])
    bad = table.slice(N).to_pylist()
    nulls = {name: None for name in schema().names if name not in ("index", "id", "error")}
    assert bad == [{**nulls, "index": i, "id": ident, "error": err} for i, ident, _, err in expected[N:]]


@pytest.mark.slow  # two spawned workers: seconds
def test_process_pool_matches_the_loop(nq_rows, tmp_path):
    rows = requests(nq_rows, 60)
    path = write_jsonl(tmp_path / "in.jsonl", rows, BAD[:3])
    summary = run(path, tmp_path / "out", JOB, engine="local", concurrency=2, rows_per_unit=5, chunk_records=True)
    assert (summary.rows, summary.errors, summary.concurrency) == (63, 3, 2)
    assert_same(read_output(summary.files), expected_rows(rows, BAD[:3], str(path)))


def test_parquet_and_directory_input(nq_rows, tmp_path):
    """Parquet rows (absent keys read as null, options as JSON text) pack as their JSON Lines twins,
    and the input index runs on across the files of a directory in name order."""
    import pyarrow as pa

    rows = requests(nq_rows, 30)
    d = tmp_path / "in"
    d.mkdir()
    write_jsonl(d / "a.jsonl", rows[:12])
    every = [{k: r.get(k) for k in ("id", "query", "chunks", "options")} for r in rows]  # a column per key
    as_text = [{**r, "options": None if r["options"] is None else json.dumps(r["options"])} for r in every[12:20]]
    pq.write_table(pa.Table.from_pylist(as_text), d / "b.parquet", row_group_size=3)
    pq.write_table(pa.Table.from_pylist(every[20:]), d / "c.parquet", row_group_size=4)
    (d / "notes.txt").write_text("not input")
    assert [u["rows"] for u in plan(d, rows_per_unit=4)] == [4, 4, 4, 3, 3, 2, 4, 4, 2]
    summary = run(d, tmp_path / "out", JOB, engine="local", chunk_records=True)
    assert_same(read_output(summary.files), expected_rows(rows))


def test_refusals(job, tmp_path):
    path, _ = job
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "old.parquet").write_text("x")
    with pytest.raises(InputError, match="^output directory '.*full' is not empty; give a new or empty directory$"):
        run(path, tmp_path / "full", JOB, engine="local")
    with pytest.raises(InputError, match="^input '.*nothing' is neither a file nor a directory$"):
        run(tmp_path / "nothing", tmp_path / "out", JOB)
    with pytest.raises(InputError, match="^engine 'local' runs on this machine, but a Ray address was given"):
        run(path, tmp_path / "out", JOB, engine="local", address="ray://head:10001")
    with pytest.raises(InputError, match="^concurrency must be >= 1, but got 0$"):
        run(path, tmp_path / "out", JOB, concurrency=0)
    assert (choose_engine("auto", 10**6, None), choose_engine("auto", 10, "auto")) == ("local", "ray")


def test_cli_writes_parquet_and_prints_the_summary(job, tmp_path, capsys):
    from edgewise.cli import _Parser
    from edgewise.cli.batch import add_commands
    from edgewise.cli.lazy import build_named

    path, expected = job
    parser = _Parser(prog="edgewise")
    add_commands(parser.add_subparsers(dest="command", required=True, parser_class=_Parser))
    argv = ["batch", "--input", str(path), "--output", str(tmp_path / "out"), "--engine", "local", "--budget", "600",
            "--chunk-records"]
    build_named(parser, argv)
    args = parser.parse_args(argv)
    args.func(args)
    out, err = capsys.readouterr()
    summary = json.loads(out)
    assert {k: summary[k] for k in ("engine", "rows", "errors", "files")} == {
        "engine": "local", "rows": N + 10, "errors": 10, "files": [str(tmp_path / "out" / "part-00000.parquet")]}
    assert err.startswith(f"edgewise: packed {N + 10} rows (10 with an error) into {tmp_path / 'out'} in ")
    assert_same(read_output(summary["files"]), expected)


def test_packed_dict_refuses_an_error_row():
    with pytest.raises(InputError, match="^row '3' was not packed: InputError: bad$"):
        packed_dict({"id": "3", "error": "InputError: bad"})


# -- on a real local Ray instance -------------------------------------------------------------------

@pytest.fixture(scope="module")
def ray_instance():
    ray = pytest.importorskip("ray")
    pytest.importorskip("ray.data")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


@pytest.mark.slow
def test_ray_output_is_the_pack_loop_row_for_row(ray_instance, job, tmp_path):
    path, expected = job
    summary = run(path, tmp_path / "out", JOB, engine="ray", concurrency=2, chunk_records=True)
    assert (summary.engine, summary.rows, summary.errors) == ("ray", N + 10, 10)
    assert_same(read_output(summary.files), expected)


@pytest.mark.slow
def test_pack_dataset_on_a_dataset_of_rows(ray_instance, nq_rows, tmp_path):
    import pyarrow as pa

    from edgewise.batch.ray_data import pack_dataset

    rows = [{"id": f"r{i}", **{k: r.get(k) for k in ("query", "chunks", "options")}} for i, r in enumerate(requests(nq_rows, 40))]
    ds = ray_instance.data.from_items(rows)
    out = sorted(pack_dataset(ds, JOB, concurrency=2, batch_size=8, chunk_records=True).take_all(), key=lambda r: int(r["id"][1:]))
    assert_same([{**r, "index": i} for i, r in enumerate(out)], expected_rows(rows))
    rows[3]["id"] = None
    pq.write_table(pa.Table.from_pylist(rows[:6]), tmp_path / "rows.parquet", row_group_size=2)
    ds = ray_instance.data.read_parquet(str(tmp_path / "rows.parquet"))  # one actor: the read needs the other CPU
    out = sorted(pack_dataset(ds, JOB, batch_size=2).take_all(), key=lambda r: r["id"] or "")
    assert [(r["id"], r["index"], r["error"]) for r in out] == [(None, None, (
        "InputError: the row's id is null, and a Dataset's rows have no input index: give every row an id"))] + [
        (f"r{i}", None, None) for i in (0, 1, 2, 4, 5)]
    with pytest.raises(InputError, match="^pack_dataset needs an id column to name each output row, but the "
                                         "Dataset has only: query, chunks; add one"):
        pack_dataset(ray_instance.data.from_items([{"query": "q", "chunks": ["a"]}]))


def _pack_actors(ray):
    """The Packer actors of the running job, from the cluster's actor table (no dashboard needed)."""
    return {aid: a for aid, a in ray._private.state.actors().items() if "PackUnits" in a["ActorClassName"]}


def _kill_one_actor(ray, done, killed, out):
    """Kill a live PackUnits actor as soon as the job has written its first unit file: every actor is
    then inside its first call, so the killed one has a call in flight that Ray must run again on
    the restarted actor before the job can end."""
    deadline = time.monotonic() + 120
    while not done.is_set() and time.monotonic() < deadline:
        alive = [aid for aid, a in _pack_actors(ray).items() if a["State"] == "ALIVE"]
        if alive and any(out.glob("**/unit-*.arrow")):
            worker = ray._private.worker.global_worker
            ray.kill(worker.core_worker.get_actor_handle(ray.ActorID.from_hex(alive[0])), no_restart=False)
            killed.append(alive[0])
            return
        time.sleep(0.05)


@pytest.mark.slow
def test_a_worker_killed_mid_job_loses_and_repeats_no_row(ray_instance, nq_rows, tmp_path):
    # 8 calls of 20 units; the kill lands in the first ones
    rows = requests(nq_rows, 1500, chunks=60)
    path = write_jsonl(tmp_path / "in.jsonl", rows)
    done, killed = threading.Event(), []
    killer = threading.Thread(target=_kill_one_actor, args=(ray_instance, done, killed, tmp_path / "out"))
    killer.start()
    try:
        summary = run(path, tmp_path / "out", JOB, engine="ray", concurrency=2, rows_per_unit=10, chunk_records=True)
    finally:
        done.set()
        killer.join()
    assert len(killed) == 1  # the kill happened while the job ran
    assert _pack_actors(ray_instance)[killed[0]]["NumRestarts"] == 1  # and Ray restarted the actor
    assert summary.rows == 1500
    assert_same(read_output(summary.files), expected_rows(rows))


def test_batch_options_come_from_the_pack_flags():
    from edgewise.cli.batch import add_commands
    from edgewise.cli.lazy import build_named
    from edgewise.options import from_args

    parser = argparse.ArgumentParser(prog="edgewise")
    add_commands(parser.add_subparsers(dest="command"))
    argv = ["batch", "-i", "x.jsonl", "--output", "o", "--order", "relevance", "--budget", "700", "--engine", "ray"]
    build_named(parser, argv)
    a = parser.parse_args(argv)
    assert (from_args(a), a.engine, a.concurrency) == (PackOptions(order="relevance", budget=700), "ray", 1)


@pytest.mark.models
def test_an_embedding_scorer_sees_the_rows_of_a_unit_in_one_call(nq_rows, tmp_path, monkeypatch):
    """The texts a unit's rows need embedded go to the model in one call (full batches across rows);
    the packs then find every vector in the cache, and the output is still the pack loop's."""
    pytest.importorskip("onnxruntime")
    from edgewise.batch.local import pack_unit
    from edgewise.packing.packer import Packer
    from edgewise.score.dense import shared_dense

    rows = [{"id": f"d{i}", "query": f"{nq_rows[i]['question']}? (run {tmp_path.name})",
             "chunks": [{k: v for k, v in c.items() if k != "score"} | {"text": f"{c['text']} ({tmp_path.name})"}
                        for c in _passages(nq_rows, i, 5, False)]} for i in range(6)]
    path = write_jsonl(tmp_path / "in.jsonl", rows)
    calls = []
    scorer = shared_dense()
    model_call = scorer._embed_uncached
    monkeypatch.setattr(scorer, "_embed_uncached", lambda texts: calls.append(len(texts)) or model_call(texts))
    table = pack_unit(Packer(JOB, scorer="dense"), plan(path, rows_per_unit=6)[0], chunk_records=True)
    unique = {r["query"] for r in rows} | {f"{c['title']}\n{c['text']}" for r in rows for c in r["chunks"]}
    assert calls == [len(unique)]
    expected = [(i, r["id"], edgewise.pack(r["query"], r["chunks"], JOB, scorer="dense").to_dict(), None)
                for i, r in enumerate(rows)]
    assert_same(table.to_pylist(), expected)


def test_benchmark_tiny_run(capsys):
    """benchmarks/batch.py runs and prints its table (structure only, never a timing)."""
    import importlib.util
    import sys

    root = ROOT
    spec = importlib.util.spec_from_file_location("bench_batch", root / "benchmarks" / "batch.py")
    bench = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = bench
    spec.loader.exec_module(bench)
    ways = ["loop", "readloop", "userloop", "local1", "local1rec", "local1pq"]
    results = bench.main(["--rows20", "6", "--rows200", "2", "--reps", "1", "--ways", ",".join(ways)])
    assert [(r["chunks"], r["rows"], r["way"]) for r in results] == [(20, 6, w) for w in ways] + [(200, 2, w) for w in ways]
    out = capsys.readouterr().out
    assert ("| chunks | rows | way | seconds | rows/s per worker | / (a) pack() loop | / (b) user's loop | "
            "steady rows/s per worker | first unit, s | CPU rows/s |") in out
    assert [line.split(" | ")[2] for line in out.splitlines() if line.startswith(("| 20 |", "| 200 |"))] == [
        bench.WAYS[w] for w in ways] * 2
    assert "| stage | 20 chunks: ms/row | x (a) | 200 chunks: ms/row | x (a) |" in out
    stages = [line.split(" | ")[0][2:] for line in out.splitlines() if line.startswith("| ") and line.count(" | ") == 4]
    assert stages[2:] == ["(a) pack() loop, rows parsed (the reference)", *bench.STAGES.values(), "**total, local x1**"]
