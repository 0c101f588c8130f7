"""``edgewise serve`` as a real server: a subprocess on 127.0.0.1, called over HTTP with httpx.

Every endpoint's reply is compared whole with what the library (or the CLI command it mirrors)
gives for the same input; the limits, auth, CORS, the assets directory, the access log, the
metrics and two workers are each checked against a running server. Every server is started on a
free port, waited for on /healthz (bounded), and stopped in its fixture's finaliser.
"""

from __future__ import annotations

import json
import os
import select
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")
pytest.importorskip("prometheus_client")

import edgewise  # noqa: E402
from edgewise.registry import describe  # noqa: E402

from ..conftest import ROOT  # noqa: E402
from ..servers import free_port, running  # noqa: E402

KEY = "test-key-0123456789"
AUTH = {"Authorization": f"Bearer {KEY}"}
QUERY = "Which city is the capital of France?"
CHUNKS = [
    {"id": "a", "text": "Paris is the capital of France. It lies on the Seine.", "score": 0.9, "title": "Paris"},
    {"id": "b", "text": "Lyon is known for its food. It is in France.", "score": 0.4},
    {"id": "c", "text": "France is in Europe. Its capital is Paris.", "score": 0.7},
    {"id": "d", "text": "Bananas are yellow. Monkeys like them.", "score": 0.1},
]
PLUGIN = '''
def swap_ends(n, ctx):
    """Order: the best chunk last, the rest in rank order."""
    return list(range(1, n)) + [0] if n else []
'''


@pytest.fixture(scope="module")
def assets(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("assets")
    (root / "t.j2").write_text("Q: {{ query }}\n{% for c in chunks %}[{{ c.id }}] {{ c.text }}\n{% endfor %}")
    (root / "profile.json").write_text("[0.9, 0.5, 0.8]")
    outside = tmp_path_factory.mktemp("outside") / "secret.j2"
    outside.write_text("secret {{ query }}")
    (root / "link.j2").symlink_to(outside)
    return root


@pytest.fixture(scope="module")
def plugin_path(tmp_path_factory) -> Path:
    """A distribution on PYTHONPATH with an ``edgewise.orders`` entry point (no pip needed)."""
    root = tmp_path_factory.mktemp("plugin")
    (root / "serve_test_plugin.py").write_text(PLUGIN)
    info = root / "serve_test_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: serve-test-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[edgewise.orders]\nswap-ends = serve_test_plugin:swap_ends\n")
    return root


@pytest.fixture(scope="module")
def main(tmp_path_factory, assets, plugin_path) -> Iterator[dict]:
    """API key, assets, a plugin, and small limits."""
    args = ["--assets", str(assets), "--max-chunks", "50", "--max-chars", "20000", "--max-body-bytes", "65536",
            "--timeout", "20"]
    env = {"EDGEWISE_API_KEY": KEY, "PYTHONPATH": os.pathsep.join([str(plugin_path), str(ROOT / "src")])}
    with running(args, tmp_path_factory.mktemp("main"), env) as server:
        with httpx.Client(base_url=server["url"], headers=AUTH, timeout=30) as client:
            server["client"] = client
            yield server


@pytest.fixture(scope="module")
def tight(tmp_path_factory) -> Iterator[dict]:
    """No assets, no key, a short timeout, big limits, CORS for one origin, bodies logged."""
    args = ["--timeout", "0.5", "--max-chunks", "50000", "--cors-origin", "https://app.example", "--log-bodies"]
    with running(args, tmp_path_factory.mktemp("tight")) as server:
        with httpx.Client(base_url=server["url"], timeout=30) as client:
            server["client"] = client
            yield server


def _json(obj):  # what the JSON round trip makes of a value (tuples become lists)
    return json.loads(json.dumps(obj))


def _plain_schema(value):
    if isinstance(value, dict):
        return {k: _plain_schema(v) for k, v in value.items() if not (k == "default" and v is None)}
    if isinstance(value, list):
        return [_plain_schema(v) for v in value]
    return float(value) if isinstance(value, int) and not isinstance(value, bool) else value


