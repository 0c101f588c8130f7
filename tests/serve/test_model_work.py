"""Model work in ``edgewise serve``: bounded before it starts, stopped at its deadline, kept apart.

Two 20,000-chunk dense rescores used to lock a ``--threads 2 --timeout 2`` server out for minutes:
both got their 504, but their threads ran on (137 s of MiniLM each), so every small request after
them got a 504 too. Now a request's model texts are estimated before it starts (refused over
``--max-model-texts``), model work runs in a lane of its own (small requests never wait for it),
and the model loops check the request's deadline between batches (the work stops, the CPU is
free). The server tests run a real server; those that run MiniLM are marked ``models``.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")

from edgewise.score import deadline  # noqa: E402
from edgewise.serve.api.cost import Cost, estimate  # noqa: E402
from edgewise.serve.api.schemas import (  # noqa: E402
    HighlightRequest,
    PackRequest,
    PruneRequest,
    ScoreRequest,
    TokensRequest,
    VariantsRequest,
)
from edgewise.serve.proxy.routes import proxy_cost  # noqa: E402

from ..conftest import ROOT  # noqa: E402
from ..servers import running  # noqa: E402

TINY = {"query": "capital of France?", "chunks": ["Paris is the capital.", "Lyon is a city."]}


def serve(tmp: Path, *args: str) -> Iterator[dict]:
    return running(list(args), tmp, env={"PYTHONPATH": str(ROOT / "src")}, wait_s=90)


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of the process, every thread of it."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def passages(n: int) -> list[str]:
    return [f"Passage {i} talks about rivers and mountains number {i}. It has two sentences." for i in range(n)]


# -- the estimate ---------------------------------------------------------------------------------

def test_the_estimate_counts_the_texts_a_model_would_read():
    chunks = ["One. Two. Three.", "One sentence.", "A. B!\nC? D"]  # 3, 1 and 4 sentences
    pack = lambda **options: estimate(PackRequest(query="q", chunks=chunks, options=options)).texts  # noqa: E731
    assert pack() == 0  # the given order: no model
    assert pack(scorer="bm25", rescore=True) == pack(scorer="static") == pack(prune=0.3, prune_scorer="lexical") == 0
    assert pack(scorer="dense") == pack(scorer="cross:any/path") == pack(scorer="hybrid:0.1") == 4  # chunks + query
    assert pack(prune=0.3) == pack(prune=0.3, prune_scorer="dense") == 9  # sentences + query
    assert pack(prune=0.3, prune_scorer="dense2") == 17  # two texts a sentence
    assert pack(prune=0.3, summaries="auto") == 18  # two passes
    assert pack(prune=0.3, top_k=1) == 5  # the chunk with the most sentences
    assert pack(scorer="dense", prune=0.3) == 13
    assert pack(order="auto") == 0 and pack(order="auto", model="gpt-4o") == 9  # a model's profile may prune
    scored = [{"text": "a", "score": 1.0}, {"text": "b", "score": 0.5}]
    assert estimate(PackRequest(query="q", chunks=scored, options={"scorer": "dense"})).texts == 0  # scores given
    assert estimate(PackRequest(query="q", chunks=scored, options={"scorer": "dense", "rescore": True})).texts == 3
    assert estimate(PackRequest(query="q", chunks=chunks, options={"order": "edges"}), order="auto").texts == 0
    assert estimate(PackRequest(query="q", chunks=chunks, options={"model": "m"}), order="auto").texts == 9
    assert estimate(VariantsRequest(query="q", chunks=chunks, key_id="chunk-0", positions=list(range(50)),
                                    options={"scorer": "dense"})).texts == 4  # each position packs the same texts
    assert estimate(ScoreRequest(query="q", chunks=chunks, scorer="dense")).texts == 4
    assert estimate(ScoreRequest(query="q", chunks=chunks)).texts == 0  # bm25
    assert estimate(PruneRequest(query="q", chunks=chunks)).texts == 9
    assert estimate(PruneRequest(query="q", chunks=chunks, scorer="lexical")).texts == 0
    assert estimate(HighlightRequest(query="q", text="One. Two.")).texts == 3
    assert estimate(TokensRequest(text="x" * 1000)).texts == 0
    # what the work will refuse anyway counts nothing (its own message comes from the work)
    assert pack(scorer=7, prune="high", prune_scorer=["dense"]) == 0
    assert estimate(PackRequest(query="q", chunks=chunks, options={"scorer": "dense", "prune": 0.3})) == Cost(
        13, ("4 to score the chunks with dense", "9 for the sentence model (prune)"))


def test_a_proxied_request_costs_what_packing_its_documents_would():
    docs = ["One. Two. Three.", "One sentence."]
    chat = lambda **field: {"model": "gpt-4o", "messages": [{"role": "user", "content": "q"}],  # noqa: E731
                            "edgewise": {"documents": docs, **field}}
    assert proxy_cost(chat()).texts == 0  # the given order: no model
    assert proxy_cost(chat(scorer="dense")) == Cost(3, ("3 to score the chunks with dense",))
    assert proxy_cost(chat(prune=0.3)).texts == 5
    assert proxy_cost(chat(), order="auto").texts == 5  # the request's model: its profile may prune
    marked = {"model": "m", "messages": [{"role": "user", "name": "edgewise_documents", "content": '["A. B."]'},
                                         {"role": "user", "content": "q"}]}
    assert proxy_cost(marked, order="auto").texts == 3
    assert proxy_cost({"model": "m", "messages": []}) == proxy_cost({"edgewise": 7}) == Cost()  # nothing to pack


# -- refused before any work ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def limited(tmp_path_factory) -> Iterator[dict]:
    # the upstream is a closed loopback port: a proxied request refused by cost never reaches it
    with serve(tmp_path_factory.mktemp("limited"), "--max-model-texts", "100", "--timeout", "20",
               "--upstream", "http://127.0.0.1:9/v1") as server:
        with httpx.Client(base_url=server["url"], timeout=30) as client:
            server["client"] = client
            yield server


def test_a_request_over_the_cost_limit_is_refused_before_any_work_starts(limited):
    """``cross:missing`` would be a 403 (no --assets) once the work resolved it: the refusal came first."""
    client = limited["client"]
    body = {"query": "rivers", "chunks": passages(150), "options": {"scorer": "cross:missing", "rescore": True}}
    start = cpu_seconds(limited["pid"])
    r = client.post("/v1/pack", json=body)
    assert (r.status_code, r.headers["x-edgewise-error"], r.json()) == (422, "1", {"error": {
        "type": "edgewise_too_costly",
        "message": "this request would send about 151 texts through a model (151 to score the chunks with "
                   "cross:missing), but the server takes at most 100 a request (--max-model-texts)"}})
    assert cpu_seconds(limited["pid"]) - start < 1.0  # nothing was tokenized or embedded
    r = client.post("/v1/prune", json={"query": "rivers", "chunks": passages(60)})  # 2 sentences each
    assert (r.status_code, r.json()["error"]["message"]) == (422, (
        "this request would send about 121 texts through a model (121 for the sentence model (prune)), but the "
        "server takes at most 100 a request (--max-model-texts)"))
    r = client.post("/v1/variants", json={"query": "rivers", "chunks": passages(120), "key_id": "chunk-0",
                                          "options": {"scorer": "dense", "rescore": True}})
    assert r.json()["error"]["type"] == "edgewise_too_costly"
    # under the limit, or no model at all: served (cross:missing now reaches the work and its 403)
    assert client.post("/v1/pack", json={**body, "chunks": passages(99)}).status_code == 403
    assert client.post("/v1/prune", json={"query": "rivers", "chunks": passages(600), "scorer": "lexical"}).status_code == 200
    assert client.post("/v1/pack", json={"query": "rivers", "chunks": passages(2000)}).status_code == 200
    assert client.get("/v1/capabilities").json()["limits"]["max_model_texts"] == 100
    # the proxy: the same limit, before packing and before the upstream is called
    chat = {"model": "gpt-4o", "messages": [{"role": "user", "content": "rivers?"}],
            "edgewise": {"documents": passages(150), "scorer": "cross:missing", "rescore": True}}
    r = client.post("/v1/chat/completions", json=chat)
    assert (r.status_code, r.json()["error"]["type"]) == (422, "edgewise_too_costly")


def test_the_limit_is_a_flag_checked_at_start(tmp_path):
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "edgewise.serve", "--max-model-texts", "0"], capture_output=True,
                          text=True, timeout=60, env={**os.environ, "EDGEWISE_API_KEY": "",
                                                      "PYTHONPATH": str(ROOT / "src")})
    assert proc.returncode == 2 and "max_model_texts must be > 0, but got 0" in proc.stderr


# -- stopped at the deadline ----------------------------------------------------------------------

@pytest.mark.models
def test_dense_inference_stops_at_the_deadline_and_caches_nothing_half_done():
    pytest.importorskip("onnxruntime")
    from edgewise.prune.scores import score_sentences_many
    from edgewise.score.dense import DenseScorer

    scorer = DenseScorer()
    scorer.score("warm up", ["warm up"])  # the model loads (and the int8 build is made) outside the deadline
    texts = passages(20_000)
    for work in (lambda: scorer.score("rivers", texts),  # dense: the chunk scorer
                 lambda: score_sentences_many("rivers", [(t, None) for t in texts], scorer="dense")):  # the sentence model
        start = time.monotonic()
        with pytest.raises(deadline.Cancelled), deadline.until(start + 0.3):
            work()
        assert time.monotonic() - start < 2.0  # 20,000 texts take a minute or more on 2 cores
    assert scorer.cache.stats()["size"] == 1  # the warm-up text (query and text alike): nothing of the stopped run
    assert scorer.score("rivers", texts[:3]) == DenseScorer().score("rivers", texts[:3])  # and it still scores


@pytest.mark.models
def test_abandoned_model_work_stops_and_small_requests_are_served_meanwhile(tmp_path):
    """Two heavy dense rescores (20,000 chunks each, minutes of MiniLM) on ``--threads 2 --timeout 2``:
    both get their 504, the work stops within a few seconds of it (the server's CPU time stops
    growing), and 20 small packs sent over the next 15 s are each answered 200 within 1 s."""
    pytest.importorskip("onnxruntime")
    heavy = {"query": "rivers", "chunks": passages(20_000), "options": {"scorer": "dense", "rescore": True}}
    with serve(tmp_path, "--threads", "2", "--timeout", "2", "--max-chunks", "20000", "--max-model-texts", "20001",
               "--preload", "dense") as server:
        url, pid = server["url"], server["pid"]
        until = time.monotonic() + 120
        while httpx.get(f"{url}/readyz").status_code != 200:  # the model loaded: the heavy work is inference
            assert time.monotonic() < until, "the dense model did not load in 120 s"
            time.sleep(0.2)
        replies: list[tuple[int, float]] = []

        def send_heavy() -> None:
            with httpx.Client(timeout=60) as c:
                r = c.post(f"{url}/v1/pack", json=heavy)
                replies.append((r.status_code, time.monotonic()))

        heavies = [threading.Thread(target=send_heavy) for _ in range(2)]
        for t in heavies:
            t.start()
        small: list[tuple[int, float]] = []
        cpu_marks: list[tuple[float, float]] = []
        with httpx.Client(base_url=url, timeout=30) as client:
            for _ in range(20):
                sent = time.monotonic()
                r = client.post("/v1/pack", json=TINY)
                small.append((r.status_code, time.monotonic() - sent))
                cpu_marks.append((time.monotonic(), cpu_seconds(pid)))
                time.sleep(max(0.0, sent + 0.75 - time.monotonic()))
        for t in heavies:
            t.join(60)
        assert [status for status, _ in replies] == [504, 504]
        assert all(status == 200 for status, _ in small), small
        assert max(took for _, took in small) < 1.0, small
        # the work stopped: from 4 s after the last 504 on, only the small packs cost CPU (a few ms each);
        # a heavy request that ran on would add about 1.4 CPU-s a second on 2 cores
        settled = max(at for _, at in replies) + 4
        later = [(at, cpu) for at, cpu in cpu_marks if at >= settled]
        assert len(later) >= 8, "the small packs ended too soon after the 504s to watch the CPU"
        (t0, c0), (t1, c1) = later[0], later[-1]
        assert c1 - c0 < 0.15 * (t1 - t0) + 0.5, (c1 - c0, t1 - t0)
        quiet = cpu_seconds(pid)
        time.sleep(2)
        assert cpu_seconds(pid) - quiet < 0.3
        assert httpx.post(f"{url}/v1/pack", json=TINY).status_code == 200
