"""``edgewise index`` and ``edgewise retrieve`` for real: the bundled documents, the bundled MiniLM,
LanceDB on disk, behind a real Lance REST server and on a real S3-compatible server (moto), both on
127.0.0.1; incremental re-indexing, bad files reported while the rest is indexed, the vector index
past its threshold, and stores that must be refused."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.models
pytest.importorskip("lancedb", reason="needs the index extra: pip install -e '.[index]'")
pytest.importorskip("onnxruntime", reason="needs the models extra")

from edgewise.errors import ConfigError, InputError  # noqa: E402
from edgewise.index import index_paths, open_store, retrieve  # noqa: E402
from edgewise.tokens.tokenizers import get_tokenizer  # noqa: E402

from ..conftest import ROOT  # noqa: E402
from ..servers import free_port, lance_rest, start, stop  # noqa: E402

DOCS = ROOT / "examples" / "docs"
EDGEWISE = [sys.executable, "-m", "edgewise"]
SENATOR = "How old must a senator be?"


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*EDGEWISE, *args], capture_output=True, text=True, timeout=300, cwd=cwd)


@pytest.fixture()
def docs(tmp_path) -> Path:
    folder = tmp_path / "docs"
    shutil.copytree(DOCS, folder)
    return folder


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    store = tmp_path_factory.mktemp("store") / "index"
    report = index_paths([DOCS], store)
    assert (len(report.added), report.failed) == (4, [])
    return store


def test_indexing_the_bundled_documents_stores_every_chunk_with_where_it_came_from(built):
    store = open_store(built)
    sources = store.sources()
    assert sorted(Path(s).name for s in sources) == sorted(p.name for p in DOCS.iterdir())
    rows = store.get([h.row.id for h in retrieve(store, "freedom of speech", top_n=50, mode="bm25")])
    assert rows, "BM25 finds the First Amendment"
    tok = get_tokenizer("cl100k_base")
    from edgewise.index.readers import read_document

    for r in rows:
        doc = read_document(r.source)
        assert doc.text[r.start:r.end] == r.text and r.tokens == tok.count(r.text) <= 256
        assert r.title == doc.title and r.page == doc.page_at(r.start)
        assert sources[r.source] == r.sha256


def test_hybrid_retrieval_finds_the_senate_clause_first(built):
    store = open_store(built)
    for mode in ("hybrid", "dense", "bm25"):
        hits = retrieve(store, SENATOR, top_n=3, mode=mode)
        assert "thirty Years" in hits[0].row.text, mode
        assert hits[0].row.page == 2 and hits[0].row.source.endswith("constitution.pdf")
    hybrid = retrieve(store, SENATOR, top_n=8)
    assert len(hybrid) == store.count() == 8  # all 8 chunks: the dense ranking holds every one
    assert [h.score for h in hybrid] == sorted((h.score for h in hybrid), reverse=True)
    chunk = hybrid[0].chunk()
    assert chunk["meta"]["source"].endswith("constitution.pdf") and chunk["meta"]["page"] == 2
    assert chunk["meta"]["dense_rank"] == 0 and chunk["meta"]["bm25_rank"] == 0


def test_reindexing_is_incremental(docs, tmp_path):
    store = tmp_path / "store"
    first = index_paths([docs], store)
    n = first.total_chunks
    again = index_paths([docs], store)
    assert (again.added, again.updated, len(again.unchanged), again.chunks, again.total_chunks) == ([], [], 4, 0, n)
    speech = docs / "gettysburg-address.txt"
    speech.write_text(speech.read_text() + "\nA line added later, about the harbour lighthouse.\n")
    (docs / "bill-of-rights.md").unlink()
    third = index_paths([docs], store)
    assert third.updated == [str(speech)]
    assert third.removed == [str(docs / "bill-of-rights.md")]
    db = open_store(store)
    assert not any("bill-of-rights" in s for s in db.sources())
    assert [h.row.source for h in retrieve(db, "harbour lighthouse", top_n=1, mode="bm25")] == [str(speech)]
    assert all("Amendment" not in h.row.text for h in retrieve(db, "Amendment", top_n=20, mode="bm25"))


def test_bad_files_are_reported_and_the_rest_is_indexed(docs, tmp_path):
    (docs / "scan.pdf").write_bytes(b"%PDF-1.7\n\x00\x01 not really a pdf")
    (docs / "photo.txt").write_bytes(b"\xff\xd8\xff\xe0\x00\x10JFIF\x00")
    (docs / "empty").mkdir()
    r = cli("index", str(docs), str(docs / "empty"), "--store", str(tmp_path / "s"), "--quiet")
    assert r.returncode == 1, r.stderr
    lines = [line for line in r.stderr.splitlines() if line.startswith("edgewise:")]
    assert lines == [
        f"edgewise: skipped {docs / 'empty'}: no .htm/.html/.markdown/.md/.pdf/.txt files in this folder",
        f"edgewise: skipped {docs / 'photo.txt'}: a text file must not hold NUL bytes; this looks like a binary file",
        f"edgewise: skipped {docs / 'scan.pdf'}: not a readable PDF (PdfStreamError: Stream has ended unexpectedly)",
    ]
    assert sorted(Path(s).name for s in open_store(tmp_path / "s").sources()) == sorted(p.name for p in DOCS.iterdir())


def test_an_empty_folder_alone_is_a_one_line_error(tmp_path):
    (tmp_path / "nothing").mkdir()
    r = cli("index", str(tmp_path / "nothing"), "--store", str(tmp_path / "s"), "--quiet")
    assert r.returncode == 2
    assert r.stderr.splitlines()[-1] == "edgewise: error: nothing to index: every path failed (1); see the lines above"


def test_a_store_from_another_format_or_other_settings_is_refused(docs, tmp_path):
    store = tmp_path / "s"
    index_paths([docs / "gettysburg-address.txt"], store)
    with pytest.raises(ConfigError) as err:
        index_paths([docs], store, chunk_tokens=128)
    assert str(err.value) == (f"store {store} was built with chunk_tokens 256 (asked: 128); use the same settings, "
                              "or --rebuild to re-index everything with the new ones")
    rebuilt = index_paths([docs], store, chunk_tokens=128, rebuild=True)
    assert len(rebuilt.added) == 4
    import lancedb

    db = lancedb.connect(str(store))
    db.drop_table("settings")
    db.create_table("settings", data=[{"json": json.dumps({"format": 0, "tokenizer": "cl100k_base", "chunk_tokens": 128,
                                                           "overlap_tokens": 32, "embed_model": "old"})}])
    r = cli("retrieve", SENATOR, "--store", str(store))
    assert r.returncode == 2
    assert r.stderr.strip() == (f"edgewise: error: store {store} was written in index format 0, but this edgewise reads "
                                "format 1: re-index it with --rebuild")
    r = cli("retrieve", SENATOR, "--store", str(tmp_path / "nowhere"))
    assert r.returncode == 2
    assert r.stderr.strip() == (f"edgewise: error: store {str(tmp_path / 'nowhere')!r} holds no edgewise index; make one "
                                f"with: edgewise index PATH --store {tmp_path / 'nowhere'}")
    with pytest.raises(InputError, match="is a file"):
        open_store(docs / "gettysburg-address.txt")


def test_retrieve_prints_the_packed_prompt_with_the_pack_options(built):
    r = cli("retrieve", SENATOR, "--store", str(built), "--budget", "500", "--format", "json", "--top-n", "5")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    debug = out["debug_info"]
    assert debug["budget"] == 500 and debug["prompt_tokens"] == get_tokenizer("cl100k_base").count(out["prompt"]) <= 500
    assert len(debug["chunks"]) == 5 and {c["outcome"] for c in debug["chunks"]} <= {"placed", "truncated", "dropped"}
    assert debug["order"][0] == debug["chunks"][0]["id"]  # the best hit sits first (edges)
    assert "thirty Years" in out["prompt"]
    assert debug["pruned"], "ask and retrieve prune by default (edgewise.cli.index.ASK_DEFAULTS)"


def test_retrieve_says_on_stderr_when_hits_are_left_out_of_the_prompt(built):
    r = cli("retrieve", SENATOR, "--store", str(built), "--budget", "200", "--top-n", "5")
    assert r.returncode == 0, r.stderr
    assert "<doc " not in r.stdout  # the fixed layers leave no room for a hit
    assert r.stderr == ("edgewise: 5 of 5 chunks left out of the prompt (budget 200 tokens): "
                        "--table or --format json gives each reason\n")


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    """A real S3-compatible server (moto) on 127.0.0.1, with one bucket."""
    pytest.importorskip("moto", reason="needs moto[server] (dev extra)")
    import httpx

    port = free_port()
    log = tmp_path_factory.mktemp("moto") / "moto.log"
    proc = start([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                 f"http://127.0.0.1:{port}/moto-api/", log)
    url = f"http://127.0.0.1:{port}"
    assert httpx.put(f"{url}/edgewise-test").status_code == 200
    yield url
    stop(proc)


def test_the_same_code_indexes_into_object_storage(s3, docs, monkeypatch):
    for k, v in {"AWS_ENDPOINT_URL": s3, "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
                 "AWS_REGION": "us-east-1"}.items():
        monkeypatch.setenv(k, v)
    url = "s3://edgewise-test/store"
    assert len(index_paths([docs], url).added) == 4
    assert len(index_paths([docs], url).unchanged) == 4
    hits = retrieve(open_store(url), SENATOR, top_n=2)
    assert "thirty Years" in hits[0].row.text


def test_the_same_code_indexes_through_a_lance_rest_server(docs, tmp_path):
    pytest.importorskip("lance", reason="needs pylance (dev extra) for the Lance REST server")
    with lance_rest(tmp_path) as url:
        r = cli("index", str(docs), "--store", url, "--quiet", "--format", "json")
        assert r.returncode == 0, r.stderr
        assert len(json.loads(r.stdout)["added"]) == 4
        assert len(index_paths([docs], url).unchanged) == 4
        hits = retrieve(open_store(url), SENATOR, top_n=2)
        assert "thirty Years" in hits[0].row.text
        assert (tmp_path / "lance-root" / "chunks.lance").is_dir()  # the data lives where the server runs


def test_past_the_threshold_a_vector_index_is_built_once_and_search_still_finds(docs, tmp_path, monkeypatch):
    import edgewise.index.lance as lance_store

    monkeypatch.setattr(lance_store, "ANN_ROWS", 4)
    store = tmp_path / "s"
    index_paths([docs], store)
    db = open_store(store)
    kinds = sorted(i.index_type for i in db._chunks.list_indices())
    assert kinds == ["FTS", "IvfHnswSq"]
    assert "thirty Years" in retrieve(db, SENATOR, top_n=1, mode="dense")[0].row.text
    (docs / "gettysburg-address.txt").write_text("A changed speech about lighthouses and harbours.\n")
    index_paths([docs], store)
    after = open_store(store)
    (vector,) = [i for i in after._chunks.list_indices() if i.index_type == "IvfHnswSq"]
    assert (vector.name, vector.num_unindexed_rows) == ("vector_idx", 0)  # the new rows folded into the one index
    assert [h.row.source for h in retrieve(after, "lighthouses harbours", top_n=1, mode="dense")] == [
        str(docs / "gettysburg-address.txt")]
