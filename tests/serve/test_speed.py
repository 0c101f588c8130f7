"""The request path of ``edgewise serve``: no first-request cost, and orjson only where it reads and
writes what Python's json does.

The warm-up is checked by work, not time: the Python calls a request makes are counted (a profile
function on every thread the app starts), and the first request to each endpoint must make no
more than a later one of the same shape; the modules loaded must not change. Before the warm-up,
FastAPI built each route's validation state on its first request (tens of thousands of calls).
"""

from __future__ import annotations

import json
import math
import statistics
import sys
import threading
import time

import pytest

pytest.importorskip("fastapi")
httpx = pytest.importorskip("httpx")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from edgewise.jsonin import bodies  # noqa: E402
from edgewise.serve.api import codec  # noqa: E402
from edgewise.serve.transport.limits import count_chars  # noqa: E402

from ..conftest import ROOT  # noqa: E402
from ..servers import running  # noqa: E402


def _bodies(path: str, k: int) -> dict:
    """Request ``k`` to ``path``: the same shape every time, texts never sent before."""
    chunks = [{"id": f"c{i}", "text": f"Passage {k}-{i} says the river {k * 7 + i} runs north of town {i}.",
               "score": 1.0 - i / 10} for i in range(8)]
    query = f"Which river runs north of town {k}?"
    return {"/v1/pack": {"query": query, "chunks": chunks, "options": {"budget": 330}},
            "/v1/variants": {"query": query, "chunks": chunks, "key_id": "c1"},
            "/v1/score": {"query": query, "chunks": chunks},
            "/v1/prune": {"query": query, "chunks": chunks, "scorer": "lexical"},
            "/v1/highlight": {"query": query, "text": chunks[0]["text"], "scorer": "lexical"},
            "/v1/tokens": {"text": chunks[0]["text"] * 3, "max_tokens": 5}}[path]


PATHS = ("/v1/pack", "/v1/variants", "/v1/score", "/v1/prune", "/v1/highlight", "/v1/tokens")


def test_the_first_request_to_each_endpoint_does_the_work_of_a_later_one():
    from fastapi.testclient import TestClient

    from edgewise.serve.app import create_app
    from edgewise.serve.config import ServeConfig

    counting, calls = [False], [0]

    def profile(frame, event, arg):
        if counting[0] and event == "call":
            calls[0] += 1

    counts: dict[str, list[int]] = {p: [] for p in PATHS}
    imported: dict[str, list[str]] = {}
    threading.setprofile(profile)  # every thread started from here on: the client's portal, the worker pool
    try:
        with TestClient(create_app(ServeConfig(api_key=None))) as client:
            for k in range(4):
                for path in PATHS:
                    before = set(sys.modules)
                    calls[0], counting[0] = 0, True
                    r = client.post(path, json=_bodies(path, k))
                    counting[0] = False
                    assert r.status_code == 200, (path, r.text)
                    counts[path].append(calls[0])
                    if k == 0:
                        imported[path] = sorted(set(sys.modules) - before)
    finally:
        threading.setprofile(None)
    assert imported == {p: [] for p in PATHS}
    later = {p: statistics.median(c[1:]) for p, c in counts.items()}
    assert {p: c[0] <= 1.25 * later[p] + 50 for p, c in counts.items()} == {p: True for p in PATHS}, (counts, later)


@pytest.mark.slow  # a server of its own, or a wait for a timeout: seconds
def test_the_warm_up_runs_before_the_server_listens_and_is_neither_logged_nor_counted(tmp_path):
    body = _bodies("/v1/pack", 0)
    with running([], tmp_path) as server:
        url = server["url"]
        log = server["log"].read_text()
        assert "warm-up: 12 requests through the app in" in log, log[-2000:]
        assert "warm-up " not in log.replace("warm-up: 11", ""), log[-2000:]  # no call failed or answered otherwise
        metrics = httpx.get(f"{url}/metrics").text  # counted once its reply is sent: not in itself
        counted = [line for line in metrics.splitlines() if line.startswith("edgewise_requests_total{")]
        assert [line for line in counted if "/healthz" not in line] == []  # running() polled /healthz
        assert httpx.post(f"{url}/v1/pack", json=body).status_code == 200
        metrics = httpx.get(f"{url}/metrics").text
        packs = [line for line in metrics.splitlines() if line.startswith("edgewise_requests_total{")
                 and "/v1/pack" in line]
        assert packs == ['edgewise_requests_total{method="POST",route="/v1/pack",status="200"} 1.0']
        deadline = time.monotonic() + 10  # a request's line is written once its reply has gone
        while True:
            access = [(a["method"], a["path"], a["status"]) for a in map(json.loads, (
                line for line in server["log"].read_text().splitlines() if line.startswith('{"ts"')))
                if a["path"] != "/healthz"]
            if len(access) >= 3 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert access == [
            ("GET", "/metrics", 200), ("POST", "/v1/pack", 200), ("GET", "/metrics", 200)]