def _cli(args: list[str], cwd: Path, stdin: str) -> object:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    out = subprocess.run([sys.executable, "-m", "edgewise", *args], input=stdin, capture_output=True, text=True,
                         cwd=cwd, env=env, timeout=120, check=True)
    return json.loads(out.stdout)


def _error(r: httpx.Response) -> tuple[int, dict]:
    return r.status_code, r.json()


# -- every endpoint, whole results ---------------------------------------------------------------

def test_pack_equals_the_library_and_the_cli(main, tmp_path):
    options = {"budget": 220, "order": "edges", "layout": "sections", "top_k": 3}
    r = main["client"].post("/v1/pack", json={"query": QUERY, "chunks": CHUNKS, "options": options})
    assert r.status_code == 200
    assert r.headers["content-type"] == "application/json"
    assert r.json() == _json(edgewise.pack(QUERY, CHUNKS, options).to_dict())
    cli = _cli(["pack", "-q", QUERY, "-c", "-", "--format", "json", "-b", "220", "-o", "edges", "-l", "sections",
                "--top-k", "3"], tmp_path, json.dumps(CHUNKS))
    assert r.json() == cli


def test_pack_anthropic_messages_and_a_plugin_order(main):
    body = {"query": QUERY, "chunks": CHUNKS, "options": {"order": "swap-ends", "layout": "paper"},
            "messages_format": "anthropic"}
    r = main["client"].post("/v1/pack", json=body)
    assert r.status_code == 200
    assert r.json()["debug_info"]["order"] == ["c", "b", "d", "a"]  # rank order a, c, b, d; the best moved last
    assert r.json()["messages"] == {"messages": [{"role": "user", "content": r.json()["prompt"]}]}


def test_variants_equals_the_library(main):
    body = {"query": QUERY, "chunks": CHUNKS, "key_id": "d", "positions": ["first", "last", 1],
            "options": {"tokenizer": "words"}}
    r = main["client"].post("/v1/variants", json=body)
    assert r.status_code == 200
    expected = edgewise.variants(QUERY, CHUNKS, "d", ["first", "last", 1], tokenizer="words")
    assert r.json() == _json({name: p.to_dict() for name, p in expected.items()})
    assert [r.json()[k]["debug_info"]["order"].index("d") for k in ("first", "last", "1")] == [0, 3, 1]


def test_score_prune_highlight_equal_the_cli(main, tmp_path):
    chunks = json.dumps(CHUNKS)
    client = main["client"]
    r = client.post("/v1/score", json={"query": QUERY, "chunks": CHUNKS, "scorer": "bm25", "sort": True})
    assert r.status_code == 200
    assert r.json() == _cli(["score", "-q", QUERY, "-c", "-", "--scorer", "bm25", "--sort"], tmp_path, chunks)
    assert [c["rank"] for c in r.json()] == [1, 2, 3, 4]
    r = client.post("/v1/prune", json={"query": QUERY, "chunks": CHUNKS, "threshold": 0.3, "scorer": "lexical"})
    assert r.status_code == 200
    assert r.json() == _cli(["prune", "-q", QUERY, "-c", "-", "--threshold", "0.3", "--scorer", "lexical"], tmp_path,
                            chunks)
    r = client.post("/v1/highlight", json={"query": QUERY, "chunks": CHUNKS, "scorer": "lexical"})
    assert r.status_code == 200
    assert r.json() == _cli(["highlight", "-q", QUERY, "-c", "-", "--scorer", "lexical", "--format", "json"],
                            tmp_path, chunks)
    r = client.post("/v1/highlight", json={"query": QUERY, "text": CHUNKS[0]["text"], "scorer": "lexical"})
    spans = edgewise.highlight(QUERY, CHUNKS[0]["text"], scorer="lexical")
    assert r.json() == [{"id": "text", "spans": [s.to_dict() for s in spans]}]


