"""What the proxy reads and what it holds: a body it cannot read is a 400 and never forwarded, the
``edgewise`` field never reaches the upstream, and replies are relayed in pieces with bounded memory.

The upstream is the loopback fake of ``tests/proxy_upstream.py``; edgewise is a real ``edgewise
serve`` process; its memory is read from ``/proc``. Nothing is timed.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edgewise.serve.errors import ApiError
from edgewise.serve.proxy.readbody import read_json, refuse_field

from ..proxy_upstream import BLOCK, FakeOpenAI, big_chat_chunks, blob_chunks, rss_mb, start_proxy
from ..servers import stop

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")

DOCS = {"documents": [{"id": "p", "text": "Paris is the capital of France."}], "context_window": 4096,
        "tokenizer": "cl100k_base"}
CHAT = {"model": "echo", "max_tokens": 16, "messages": [{"role": "user", "content": "What is the capital of France?"}]}
BIG = "1" * 5000  # more digits than Python's int() reads (4300 by default)
MB = 1024 * 1024


# -- the rules, no server --------------------------------------------------------------------------

@pytest.mark.parametrize(("raw", "message"), [
    # the numbers edgewise reads itself, its field's: finite, and integers that int() reads
    (b'{"edgewise": {"budget": ' + BIG.encode() + b"}}",
     "integers in the body may have at most 4300 digits (Python's int_max_str_digits), but edgewise.budget has 5000"),
    (b'{"edgewise": {"documents": [{"text": "a", "score": 1e999}]}}',
     "numbers in the body must be finite JSON numbers, but edgewise.documents[0].score is 1e999, beyond a double "
     "(±1.8e308)"),
    (b'{"t": NaN}', "numbers in the body must be finite JSON numbers, but got NaN"),
    (b'{"t": -Infinity}', "numbers in the body must be finite JSON numbers, but got -Infinity"),
    (b'{"messages": [{"content": "a\\ud800b"}]}',
     "strings in the body must be valid Unicode, but messages[0].content holds a lone surrogate (U+D800) at character 1"),
    (b'{"\\udfff": 1}', "strings in the body must be valid Unicode, but a key of the body holds a lone surrogate "
                        "(U+DFFF) at character 0"),
    (b'{"t": "caf\xe9"}', "the body must be UTF-8 JSON, but byte 10 (0xe9) is not UTF-8"),
    (b'{"t": ', "the body must be valid JSON, but Expecting value at offset 6"),
    (b"[" * 100_000, "the body must be JSON nested less deeply: it is too deep to read"),
])
def test_a_body_that_cannot_be_read_is_refused_with_its_rule(raw, message):
    with pytest.raises(ApiError) as info:
        read_json(raw)
    assert (info.value.status_code, info.value.type, info.value.message) == (400, "invalid_json", message)


def test_a_surrogate_pair_escape_is_one_valid_character():
    assert read_json(b'{"t": "\\ud83d\\ude00 \\u00e9"}') == {"t": "\U0001F600 \u00e9"}


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4), max_leaves=20)


@settings(max_examples=200, deadline=None)
@given(json_values, st.booleans())
def test_every_valid_body_reads_as_json_does(value, ascii_only):
    raw = json.dumps(value, ensure_ascii=ascii_only).encode()
    assert read_json(raw) == json.loads(raw)


@settings(max_examples=100, deadline=None)
@given(st.text(), st.integers(0xD800, 0xDFFF), st.text())
def test_any_lone_surrogate_is_refused(before, code, after):
    raw = json.dumps({"input": before + chr(code) + after}).encode()  # ensure_ascii: the surrogate as an escape
    with pytest.raises(ApiError) as info:  # st.text() has no surrogates: this one is lone
        read_json(raw)
    assert (info.value.status_code, info.value.message) == (400, (
        f"strings in the body must be valid Unicode, but input holds a lone surrogate (U+{code:04X}) "
        f"at character {len(before)}"))


def test_the_field_on_a_forwarded_path_is_refused():
    with pytest.raises(ApiError) as info:
        refuse_field(json.dumps({"model": "m", "input": "x", "edgewise": DOCS}).encode(), "POST", "/v1/embeddings")
    assert (info.value.status_code, info.value.message) == (422, (
        "the 'edgewise' field is read on POST /v1/chat/completions, POST /v1/responses and POST /v1/messages only, "
        "but this request is POST /v1/embeddings, which the proxy forwards unchanged: remove the field"))
    refuse_field(b'{"input": "edgewise is a library"}', "POST", "/v1/embeddings")  # a mention is not the field
    refuse_field(b"not json, and no such word", "POST", "/v1/embeddings")  # nothing to find: the upstream judges
    with pytest.raises(ApiError, match="valid JSON"):  # may carry it, cannot be read: refused, not forwarded
        refuse_field(b'{"edgewise": [1, }', "POST", "/v1/embeddings")
    with pytest.raises(ApiError, match="read on POST /v1/chat/completions"):  # spelled with escapes
        refuse_field(b'{"\\u0065dgewise": {}}', "POST", "/v1/completions")


# -- against a real server ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def upstream():
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture(scope="module")
def proxy(upstream, tmp_path_factory):
    proc, base = start_proxy(tmp_path_factory.mktemp("proxy"), upstream.url, "--upstream-timeout", "60")
    yield proc, base
    stop(proc)


def post(base: str, path: str, raw: bytes) -> httpx.Response:
    return httpx.post(base + path, content=raw, headers={"content-type": "application/json"}, timeout=30)



@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/responses", "/v1/embeddings"])
def test_a_5000_digit_number_in_the_field_is_a_400_and_nothing_reaches_the_upstream(proxy, upstream, path):
    body = {**CHAT, "input": "What is the capital of France?", "edgewise": {**DOCS, "budget": 0}}
    n = len(upstream.seen)
    r = post(proxy[1], path, json.dumps(body).replace('"budget": 0', f'"budget": {BIG}').encode())
    assert (r.status_code, r.json()) == (400, {"error": {"type": "edgewise_invalid_json", "message":
            "integers in the body may have at most 4300 digits (Python's int_max_str_digits), but edgewise.budget "
            "has 5000"}})
    assert r.headers["x-edgewise-error"] == "1"
    assert len(upstream.seen) == n


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/responses"])
def test_a_lone_surrogate_is_a_400_on_the_packed_routes(proxy, upstream, path):
    body = {**CHAT, "input": "What is the capital of France?", "edgewise": {**DOCS, "documents": ["Paris \ud800"]}}
    n = len(upstream.seen)
    r = post(proxy[1], path, json.dumps(body).encode())
    assert (r.status_code, r.json()["error"]) == (400, {"type": "edgewise_invalid_json", "message":
            "strings in the body must be valid Unicode, but edgewise.documents[0] holds a lone surrogate (U+D800) "
            "at character 6"})
    assert len(upstream.seen) == n


def test_the_field_never_reaches_the_upstream_on_a_forwarded_path(proxy, upstream):
    n = len(upstream.seen)
    r = post(proxy[1], "/v1/completions", json.dumps({"model": "m", "prompt": "hi", "edgewise": DOCS}).encode())
    assert r.status_code == 422 and r.json()["error"]["message"].startswith("the 'edgewise' field is read on POST")
    assert len(upstream.seen) == n


def test_a_packed_request_forwards_no_field(proxy, upstream):
    r = post(proxy[1], "/v1/chat/completions", json.dumps({**CHAT, "edgewise": DOCS}).encode())
    assert r.status_code == 200, r.text
    assert "edgewise" not in json.loads(upstream.seen[-1][3])


def read_all(base: str, method: str, path: str, body: dict | None, out: list) -> None:
    digest, n = hashlib.sha256(), 0
    with httpx.stream(method, base + path, json=body, timeout=120) as r:
        for piece in r.iter_raw():
            digest.update(piece)
            n += len(piece)
    out.append((r.status_code, n, digest.hexdigest()))


def expected(chunks) -> tuple[int, int, str]:
    digest, n = hashlib.sha256(), 0
    for piece in chunks:
        digest.update(piece)
        n += len(piece)
    return 200, n, digest.hexdigest()


def peak_growth(pid: int, work) -> float:
    """MB the process's resident memory grew by, at its highest while ``work`` runs (sampled every 20 ms)."""
    before = rss_mb(pid)
    peak, done = [before], threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak.append(rss_mb(pid))
            time.sleep(0.02)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        work()
    finally:
        done.set()
        sampler.join()
    return max(peak) - before


