"""The index's store under two writers and after damage: writers take turns (a lock naming its
holder), a store holding doubled chunks is repaired by the next run, and a damaged store (a file
emptied, cut short, or with bytes overwritten in place) is one line naming the file or the chunk and
the command that rebuilds it, for ``index``, ``retrieve`` and ``ask`` alike: damaged text or vectors
are never served. A store from before checksums is still read, saying what is not checked."""

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


def _data_file(store: Path) -> Path:
    (data,) = (store / "chunks.lance" / "data").iterdir()
    return data


def _damage(store: Path, kind: str) -> Path:
    data = _data_file(store)
    raw = data.read_bytes()
    data.write_bytes(b"" if kind == "empty" else raw[: len(raw) * 2 // 3])
    return data


def _fix(store: Path) -> str:
    return f"rebuild it from your files with: edgewise index PATH... --store {store} --rebuild"


def _refused(store: Path, docs: Path, line: str) -> None:
    """``retrieve`` and ``index`` both stop with ``line`` alone, status 2, nothing on stdout."""
    for args in (["retrieve", SENATOR, "--store", str(store)], ["index", str(docs), "--store", str(store), "--quiet"]):
        r = cli(*args)
        assert (r.returncode, r.stdout, r.stderr.splitlines()) == (2, "", [line]), args


def _rebuilt_and_served(store: Path, docs: Path) -> None:
    r = cli("index", str(docs), "--store", str(store), "--rebuild", "--quiet", "--format", "json")
    assert r.returncode == 0, r.stderr
    assert len(json.loads(r.stdout)["added"]) == 4
    r = cli("retrieve", SENATOR, "--store", str(store), "--top-n", "1")
    assert r.returncode == 0 and "thirty Years" in r.stdout, r.stderr


@pytest.mark.parametrize("kind", ["empty", "cut short"])
def test_a_damaged_store_is_one_line_naming_the_file_and_the_fix(docs, tmp_path, kind):
    store = tmp_path / "store"
    index_paths([docs], store)
    size = _data_file(store).stat().st_size
    data = _damage(store, kind)
    now = data.stat().st_size
    _refused(store, docs, f"edgewise: error: the store at {store} is damaged (file {data} is {now:,} bytes, but "
                          f"{size:,} were written): {_fix(store)}")
    _rebuilt_and_served(store, docs)


def test_an_emptied_full_text_index_stops_index_and_retrieve_until_rebuilt(docs, tmp_path):
    store = tmp_path / "store"
    index_paths([docs], store)
    (inverted,) = (store / "chunks.lance" / "_indices").glob("*/part_0_invert.lance")
    size = inverted.stat().st_size
    inverted.write_bytes(b"")
    _refused(store, docs, f"edgewise: error: the store at {store} is damaged (file {inverted} is 0 bytes, but "
                          f"{size:,} were written): {_fix(store)}")
    _rebuilt_and_served(store, docs)


def _stored(store: Path, what: str) -> tuple[str, bytes]:
    """A chunk's id and the bytes it stores of ``what``: its vector, or its text."""
    import numpy as np

    rows = open_store(store)._chunks.to_arrow().to_pylist()
    row = next(r for r in rows if "thirty Years" in r["text"])
    value = np.asarray(row["vector"], dtype="<f4").tobytes() if what == "vector" else row["text"].encode()
    return row["id"], value


def _overwrite_middle(data: Path, value: bytes) -> None:
    """200 bytes overwritten in place in the middle of ``value``'s bytes in ``data``; its length kept."""
    raw = bytearray(data.read_bytes())
    at = raw.find(value)
    assert at >= 0 and raw.find(value, at + 1) == -1 and len(value) > 400
    start = at + len(value) // 2 - 100
    raw[start:start + 200] = bytes(b ^ 0x5A for b in raw[start:start + 200])
    data.write_bytes(bytes(raw))


@pytest.mark.parametrize("what", ["vector", "text"])
def test_bytes_overwritten_in_a_data_file_are_never_served(docs, tmp_path, what):
    store = tmp_path / "store"
    index_paths([docs], store)
    cid, value = _stored(store, what)
    data = _data_file(store)
    _overwrite_middle(data, value)
    source = docs / "constitution.pdf"
    changed = f"file {data} holds other bytes than were written to it (its SHA-256 differs from the one recorded)"
    r = cli("index", str(docs), "--store", str(store), "--quiet")
    assert (r.returncode, r.stdout, r.stderr.splitlines()) == (
        2, "", [f"edgewise: error: the store at {store} is damaged ({changed}): {_fix(store)}"])
    row = (f"edgewise: error: the store at {store} is damaged (chunk {cid!r} of {source} is not what was written: its "
           f"text, vector or place differs from its checksum): {_fix(store)}")
    for args in (["retrieve", SENATOR, "--store", str(store)],
                 ["ask", SENATOR, "--store", str(store), "--backend", "openai", "--base-url", "http://127.0.0.1:9/v1",
                  "--model", "any-model", "--context", "4096"]):  # refused before any model is asked
        r = cli(*args)
        assert (r.returncode, r.stdout, r.stderr.splitlines()) == (2, "", [row]), args
    (store / "edgewise-manifest.json").unlink()  # without the files' record, every chunk's checksum is checked
    r = cli("index", str(docs), "--store", str(store), "--quiet")
    assert (r.returncode, r.stdout, r.stderr.splitlines()) == (2, "", [row])
    _rebuilt_and_served(store, docs)


def test_without_its_manifest_a_file_cut_short_is_still_one_line(docs, tmp_path):
    store = tmp_path / "store"
    index_paths([docs], store)
    (store / "edgewise-manifest.json").unlink()
    data = _damage(store, "cut short")
    try:
        import lance  # noqa: F401 - with pylance, a file cut short is named too

        where = f"file {data} cannot be read"
    except ImportError:
        where = "a file of the store cannot be read"
    _refused(store, docs, f"edgewise: error: the store at {store} is damaged ({where}; RuntimeError: lance error: "
                          "LanceError(IO): Generic LocalFileSystem error: failed to fill whole buffer): " + _fix(store))


def test_a_run_that_did_not_finish_is_followed_by_a_full_check(docs, tmp_path, monkeypatch):
    import edgewise.index.lance as lance_store

    store = tmp_path / "store"
    index_paths([docs / "gettysburg-address.txt"], store)

    def stop(self):  # the run stops after writing its chunks, before the search index and the record
        raise KeyboardInterrupt

    with monkeypatch.context() as m:
        m.setattr(lance_store.LanceStore, "finish", stop)
        with pytest.raises(KeyboardInterrupt):
            index_paths([docs], store)
    manifest = json.loads((store / "edgewise-manifest.json").read_text())
    assert manifest["complete"] is False
    r = cli("index", str(docs), "--store", str(store), "--format", "json", "--quiet")
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert (len(report["unchanged"]), report["chunks_in_store"]) == (4, 8)
    assert report["notes"] == [f"the store at {store} was last written by a run that did not finish (or by another "
                               "program): every chunk was checked against its checksum, and the search index is rebuilt"]
    assert json.loads((store / "edgewise-manifest.json").read_text())["complete"] is True
    again = index_paths([docs], store)
    assert (len(again.unchanged), again.notes) == (4, [])
    assert "thirty Years" in retrieve(open_store(store), SENATOR, top_n=1, mode="bm25")[0].row.text


def test_a_store_from_before_checksums_is_read_and_says_what_is_not_checked(docs, tmp_path):
    import lancedb

    store = tmp_path / "store"
    index_paths([docs / "gettysburg-address.txt", docs / "constitution.pdf"], store)
    lancedb.connect(str(store)).open_table("chunks").drop_columns(["checksum"])  # as edgewise wrote it before
    (store / "edgewise-manifest.json").unlink()
    note = (f"the store at {store} was written before edgewise kept checksums: the chunks retrieve and ask serve are "
            f"not checked; rebuild it to add them: edgewise index PATH... --store {store} --rebuild")
    r = cli("retrieve", SENATOR, "--store", str(store), "--top-n", "1")
    assert r.returncode == 0 and "thirty Years" in r.stdout, r.stderr
    assert r.stderr.splitlines()[0] == f"edgewise: warning: {note}"
    r = cli("index", str(docs), "--store", str(store), "--format", "json", "--quiet")  # two files more, unchecked
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert (len(report["added"]), len(report["unchanged"]), report["notes"]) == (2, 2, [note])
    assert "checksum" not in lancedb.connect(str(store)).open_table("chunks").schema.names
    assert json.loads((store / "edgewise-manifest.json").read_text())["complete"] is True  # its files now recorded
    r = cli("index", str(docs), "--store", str(store), "--rebuild", "--format", "json", "--quiet")
    assert r.returncode == 0 and json.loads(r.stdout)["notes"] == [], r.stderr
    assert "checksum" in lancedb.connect(str(store)).open_table("chunks").schema.names