def test_tokens_count_and_truncate(main):
    text = "The quick brown fox jumps over the lazy dog. " * 5
    tok = edgewise.get_tokenizer("o200k_base")
    r = main["client"].post("/v1/tokens", json={"text": text, "tokenizer": "o200k_base", "max_tokens": 7})
    assert r.json() == {"tokenizer": "o200k_base", "estimated": False, "tokens": tok.count(text),
                        "truncated": tok.truncate(text, 7), "truncated_tokens": 7}
    r = main["client"].post("/v1/tokens", json={"text": "a b c"})
    assert r.json() == {"tokenizer": "cl100k_base", "estimated": False, "tokens": 3}


def test_capabilities_list_the_registries_with_plugins(main):
    r = main["client"].get("/v1/capabilities")
    assert r.status_code == 200
    caps = r.json()
    here = describe(("tokenizers", "orders", "layouts", "scorers"))
    for kind in ("tokenizers", "layouts", "scorers"):
        assert caps[kind] == [{"name": n, "source": s} for n, s in here[kind]]
    assert caps["orders"] == [{"name": n, "source": s} for n, s in here["orders"]] + [
        {"name": "swap-ends", "source": "serve-test-plugin"}]
    assert caps["prune_scorers"] == ["auto", "dense", "dense2", "lexical"]
    assert caps["limits"] == {"max_body_bytes": 65536, "max_chunks": 50, "max_chars": 20000, "timeout_s": 20.0,
                              "threads": 8, "queue": 32, "max_asset_bytes": 1024 * 1024, "max_model_texts": 5000}
    assert (caps["assets"], caps["auth"], caps["proxy"], caps["version"]) == (True, True, False, edgewise.__version__)
    from edgewise.catalog import model_names

    assert caps["models"] == list(model_names())


def test_probes_and_openapi(main):
    assert httpx.get(f"{main['url']}/healthz").json() == {"status": "ok"}
    r = httpx.get(f"{main['url']}/readyz")
    # a server counts on quicktok (the fast extra) from its first request: it switched at start
    assert (r.status_code, r.json()) == (200, {"status": "ready", "preload": {}, "counter": "quicktok"})
    schema = httpx.get(f"{main['url']}/openapi.json").json()
    options = schema["components"]["schemas"]["PackRequest"]["properties"]["options"]
    expected = edgewise.PackOptions.json_schema()
    expected.pop("$schema")
    for name in ("summary_backend", "summary_model", "summary_base_url", "summary_api", "summary_cache"):
        del expected["properties"][name]  # a request may not set them
    expected["properties"]["summaries"]["enum"].remove("llm")
    # every other option as PackOptions describes it; the OpenAPI generator writes 1 as 1.0 and leaves out "default": null
    assert _plain_schema(options) == _plain_schema({**expected, "default": {}})
    assert "edgewise" in httpx.get(f"{main['url']}/docs").text


# -- errors: always JSON, never a 500 -------------------------------------------------------------

