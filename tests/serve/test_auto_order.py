"""``order: "auto"`` over HTTP: ``/v1/pack`` with a ``model`` option, and the proxy, where the
request's own ``model`` field names the model whose profile places the documents; with
``edgewise serve --order auto`` a request that names no order is placed so too (no client change).

A real ``edgewise serve --upstream`` process on 127.0.0.1 in front of the loopback fake of
``tests/proxy_upstream.py``, started with ``$EDGEWISE_PROFILES`` naming a directory that holds a
synthetic ``gpt-4o`` profile (``tests/position_profiles.py``); each answer is held to what the
library gives in this process with the same directories.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import edgewise
from edgewise.order import ORDERS
from edgewise.serve.proxy.conversation import prepare

from ..position_profiles import CHUNKS, PLACED_BY_EDGES, PLACED_BY_LAST_BEST, QUERY, placement, write_profile
from ..proxy_upstream import FakeOpenAI, start_proxy
from ..servers import free_port, stop

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")

OPTIONS = {"order": "auto", "layout": "paper"}


@pytest.fixture(scope="module")
def profiles(tmp_path_factory):
    """The environment the server and this process share: a gpt-4o profile, an empty user directory."""
    root = tmp_path_factory.mktemp("profiles")
    path = write_profile(root / "env")
    return {"EDGEWISE_PROFILES": str(root / "env"), "XDG_CONFIG_HOME": str(root / "config")}, path


@pytest.fixture
def same_env(profiles, monkeypatch):
    for name, value in profiles[0].items():
        monkeypatch.setenv(name, value)
    return profiles[1]


@pytest.fixture(scope="module")
def upstream():
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture(scope="module")
def server(upstream, profiles, tmp_path_factory):
    proc, base = start_proxy(tmp_path_factory.mktemp("serve"), upstream.url, env=profiles[0])
    yield base
    stop(proc)


@pytest.fixture(scope="module")
def auto_server(upstream, profiles, tmp_path_factory):
    """The same server started with ``--order auto``: the order of every request that names none."""
    proc, base = start_proxy(tmp_path_factory.mktemp("serve-auto"), upstream.url, "--order", "auto", env=profiles[0])
    yield base
    stop(proc)


def test_pack_endpoint_places_by_the_model_s_profile(server, same_env):
    r = httpx.post(server + "/v1/pack", json={"query": QUERY, "chunks": CHUNKS, "options": {"model": "gpt-4o", **OPTIONS}},
                   timeout=30)
    assert r.status_code == 200, r.text
    got = r.json()
    assert got == edgewise.pack(QUERY, CHUNKS, model="gpt-4o", **OPTIONS).to_dict()
    assert (got["debug_info"]["order"], got["debug_info"]["placement"]) == (
        PLACED_BY_LAST_BEST, placement(same_env, "profile gpt-4o/qa-paper-4"))


def last_body(upstream) -> dict:
    method, path, _, raw = upstream.seen[-1]
    assert method == "POST"
    return json.loads(raw)


def test_proxy_packs_a_chat_completion_by_the_request_s_model(server, upstream, same_env):
    body = {"model": "gpt-4o", "max_tokens": 50, "messages": [{"role": "user", "content": QUERY}],
            "edgewise": {"documents": CHUNKS, **OPTIONS, "debug": True}}
    r = httpx.post(server + "/v1/chat/completions", json=body, timeout=30)
    assert r.status_code == 200, r.text
    budget = int(r.headers["x-edgewise-documents-budget"])
    expected = edgewise.pack(QUERY, CHUNKS, model="gpt-4o", budget=budget, **OPTIONS)
    sent = {"model": "gpt-4o", "max_tokens": 50, "messages": [{"role": "user", "content": expected.prompt}]}
    assert last_body(upstream) == sent
    reply = r.json()
    assert reply["received"] == sent
    assert reply["edgewise"]["pack"] == expected.debug_info.to_dict()
    assert (reply["edgewise"]["pack"]["order"], reply["edgewise"]["pack"]["placement"]) == (
        PLACED_BY_LAST_BEST, placement(same_env, "profile gpt-4o/qa-paper-4"))


def test_proxy_packs_a_response_by_the_request_s_model(server, upstream, same_env):
    body = {"model": "gpt-4o-2024-08-06", "max_output_tokens": 50, "input": QUERY,
            "edgewise": {"documents": CHUNKS, **OPTIONS}}
    r = httpx.post(server + "/v1/responses", json=body, timeout=30)
    assert r.status_code == 200, r.text
    budget = int(r.headers["x-edgewise-documents-budget"])
    expected = edgewise.pack(QUERY, CHUNKS, model="gpt-4o-2024-08-06", budget=budget, **OPTIONS)
    assert expected.debug_info.order == PLACED_BY_LAST_BEST
    assert last_body(upstream) == {"model": "gpt-4o-2024-08-06", "max_output_tokens": 50, "input": expected.prompt}


# -- edgewise serve --order: the order of a request that names none ----------------------------------

SECTIONS_REASON = "profile gpt-4o/qa-paper-4 (measured with layout 'paper'; the model has none for 'sections')"


def _pack(base: str, options: dict) -> dict:
    r = httpx.post(base + "/v1/pack", json={"query": QUERY, "chunks": CHUNKS, "options": options}, timeout=30)
    assert r.status_code == 200, r.text
    return r.json()


def test_an_auto_server_packs_a_request_that_names_only_the_model_by_its_profile(auto_server, same_env):
    got = _pack(auto_server, {"model": "gpt-4o"})
    assert got == edgewise.pack(QUERY, CHUNKS, model="gpt-4o", order="auto").to_dict()
    assert (got["debug_info"]["order"], got["debug_info"]["placement"]) == (
        PLACED_BY_LAST_BEST, placement(same_env, SECTIONS_REASON))


def test_a_request_s_own_order_wins_over_the_server_s(auto_server, same_env):
    got = _pack(auto_server, {"model": "gpt-4o", "order": "edges"})
    assert got == edgewise.pack(QUERY, CHUNKS, model="gpt-4o", order="edges").to_dict()
    assert got["debug_info"]["order"] == PLACED_BY_EDGES
    assert "placement" not in got["debug_info"]  # no auto: no placement record


def test_without_order_the_server_places_a_request_that_names_none_by_edges(server, same_env):
    got = _pack(server, {"model": "gpt-4o"})
    assert got == edgewise.pack(QUERY, CHUNKS, model="gpt-4o").to_dict()
    assert got["debug_info"]["order"] == PLACED_BY_EDGES


def test_an_auto_server_packs_a_chat_completion_with_only_model_and_documents_by_the_profile(
        auto_server, upstream, same_env):
    body = {"model": "gpt-4o", "max_tokens": 50, "messages": [{"role": "user", "content": QUERY}],
            "edgewise": {"documents": CHUNKS}}
    r = httpx.post(auto_server + "/v1/chat/completions", json=body, timeout=30)
    assert r.status_code == 200, r.text
    budget = int(r.headers["x-edgewise-documents-budget"])
    expected = edgewise.pack(QUERY, CHUNKS, model="gpt-4o", budget=budget, order="auto")
    assert (expected.debug_info.order, expected.debug_info.to_dict()["placement"]) == (
        PLACED_BY_LAST_BEST, placement(same_env, SECTIONS_REASON))
    sent = {"model": "gpt-4o", "max_tokens": 50, "messages": [{"role": "user", "content": expected.prompt}]}
    assert last_body(upstream) == sent
    assert r.json()["received"] == sent


def test_an_auto_server_packs_a_response_with_only_model_and_documents_by_the_profile(auto_server, upstream, same_env):
    body = {"model": "gpt-4o", "max_output_tokens": 50, "input": QUERY, "edgewise": {"documents": CHUNKS}}
    r = httpx.post(auto_server + "/v1/responses", json=body, timeout=30)
    assert r.status_code == 200, r.text
    budget = int(r.headers["x-edgewise-documents-budget"])
    expected = edgewise.pack(QUERY, CHUNKS, model="gpt-4o", budget=budget, order="auto")
    assert expected.debug_info.order == PLACED_BY_LAST_BEST
    assert last_body(upstream) == {"model": "gpt-4o", "max_output_tokens": 50, "input": expected.prompt}


def test_a_proxy_request_s_own_order_wins_over_the_server_s(auto_server, upstream, same_env):
    body = {"model": "gpt-4o", "max_tokens": 50, "messages": [{"role": "user", "content": QUERY}],
            "edgewise": {"documents": CHUNKS, "order": "edges", "debug": True}}
    r = httpx.post(auto_server + "/v1/chat/completions", json=body, timeout=30)
    assert r.status_code == 200, r.text
    budget = int(r.headers["x-edgewise-documents-budget"])
    expected = edgewise.pack(QUERY, CHUNKS, model="gpt-4o", budget=budget, order="edges")
    sent = {"model": "gpt-4o", "max_tokens": 50, "messages": [{"role": "user", "content": expected.prompt}]}
    assert last_body(upstream) == sent
    assert r.json()["edgewise"]["pack"] == expected.debug_info.to_dict()
    assert r.json()["edgewise"]["pack"]["order"] == PLACED_BY_EDGES


def _serve(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "edgewise", "serve", "--port", str(free_port()), *args],
                          capture_output=True, text=True, timeout=60, env={**os.environ, "EDGEWISE_API_KEY": ""})


def test_an_unknown_order_stops_the_start_with_one_line():
    proc = _serve("--order", "nope")
    assert (proc.returncode, proc.stdout, proc.stderr) == (
        2, "", f"edgewise: error: unknown order 'nope'; choose one of: {', '.join(ORDERS.display_names())}\n")


def test_a_default_order_that_reads_a_file_outside_the_assets_stops_the_start():
    proc = _serve("--order", "calibrated:profile.json")
    assert proc.returncode != 0
    assert "order 'calibrated:profile.json' reads a file, and this server reads none" in proc.stderr


# -- the plan, no HTTP -------------------------------------------------------------------------------

def test_the_plan_packs_for_the_request_s_model(same_env):
    body = {"model": "gpt-4o", "max_tokens": 50, "messages": [{"role": "user", "content": QUERY}],
            "edgewise": {"documents": CHUNKS, **OPTIONS}}
    plan = prepare(body)
    assert plan.packed.debug_info.to_dict()["placement"] == placement(same_env, "profile gpt-4o/qa-paper-4")
    assert (plan.tokenizer, plan.packed.debug_info.tokenizer) == ("o200k_base", "o200k_base")


def test_a_client_s_own_tokenizer_still_counts_and_the_model_is_then_not_packed_for(same_env):
    """The packer counts with the model's tokenizer or not at all: a request that counts with
    another keeps working as before, and ``auto`` has no model to look up (it places by edges)."""
    body = {"model": "gpt-4o", "max_tokens": 50, "messages": [{"role": "user", "content": QUERY}],
            "edgewise": {"documents": CHUNKS, **OPTIONS, "tokenizer": "cl100k_base"}}
    plan = prepare(body)
    assert (plan.tokenizer, plan.packed.debug_info.tokenizer) == ("cl100k_base", "cl100k_base")
    assert plan.packed.debug_info.to_dict()["placement"] == placement(
        None, "the request counts with tokenizer 'cl100k_base', not model 'gpt-4o''s own 'o200k_base', so no model "
        "is packed for: auto places by edges", order="edges")


def test_auto_for_a_model_the_catalogue_does_not_know_says_so(same_env):
    body = {"model": "local", "max_tokens": 50, "messages": [{"role": "user", "content": QUERY}],
            "edgewise": {"documents": CHUNKS, **OPTIONS, "context_window": 2000}}
    plan = prepare(body)
    assert plan.packed.debug_info.to_dict()["placement"] == placement(
        None, "the request's model 'local' is not in the catalogue (edgewise list), so no model is packed for: "
        "auto places by edges", order="edges")
    assert plan.packed.debug_info.to_dict()["order"] == PLACED_BY_EDGES


def test_auto_for_a_request_with_no_model_says_none_was_given(same_env):
    body = {"max_tokens": 50, "messages": [{"role": "user", "content": QUERY}],
            "edgewise": {"documents": CHUNKS, **OPTIONS, "context_window": 2000}}
    assert prepare(body).packed.debug_info.to_dict()["placement"] == placement(
        None, "no model given (model=...): auto places by edges", order="edges")


def test_a_model_the_catalogue_does_not_know_packs_as_before(same_env):
    body = {"model": "local", "max_tokens": 50, "messages": [{"role": "user", "content": QUERY}],
            "edgewise": {"documents": CHUNKS, "context_window": 2000, "tokenizer": "cl100k_base", "layout": "paper"}}
    plan = prepare(body)
    expected = edgewise.pack(QUERY, CHUNKS, budget=plan.documents_budget, tokenizer="cl100k_base", layout="paper")
    assert plan.body["messages"] == [{"role": "user", "content": expected.prompt}]