# -- the JSON codec ---------------------------------------------------------------------------------

def _typed(value):
    """``value`` with every number tagged by its type: 1 and 1.0 (or an int and a float) differ."""
    if isinstance(value, dict):
        return {k: _typed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_typed(v) for v in value]
    if isinstance(value, float) and math.isnan(value):
        return ("nan",)
    return (type(value).__name__, value)


_NUMBERS = st.one_of(st.integers(), st.integers(min_value=-(2 ** 70), max_value=2 ** 70),
                     st.sampled_from([2 ** 63 - 1, 2 ** 63, 2 ** 64 - 1, 2 ** 64, -(2 ** 63), -(2 ** 63) - 1]),
                     st.floats(allow_nan=False, allow_infinity=False), st.sampled_from([1e-05, 1e16, 1e19, -0.0]))
_LEAVES = st.one_of(st.none(), st.booleans(), _NUMBERS, st.text(max_size=12))
_VALUES = st.recursive(_LEAVES, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                         st.dictionaries(st.text(max_size=6), inner, max_size=4)),
                       max_leaves=25)
_BODIES = st.fixed_dictionaries({}, optional={"query": _VALUES, "chunks": _VALUES, "text": _VALUES,
                                              "options": _VALUES, "key_id": _VALUES, "threshold": _NUMBERS})


@settings(max_examples=400, deadline=None)
@given(_BODIES)
def test_a_body_orjson_reads_has_the_values_and_characters_pythons_json_gives(value):
    body = json.dumps(value).encode()
    fast = bodies.read(body)
    if fast is None:  # read by Python's json instead: only for a float that may have been a large integer
        assert bodies.available() is False or any(
            isinstance(x, (int, float)) and not isinstance(x, bool) and abs(x) >= 2 ** 63 for x in _numbers(value))
        return
    got, chars = fast
    assert _typed(got) == _typed(json.loads(body))
    assert chars == count_chars([value.get(name) for name in bodies.TEXT_FIELDS])


def _numbers(value):
    if isinstance(value, dict):
        for v in value.values():
            yield from _numbers(v)
    elif isinstance(value, list):
        for v in value:
            yield from _numbers(v)
    elif isinstance(value, (int, float)):
        yield value


@settings(max_examples=400, deadline=None)
@given(_VALUES)
def test_a_reply_written_fast_reads_back_as_the_same_values(value):
    written = codec.write(value, fast=True)
    assert _typed(json.loads(written)) == _typed(value)
    assert _typed(json.loads(codec.write(value, fast=False))) == _typed(value)


def test_integers_past_64_bits_keep_their_value_through_the_server(tmp_path):
    """orjson reads -9223372036854775809 as a float: that body must be read by Python's json."""
    meta = {"big": 2 ** 64, "negative": -(2 ** 63) - 1, "small": 1e-05, "name": "café"}
    chunks = [{"id": "a", "text": "Paris is the capital of France.", "score": 1.0, "meta": meta}]
    with running([], tmp_path) as server:
        url = server["url"]
        r = httpx.post(f"{url}/v1/pack", json={"query": "capital?", "chunks": chunks, "options": {"budget": 200}})
        assert r.status_code == 200, r.text
        import edgewise

        assert _typed(r.json()) == _typed(json.loads(json.dumps(edgewise.pack("capital?", chunks, budget=200)
                                                                 .to_dict())))
        bad = httpx.post(f"{url}/v1/pack", json={"query": "q", "chunks": ["a"],
                                                 "options": {"budget": -9223372036854775809}})
        assert (bad.status_code, bad.json()["error"]["message"]) == (
            422, "budget must be > 0, but got -9223372036854775809")


# -- the benchmarks, tiny (structure only, never timings) -------------------------------------------

def _bench(name: str):
    import importlib.util

    root = ROOT
    spec = importlib.util.spec_from_file_location(f"bench_{name}", root / "benchmarks" / f"{name}.py")
    bench = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = bench
    spec.loader.exec_module(bench)
    return bench, str(root / "tests" / "data")


@pytest.mark.slow
@pytest.mark.parametrize(("name", "head"), [
    ("serve_overhead", "| chunks | pack ms | pack+json ms | pack+orjson ms | server ms | server / pack | "
                       "server / pack+json | server / pack+orjson |"),
    ("serve_first", "| server | chunks | starts | first ms | after-idle ms | others ms | first / others | "
                    "after-idle / others | first / after-idle | worst first / after-idle |"),
])
def test_serve_benchmarks_tiny_run(capsys, name, head):
    bench, data = _bench(name)
    assert bench.main(["--tiny", "--data", data]) == 0
    lines = capsys.readouterr().out.splitlines()
    table = [line for line in lines if line.startswith("| ")]
    assert table[0] == head
    assert [row.split(" | ")[0 if name == "serve_overhead" else 1].strip("| ") for row in table[1:]] == ["20"]