@pytest.mark.parametrize("body, status, error", [
    (b'{"query": "q", "chunks": [', 400, {"type": "edgewise_invalid_json",
                                          "message": "the body must be valid JSON, but Expecting value at offset 26"}),
    (b'{"query": "q", "chunks": [], "options": {"budget": NaN}}', 400,
     {"type": "edgewise_invalid_json", "message": "the body must be valid JSON, but NaN is not a JSON value at offset 51"}),
    (b'{"query": 3, "chunks": []}', 422,
     {"type": "edgewise_invalid_request", "message": "query: Input should be a valid string, but got 3"}),
    (b'{"query": "q", "chunks": {}}', 422,
     {"type": "edgewise_invalid_request", "message": "chunks: Input should be a valid list, but got {}"}),
    (b'{"query": "q", "chunks": [], "colour": 1}', 422,
     {"type": "edgewise_invalid_request", "message": "colour: Extra inputs are not permitted, but got 1"}),
    (b'{"chunks": []}', 422, {"type": "edgewise_invalid_request", "message": "query: Field required"}),
    (b'{"query": "q", "chunks": [], "options": {"top_k": 0}}', 422,
     {"type": "edgewise_invalid_input", "message": "top_k must be > 0, but got 0"}),
    (b'{"query": "q", "chunks": [], "options": {"budget": "9"}}', 422,
     {"type": "edgewise_invalid_input", "message": "budget must be an integer > 0, but got '9'"}),
    (b'{"query": "q", "chunks": [], "options": {"order": "nope"}}', 422,
     {"type": "edgewise_config_error", "message": "unknown order 'nope'; choose one of: " + ", ".join(
         [n for n, _ in describe(("orders",))["orders"]] + ["swap-ends"])}),
    (b'{"query": "q", "chunks": [{"txt": "x"}]}', 422,
     {"type": "edgewise_invalid_input", "message": "chunk #0 must have a 'text' field, but it has ['txt']"}),
    (b'{"query": "q", "chunks": ["x"], "options": {"budget": 5}}', 422,
     {"type": "edgewise_budget_error", "message": "budget must hold the fixed layers: the fixed layers (system, instructions, profile, question) need 195 "
      "tokens, but budget is 5"}),
    (b"[" * 20000 + b"]" * 20000, 400, {"type": "edgewise_bad_request", "message": "There was an error parsing the body"}),
])
def test_bad_input_is_a_json_4xx(main, body, status, error):
    r = main["client"].post("/v1/pack", content=body, headers={"content-type": "application/json"})
    assert _error(r) == (status, {"error": error})


def test_unknown_option_names_the_valid_ones(main):
    r = main["client"].post("/v1/pack", json={"query": "q", "chunks": [], "options": {"colour": "red"}})
    names = ", ".join(edgewise.PackOptions.names())
    assert _error(r) == (422, {"error": {"type": "edgewise_config_error",
                                         "message": f"unknown pack option 'colour'; choose from: {names}"}})


def test_unknown_route_and_method(main):
    assert _error(main["client"].get("/v1/nope")) == (404, {"error": {"type": "edgewise_not_found", "message": "Not Found"}})
    assert _error(main["client"].get("/v1/pack")) == (
        405, {"error": {"type": "edgewise_method_not_allowed", "message": "Method Not Allowed"}})


# -- auth and CORS --------------------------------------------------------------------------------

def test_api_key_is_required_and_compared(main):
    url = main["url"]
    body = {"query": QUERY, "chunks": CHUNKS}
    r = httpx.post(f"{url}/v1/pack", json=body)
    assert _error(r) == (401, {"error": {"type": "edgewise_unauthorized",
                                         "message": "this server needs an API key: send 'Authorization: Bearer <key>'"}})
    assert r.headers["www-authenticate"] == 'Bearer realm="edgewise"'
    r = httpx.post(f"{url}/v1/pack", json=body, headers={"Authorization": "Bearer wrong"})
    assert _error(r) == (401, {"error": {"type": "edgewise_unauthorized", "message": "the API key is wrong"}})
    r = httpx.post(f"{url}/v1/pack", json=body, headers={"Authorization": KEY})
    assert _error(r) == (401, {"error": {"type": "edgewise_unauthorized",
                                         "message": "the Authorization header must be 'Bearer <key>'"}})
    assert httpx.get(f"{url}/metrics").status_code == 401
    assert httpx.get(f"{url}/healthz").status_code == 200  # the probes need no key
    assert httpx.post(f"{url}/v1/pack", json=body, headers=AUTH).status_code == 200


