"""``edgewise serve --store`` and ``POST /v1/retrieve``, for real: a store the ``edgewise index`` CLI
builds from the bundled documents, a server subprocess on 127.0.0.1 that opens it, and its hits
compared whole with what the library's :func:`edgewise.index.retrieve` (what ``edgewise retrieve``
packs) gives for the same question. A server without a store answers 404, a store that cannot be
opened stops the start with one line, bad input is a 422 naming the rule and the value, and the
inspector page's retrieve row shows the hits (in Chromium; slow).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.models  # indexing and the hybrid mode embed with the bundled MiniLM
httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")
pytest.importorskip("lancedb", reason="needs the index extra: pip install -e '.[index]'")
pytest.importorskip("onnxruntime", reason="needs the models extra")

from edgewise.index import open_store, retrieve  # noqa: E402

from ..browser import chromium, wait_for  # noqa: E402
from ..conftest import ROOT  # noqa: E402
from ..servers import free_port, running  # noqa: E402

KEY = "store-key-0123456789"
AUTH = {"Authorization": f"Bearer {KEY}"}
DOCS = ROOT / "examples" / "docs"
SENATOR = "How old must a senator be?"


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    where = tmp_path_factory.mktemp("store") / "index"
    done = subprocess.run([sys.executable, "-m", "edgewise", "index", str(DOCS), "--store", str(where), "--quiet"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return where


@pytest.fixture(scope="module")
def server(store, tmp_path_factory) -> Iterator[dict]:
    tmp = tmp_path_factory.mktemp("serve-store")
    with running(["--store", str(store), "--max-chunks", "50", "--max-chars", "100000"], tmp,
                 {"EDGEWISE_API_KEY": KEY}, wait_s=120) as srv:
        with httpx.Client(base_url=srv["url"], headers=AUTH, timeout=120) as client:
            srv["client"] = client
            yield srv


def hits(store: Path, question: str, **kw) -> list[dict]:
    """What ``edgewise retrieve`` packs for ``question``: the library's hits, as chunks."""
    return [h.chunk() for h in retrieve(open_store(store), question, **kw)]


def test_retrieve_answers_the_hits_edgewise_retrieve_packs(server, store):
    client = server["client"]
    for mode in ("hybrid", "dense", "bm25"):
        r = client.post("/v1/retrieve", json={"question": SENATOR, "top_n": 3, "mode": mode})
        assert (r.status_code, r.json()) == (200, {"chunks": hits(store, SENATOR, top_n=3, mode=mode)}), mode
    r = client.post("/v1/retrieve", json={"question": "freedom of speech"})  # edgewise retrieve's defaults
    assert r.json() == {"chunks": hits(store, "freedom of speech")}
    assert len(r.json()["chunks"]) == 8  # top_n 20 of a store of 8 chunks
    assert client.get("/v1/capabilities").json()["store"] is True
    assert httpx.post(f"{server['url']}/v1/retrieve", json={"question": SENATOR}).status_code == 401  # behind the key
    packed = client.post("/v1/pack", json={"query": SENATOR, "chunks": r.json()["chunks"]})
    assert packed.status_code == 200  # the hits go to /v1/pack as they are


@pytest.mark.parametrize("body, message", [
    ({"question": SENATOR, "top_n": 0}, "top_n must be > 0, but got 0"),
    ({"question": SENATOR, "top_n": "3"}, "top_n must be an integer > 0, but got '3'"),
    ({"question": SENATOR, "top_n": True}, "top_n must be an integer > 0, but got True"),
    ({"question": SENATOR, "top_n": 51}, "top_n must be <= 50 (--max-chunks), but got 51"),
    ({"question": SENATOR, "mode": "fuzzy"}, "mode must be one of hybrid, dense, bm25, but got 'fuzzy'"),
    ({"question": "  "}, "question must be a non-empty string, but got '  '"),
    ({"question": "x" * 100001}, "a request may carry at most 100000 characters of text (--max-chars), but got 100001"),
    ({"question": SENATOR, "top": 3}, "top: Extra inputs are not permitted, but got 3"),
])
def test_bad_input_is_a_422_naming_the_rule_and_the_value(server, body, message):
    r = server["client"].post("/v1/retrieve", json=body)
    assert (r.status_code, r.json()["error"]["message"]) == (422, message)


def test_without_a_store_the_endpoint_is_a_404_naming_the_flag():
    from fastapi.testclient import TestClient

    from edgewise.serve.app import create_app
    from edgewise.serve.config import ServeConfig

    with TestClient(create_app(ServeConfig(api_key=None))) as client:
        r = client.post("/v1/retrieve", json={"question": SENATOR})
        assert client.get("/v1/capabilities").json()["store"] is False
    assert (r.status_code, r.json()) == (404, {"error": {"type": "edgewise_not_found", "message": (
        "this server has no store: start it with edgewise serve --store DIR (a store edgewise index wrote)")}})


def test_a_store_that_cannot_be_opened_stops_the_start_with_one_line(tmp_path):
    missing = tmp_path / "nowhere"
    proc = subprocess.run([sys.executable, "-m", "edgewise.serve", "--port", str(free_port()), "--store", str(missing)],
                          capture_output=True, text=True, timeout=60, env={**os.environ, "EDGEWISE_API_KEY": ""})
    assert (proc.returncode, proc.stderr) == (2, f"edgewise: error: --store {missing}: store {str(missing)!r} holds no "
                                                 f"edgewise index; make one with: edgewise index PATH --store {missing}\n")


@pytest.mark.slow
def test_the_inspector_retrieves_from_the_store_and_packs_the_hits(server, store, tmp_path):
    with chromium(tmp_path) as page:
        page.get(f"{server['url']}/ui")
        page.find_element("id", "api-key").send_keys(KEY)
        wait_for(page, lambda p: p["state"] == "idle", "the capabilities read with the key")
        assert page.find_element("id", "retrieve-row").is_displayed()
        page.find_element("id", "query").send_keys(SENATOR)
        top_n = page.find_element("id", "top-n")
        top_n.clear()
        top_n.send_keys("5")
        page.find_element("id", "retrieve").click()
        shown = wait_for(page, lambda p: p["state"] == "ready" and p["rows"], "the hits packed", timeout=60)
    assert [row[1] for row in shown["rows"]] == [c["id"] for c in hits(store, SENATOR, top_n=5)]