@pytest.mark.slow
@pytest.mark.parametrize(("method", "path", "body", "chunks"), [
    ("POST", "/v1/chat/completions", {**CHAT, "model": f"big-{100 * MB}"}, big_chat_chunks(100 * MB)),
    ("POST", "/v1/chat/completions", {**CHAT, "model": f"big-{100 * MB}", "edgewise": DOCS}, big_chat_chunks(100 * MB)),
    ("GET", f"/v1/blobs/{100 * MB}", None, blob_chunks(100 * MB)),
], ids=["chat", "chat-packed", "forwarded"])
def test_four_100_mb_replies_at_once_are_relayed_whole_in_bounded_memory(proxy, method, path, body, chunks):
    proc, base = proxy
    read_all(base, "GET", "/v1/models", None, [])  # warm: the connection pool, the first request's imports
    want = expected(chunks)
    got: list = []

    def four() -> None:
        threads = [threading.Thread(target=read_all, args=(base, method, path, body, got)) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(180)

    growth = peak_growth(proc.pid, four)
    assert got == [want] * 4  # every byte, in order, for each of the four
    assert growth < 100, f"the proxy grew by {growth:.0f} MB relaying 4 x 100 MB"


def test_a_debug_reply_too_large_to_rewrite_is_relayed_as_sent_and_says_so(proxy):
    size = 9 * MB  # past MAX_REWRITE_BYTES (8 MiB)
    got: list = []
    body = {**CHAT, "model": f"big-{size}", "edgewise": {**DOCS, "debug": True}}
    with httpx.stream("POST", proxy[1] + "/v1/chat/completions", json=body, timeout=60) as r:
        header = r.headers["x-edgewise-debug-body"]
        content = r.read()
        got.append((r.status_code, len(content), hashlib.sha256(content).hexdigest()))
        assert "x-edgewise-debug" in r.headers  # the summary still rides in its header
    assert header == "omitted: the reply is over 8388608 bytes"
    assert got == [expected(big_chat_chunks(size))]
    small = post(proxy[1], "/v1/chat/completions", json.dumps({**CHAT, "edgewise": {**DOCS, "debug": True}}).encode())
    assert small.json()["edgewise"]["pack"]["placed"] == ["p"] and "x-edgewise-debug-body" not in small.headers


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_an_upload_is_streamed_through_as_sent(proxy, upstream, chunked):
    size = 3 * MB + 17
    data = (BLOCK * (size // len(BLOCK) + 1))[:size]
    content = (data[i:i + 100_000] for i in range(0, size, 100_000)) if chunked else data
    r = httpx.put(proxy[1] + "/v1/uploads?part=1", content=content, timeout=60,
                  headers={"content-type": "application/octet-stream"})
    assert r.json() == {"bytes": size, "sha256": hashlib.sha256(data).hexdigest(), "chunked": chunked}
    method, path, headers, _ = upstream.seen[-1]
    assert (method, path, headers["content-type"]) == ("PUT", "/v1/uploads?part=1", "application/octet-stream")