def test_cors_is_off_by_default_and_on_for_the_given_origin(main, tight):
    pre = {"Origin": "https://app.example", "Access-Control-Request-Method": "POST",
           "Access-Control-Request-Headers": "content-type"}
    r = httpx.options(f"{main['url']}/v1/pack", headers=pre)
    assert "access-control-allow-origin" not in r.headers
    r = main["client"].post("/v1/tokens", json={"text": "x"}, headers={"Origin": "https://app.example"})
    assert r.status_code == 200 and "access-control-allow-origin" not in r.headers
    r = httpx.options(f"{tight['url']}/v1/pack", headers=pre)
    assert (r.status_code, r.headers["access-control-allow-origin"]) == (200, "https://app.example")
    r = httpx.post(f"{tight['url']}/v1/tokens", json={"text": "x"}, headers={"Origin": "https://app.example"})
    assert r.headers["access-control-allow-origin"] == "https://app.example"
    r = httpx.post(f"{tight['url']}/v1/tokens", json={"text": "x"}, headers={"Origin": "https://evil.example"})
    assert "access-control-allow-origin" not in r.headers


# -- the assets directory -------------------------------------------------------------------------

def test_a_template_inside_the_assets_is_served_like_the_cli(main, assets):
    body = {"query": QUERY, "chunks": CHUNKS, "options": {"layout": "template:t.j2", "order": "calibrated:profile.json"}}
    r = main["client"].post("/v1/pack", json=body)
    assert r.status_code == 200
    cli = _cli(["pack", "-q", QUERY, "-c", "-", "--format", "json", "-l", "template:t.j2", "-o",
                "calibrated:profile.json"], assets, json.dumps(CHUNKS))
    assert r.json() == cli  # the same prompt, the files named as the client named them
    assert r.json()["debug_info"]["layout"] == "template:t.j2"


@pytest.mark.parametrize("option, spec, why", [
    ("layout", "template:../../etc/passwd", "names a file outside the assets directory"),
    ("layout", "template:/etc/passwd", "names an absolute path; name files relative to the assets directory"),
    ("layout", "template:link.j2", "names a file outside the assets directory"),
    ("order", "calibrated:../outside/x.json", "names a file outside the assets directory"),
    ("tokenizer", "hf:/etc/passwd", "names an absolute path; name files relative to the assets directory"),
    ("scorer", "cross:../../", "names a file outside the assets directory"),
    ("scorer", "dense:~/model.onnx", "names an absolute path; name files relative to the assets directory"),
])
def test_paths_outside_the_assets_are_refused(main, option, spec, why):
    r = main["client"].post("/v1/pack", json={"query": QUERY, "chunks": CHUNKS, "options": {option: spec}})
    noun = {"layout": "layout", "order": "order", "tokenizer": "tokenizer", "scorer": "scorer"}[option]
    assert _error(r) == (403, {"error": {"type": "edgewise_forbidden_path", "message": f"{noun} {spec!r} {why}"}})


def test_other_endpoints_refuse_paths_too(main, tight):
    r = main["client"].post("/v1/score", json={"query": QUERY, "chunks": CHUNKS, "scorer": "cross:/etc"})
    assert _error(r)[0] == 403
    r = main["client"].post("/v1/tokens", json={"text": "x", "tokenizer": "hf:../../etc/passwd"})
    assert _error(r) == (403, {"error": {"type": "edgewise_forbidden_path", "message":
                                         "tokenizer 'hf:../../etc/passwd' names a file outside the assets directory"}})
    r = main["client"].post("/v1/pack", json={"query": QUERY, "chunks": CHUNKS, "options": {"layout": "template:no.j2"}})
    assert _error(r) == (422, {"error": {"type": "edgewise_config_error",
                                         "message": "template file 'no.j2' could not be read: No such file or directory"}})
    r = tight["client"].post("/v1/pack", json={"query": QUERY, "chunks": CHUNKS, "options": {"layout": "template:t.j2"}})
    assert _error(r) == (403, {"error": {"type": "edgewise_forbidden_path", "message":
                                         "layout 'template:t.j2' reads a file, and this server reads none: "
                                         "start it with --assets DIR to allow files from DIR"}})


# -- limits ---------------------------------------------------------------------------------------

