"""The index's store under two writers and after damage: writers take turns (a lock naming its
holder), a store holding doubled chunks is repaired by the next run, and a damaged store is one
line naming the file and the command that rebuilds it, for ``index`` and ``retrieve`` alike."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.models
pytest.importorskip("lancedb", reason="needs the index extra: pip install -e '.[index]'")
pytest.importorskip("onnxruntime", reason="needs the models extra")

from edgewise.index import index_paths, open_store, retrieve  # noqa: E402
from edgewise.index.lock import LOCK, WriteLock  # noqa: E402

from ..conftest import ROOT  # noqa: E402

DOCS = ROOT / "examples" / "docs"
EDGEWISE = [sys.executable, "-m", "edgewise"]
SENATOR = "How old must a senator be?"


def cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([*EDGEWISE, *args], capture_output=True, text=True, timeout=timeout)


@pytest.fixture()
def docs(tmp_path) -> Path:
    folder = tmp_path / "docs"
    shutil.copytree(DOCS, folder)
    return folder


def _ranking(store: Path) -> list[tuple[str, float]]:
    return [(h.row.id, round(h.score, 9)) for h in retrieve(open_store(store), SENATOR, top_n=8)]


@pytest.mark.slow
def test_two_index_runs_at_once_store_every_chunk_once(tmp_path):
    folder = tmp_path / "many"
    folder.mkdir()
    for i in range(300):
        (folder / f"note-{i:03d}.txt").write_text(f"Note {i} says the harbour light number {i} is lit at dusk.\n")
    store = tmp_path / "store"
    cmd = [*EDGEWISE, "index", str(folder), "--store", str(store), "--format", "json", "--quiet"]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err for _, err in outs]
    reports = sorted((json.loads(out) for out, _ in outs), key=lambda r: len(r["added"]))
    assert [(len(r["added"]), len(r["unchanged"]), r["chunks_in_store"]) for r in reports] == [(0, 300, 300),
                                                                                               (300, 0, 300)]
    db = open_store(store)
    assert (db.count(), len(db.sources()), db.audit()) == (300, 300, {})
    ids = db._chunks.to_arrow().column("id").to_pylist()
    assert len(set(ids)) == len(ids) == 300


def _double(store: Path) -> None:
    """What two unserialised writers left behind: every chunk row and every file record twice."""
    db = open_store(store)
    db._chunks.add(db._chunks.to_arrow())
    db._files.add(db._files.to_arrow())


def test_a_store_holding_doubled_chunks_is_repaired_by_the_next_run(docs, tmp_path):
    store = tmp_path / "store"
    first = index_paths([docs], store)
    before = _ranking(store)
    _double(store)
    db = open_store(store)
    assert db.count() == 2 * first.total_chunks
    n = {Path(s).name: c for s, c in _chunks_per_file(db).items()}
    assert db.audit() == {str(docs / name): f"{n[name]} chunk rows share an id with another (chunks stored twice)"
                          for name in n}
    (docs / "bill-of-rights.md").unlink()
    speech = docs / "gettysburg-address.txt"
    again = index_paths([speech], store)  # one file named: the others are repaired from their files too
    gone = str(docs / "bill-of-rights.md")
    assert again.repaired == sorted(
        [(gone, f"{n['bill-of-rights.md']} chunk rows share an id with another (chunks stored twice); its chunks "
                "were removed (cannot read the file (No such file or directory))")]
        + [(str(docs / name), f"{n[name]} chunk rows share an id with another (chunks stored twice); its chunks were "
                              "removed, to be written again from the file") for name in n if name != "bill-of-rights.md"])
    assert (again.added, again.updated, again.unchanged, again.failed) == ([], [], [], [])
    after = open_store(store)
    assert after.audit() == {}
    assert after.count() == again.total_chunks == first.total_chunks - n["bill-of-rights.md"] // 2
    assert sorted(Path(s).name for s in after.sources()) == sorted(k for k in n if k != "bill-of-rights.md")
    fresh = tmp_path / "fresh"
    index_paths([docs], fresh)
    assert _ranking(store) == _ranking(fresh)  # the repaired store ranks as one built once from the same files
    assert before != _ranking(store)  # (the file removed is gone from the ranking)
    r = cli("index", str(docs), "--store", str(store), "--quiet", "--format", "json")
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert (report["repaired"], len(report["unchanged"]), report["removed"]) == ([], 3, [])


def _chunks_per_file(db) -> dict[str, int]:
    from collections import Counter

    return dict(Counter(db._chunks.to_arrow().column("source").to_pylist()))


def test_a_second_writer_waits_then_stops_naming_the_holder(docs, tmp_path):
    store = tmp_path / "store"
    with WriteLock(store, timeout=0) as lock:
        holder = lock.holder()
        r = cli("index", str(docs), "--store", str(store), "--lock-timeout", "1", "--quiet")
    assert r.returncode == 2
    who = f"pid {os.getpid()} on {socket.gethostname()}, started {holder['started']}: {holder['command']}"
    assert r.stderr.splitlines() == [
        f"edgewise: waiting up to 1 s for another edgewise index writing to {store} ({who})",
        f"edgewise: error: store {store} is being written by another edgewise index ({who}); waited 1 s: let it "
        "finish or stop it, or wait longer with --lock-timeout SECONDS",
    ]
    assert not (store / "chunks.lance").exists()


def test_a_lock_file_left_by_a_dead_process_is_taken_over(docs, tmp_path):
    store = tmp_path / "store"
    store.mkdir()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    (store / LOCK).write_text(json.dumps({"pid": int(dead.stdout), "host": socket.gethostname(),
                                          "started": "2026-01-01T00:00:00Z", "command": "edgewise index"}))
    r = cli("index", str(docs / "gettysburg-address.txt"), "--store", str(store), "--lock-timeout", "0", "--quiet",
            "--format", "json")
    assert r.returncode == 0, r.stderr
    assert len(json.loads(r.stdout)["added"]) == 1
    assert (store / LOCK).read_text() == ""  # released: emptied, never left naming a holder


def _damage(store: Path, kind: str) -> Path:
    (data,) = (store / "chunks.lance" / "data").iterdir()
    raw = data.read_bytes()
    data.write_bytes(b"" if kind == "empty" else raw[: len(raw) * 2 // 3])
    return data


@pytest.mark.parametrize("kind", ["empty", "cut short"])
def test_a_damaged_store_is_one_line_naming_the_file_and_the_fix(docs, tmp_path, kind):
    store = tmp_path / "store"
    index_paths([docs], store)
    data = _damage(store, kind)
    try:
        import lance  # noqa: F401 - with pylance, a file cut short is named too

        where = f"file {data} is empty" if kind == "empty" else f"file {data} cannot be read"
    except ImportError:
        where = f"file {data} is empty" if kind == "empty" else "a file of the store cannot be read"
    line = (f"edgewise: error: the store at {store} is damaged ({where}; RuntimeError: lance error: LanceError(IO): "
            "Generic LocalFileSystem error: failed to fill whole buffer): rebuild it from your files with: "
            f"edgewise index PATH... --store {store} --rebuild")
    for args in (["retrieve", SENATOR, "--store", str(store)], ["index", str(docs), "--store", str(store), "--quiet"]):
        r = cli(*args)
        assert (r.returncode, r.stdout, r.stderr.splitlines()) == (2, "", [line]), args
    r = cli("index", str(docs), "--store", str(store), "--rebuild", "--quiet", "--format", "json")
    assert r.returncode == 0, r.stderr
    assert len(json.loads(r.stdout)["added"]) == 4
    assert "thirty Years" in retrieve(open_store(store), SENATOR, top_n=1)[0].row.text