def test_too_many_chunks_and_too_much_text(main):
    r = main["client"].post("/v1/pack", json={"query": "q", "chunks": ["x"] * 51})
    assert _error(r) == (422, {"error": {"type": "edgewise_too_many_chunks",
                                         "message": "a request may carry at most 50 chunks (--max-chunks), but got 51"}})
    r = main["client"].post("/v1/prune", json={"query": "qq", "chunks": [{"text": "y" * 19990, "title": "abcdefghij"}]})
    assert _error(r) == (422, {"error": {"type": "edgewise_too_much_text", "message":
                                         "a request may carry at most 20000 characters of text (--max-chars), "
                                         "but got 20002"}})


def _raw(port: int, head: bytes) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=20)
    s.sendall(head)
    return s


def _status(s: socket.socket) -> tuple[int, dict]:
    data = b""
    while b"\r\n\r\n" not in data or not data.rstrip().endswith(b"}"):
        piece = s.recv(65536)
        if not piece:
            break
        data += piece
    head, _, body = data.partition(b"\r\n\r\n")
    if b"transfer-encoding: chunked" in head.lower():
        body = body.split(b"\r\n", 1)[1].rsplit(b"\r\n0", 1)[0].strip()
    return int(head.split()[1]), json.loads(body)


def test_a_declared_large_body_is_refused_before_it_is_sent(main):
    s = _raw(main["port"], b"POST /v1/pack HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                           b"Content-Length: 1000000\r\n" + f"Authorization: Bearer {KEY}\r\n\r\n".encode())
    with s:
        assert _status(s) == (413, {"error": {"type": "edgewise_body_too_large", "message":
                                              "the request body may be at most 65536 bytes (--max-body-bytes), "
                                              "but got 1000000"}})


def test_a_streamed_body_is_refused_while_it_arrives(main):
    """Chunked, with no length: the server answers 413 once 64 KiB have come, long before the
    client has sent its 32 MiB (it is never held whole)."""
    total, piece = 32 * 1024 * 1024, b"x" * 8192
    s = _raw(main["port"], b"POST /v1/pack HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                           b"Transfer-Encoding: chunked\r\n" + f"Authorization: Bearer {KEY}\r\n\r\n".encode())
    sent = 0
    with s:
        try:
            while sent < total and not select.select([s], [], [], 0)[0]:
                s.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
                sent += len(piece)
                if sent % (256 * 1024) == 0:
                    time.sleep(0.01)  # a slow client, too
        except (BrokenPipeError, ConnectionResetError):
            pass
        status, body = _status(s)
    assert (status, body["error"]["type"]) == (413, "edgewise_body_too_large")
    assert body["error"]["message"].startswith("the request body may be at most 65536 bytes (--max-body-bytes), "
                                               "but got more (")
    assert sent < total


def test_a_slow_body_within_the_limits_is_served(main):
    payload = json.dumps({"query": QUERY, "chunks": CHUNKS}).encode()
    parts = [payload[i : i + 40] for i in range(0, len(payload), 40)]

    def slowly():
        for p in parts:
            time.sleep(0.02)
            yield p

    r = main["client"].post("/v1/pack", content=slowly(), headers={"content-type": "application/json"})
    assert r.json() == _json(edgewise.pack(QUERY, CHUNKS).to_dict())


def test_a_body_slower_than_the_timeout_is_a_408(tight):
    payload = json.dumps({"query": QUERY, "chunks": CHUNKS}).encode()
    s = _raw(tight["port"], b"POST /v1/pack HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                            + f"Content-Length: {len(payload)}\r\n\r\n".encode() + payload[:20])
    with s:
        assert _status(s) == (408, {"error": {"type": "edgewise_request_timeout", "message":
                                              "the request body did not arrive within 0.5 s (--timeout); 20 bytes came"}})


def test_work_past_the_timeout_is_a_504(tight):
    chunks = [f"Sentence {i} about the river. Another one about mountain {i}." for i in range(20000)]
    r = tight["client"].post("/v1/prune", json={"query": "river", "chunks": chunks, "scorer": "lexical"})
    assert _error(r) == (504, {"error": {"type": "edgewise_timeout", "message": "the request took longer than 0.5 s (--timeout)"}})
    assert tight["client"].get("/healthz").json() == {"status": "ok"}  # the loop was never blocked


# -- logs and metrics -----------------------------------------------------------------------------

def _log_lines(server: dict, path: str) -> list[dict]:
    out = []
    for line in server["log"].read_text().splitlines():
        if line.startswith("{"):
            rec = json.loads(line)
            if rec["path"] == path:
                out.append(rec)
    return out


def test_access_log_is_one_json_line_per_request_without_the_body(main):
    chunks = [{"id": str(i), "text": f"passage {i} " * 40, "score": 1 / (i + 1)} for i in range(8)]
    r = main["client"].post("/v1/pack?probe=log", json={"query": "passage", "chunks": chunks, "options": {"budget": 300}})
    dropped = len(r.json()["debug_info"]["dropped"])
    assert dropped > 0
    time.sleep(0.2)
    (rec,) = [x for x in _log_lines(main, "/v1/pack") if x["chunks_in"] == 8]
    assert set(rec) == {"ts", "method", "path", "status", "duration_ms", "chunks_in", "dropped", "client", "pid"}
    assert {k: rec[k] for k in ("method", "path", "status", "chunks_in", "dropped", "client")} == {
        "method": "POST", "path": "/v1/pack", "status": 200, "chunks_in": 8, "dropped": dropped, "client": "127.0.0.1"}
    assert "passage 0" not in main["log"].read_text()


def test_log_bodies_puts_the_body_in_the_log(tight):
    body = {"text": "a body worth logging"}
    assert tight["client"].post("/v1/tokens", json=body).status_code == 200
    time.sleep(0.2)
    recs = [x for x in _log_lines(tight, "/v1/tokens") if "worth" in x.get("body", "")]
    assert [json.loads(x["body"]) for x in recs] == [body]


def _samples(text: str) -> dict[tuple, float]:
    from prometheus_client.parser import text_string_to_metric_families

    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_metrics_count_requests_latency_tokens_and_chunks(main):
    before = _samples(main["client"].get("/metrics").text)
    chunks = [{"id": str(i), "text": f"passage {i} " * 40, "score": 1 / (i + 1)} for i in range(6)]
    results = [main["client"].post("/v1/pack", json={"query": "passage", "chunks": chunks, "options": {"budget": b}})
               for b in (250, 400)]
    main["client"].post("/v1/pack", json={"query": "passage", "chunks": chunks, "options": {"budget": 0}})
    after = _samples(main["client"].get("/metrics").text)

    def delta(name, **labels):
        key = (name, tuple(sorted(labels.items())))
        return after.get(key, 0) - before.get(key, 0)

    route = {"route": "/v1/pack"}
    assert delta("edgewise_requests_total", method="POST", status="200", **route) == 2
    assert delta("edgewise_requests_total", method="POST", status="422", **route) == 1
    assert delta("edgewise_request_duration_seconds_count", **route) == 3
    assert delta("edgewise_request_duration_seconds_bucket", le="+Inf", **route) == 3
    assert delta("edgewise_prompt_tokens_total") == sum(r.json()["debug_info"]["prompt_tokens"] for r in results)
    assert delta("edgewise_chunks_total", outcome="in") == 18
    assert delta("edgewise_chunks_total", outcome="dropped") == sum(len(r.json()["debug_info"]["dropped"])
                                                                    for r in results)
    assert delta("edgewise_input_characters_total") == 3 * (len("passage") + sum(len(c["text"]) + len(c["id"])
                                                                                 for c in chunks))


# -- scale-out ------------------------------------------------------------------------------------

@pytest.mark.slow  # a server of its own, or a wait for a timeout: seconds
def test_two_workers_serve_the_same_results(tmp_path):
    body = {"query": QUERY, "chunks": CHUNKS, "options": {"budget": 220}}
    expected = _json(edgewise.pack(QUERY, CHUNKS, budget=220).to_dict())
    env = {"PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "metrics")}
    (tmp_path / "metrics").mkdir()
    with running(["--workers", "2"], tmp_path, env) as server:
        pids, n = set(), 0
        while len(pids) < 2 and n < 200:  # a new connection each time, until both workers answered
            with httpx.Client(base_url=server["url"], timeout=30) as client:
                r = client.post("/v1/pack", json=body)
                assert r.json() == expected
                n += 1
            time.sleep(0.05)
            pids = {rec["pid"] for rec in _log_lines(server, "/v1/pack")}
        assert len(pids) == 2
        metrics = _samples(httpx.get(f"{server['url']}/metrics", timeout=30).text)
        assert metrics[("edgewise_requests_total", (("method", "POST"), ("route", "/v1/pack"), ("status", "200")))] == n


# -- models ---------------------------------------------------------------------------------------

@pytest.mark.models
def test_preloaded_dense_model_is_ready_and_used(tmp_path):
    pytest.importorskip("onnxruntime")
    with running(["--preload", "dense"], tmp_path, wait_s=120) as server:
        deadline = time.monotonic() + 120
        while (r := httpx.get(f"{server['url']}/readyz")).status_code != 200 and time.monotonic() < deadline:
            assert r.json() == {"status": "loading", "preload": {"dense": "loading"}, "counter": "quicktok"}
            time.sleep(0.5)
        assert (r.status_code, r.json()) == (200, {"status": "ready", "preload": {"dense": "ready"}, "counter": "quicktok"})
        plain = [{"id": c["id"], "text": c["text"]} for c in CHUNKS]
        options = {"scorer": "dense", "prune": 0.2, "prune_scorer": "dense", "budget": 400}
        r = httpx.post(f"{server['url']}/v1/pack", json={"query": QUERY, "chunks": plain, "options": options}, timeout=60)
        assert r.json() == _json(edgewise.pack(QUERY, plain, options).to_dict())
        r = httpx.post(f"{server['url']}/v1/score", json={"query": QUERY, "chunks": plain, "scorer": "dense"}, timeout=60)
        from edgewise.score.ranking import score_chunks

        assert [c["score"] for c in r.json()] == score_chunks(QUERY, edgewise.normalize(plain)[0], "dense")


def test_a_bad_preload_stops_the_start(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "edgewise.serve", "--port", str(free_port()), "--preload", "nope"],
                          capture_output=True, text=True, timeout=60, env={**os.environ, "EDGEWISE_API_KEY": ""})
    assert proc.returncode != 0
    assert "unknown scorer 'nope'" in proc.stderr


@pytest.mark.parametrize("options", [
    {"summaries": "llm"}, {"summary_cache": "/tmp/anywhere"}, {"summary_model": "/etc/passwd"},
    {"summaries": "auto", "summary_base_url": "http://10.0.0.1/v1"}, {"summary_backend": "openai"},
])
def test_a_request_cannot_ask_for_llm_summaries_or_name_their_model_cache_or_endpoint(main, options):
    """A request may not load a model file, write a directory or call a URL through the summary options."""
    body = {"query": "capital of france", "chunks": ["Paris is the capital."], "options": options}
    for path in ("/v1/pack", "/v1/chat/completions"):
        if path == "/v1/pack":
            r = main["client"].post(path, json=body)
        else:
            r = main["client"].post(path, json={"model": "m", "messages": [{"role": "user", "content": "q"}],
                                                "edgewise": {"documents": ["Paris."], "options": options}})
            if r.status_code == 404:  # no upstream configured: the proxy is not mounted
                continue
        assert r.status_code == 422, (path, r.text)  # an input error, as every other bad option
        assert "LLM-written summaries are not served over HTTP" in r.text
    assert not Path("/tmp/anywhere").exists()
