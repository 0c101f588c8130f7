"""``order: "auto"`` over HTTP: ``/v1/pack`` with a ``model`` option, and the proxy, where the
request's own ``model`` field names the model whose profile places the documents (no client change).

A real ``edgewise serve --upstream`` process on 127.0.0.1 in front of the loopback fake of
``tests/proxy_upstream.py``, started with ``$EDGEWISE_PROFILES`` naming a directory that holds a
synthetic ``gpt-4o`` profile (``tests/position_profiles.py``); each answer is held to what the
library gives in this process with the same directories.
"""

from __future__ import annotations

import json

import pytest

import edgewise
from edgewise.serve.conversation import prepare

from ..position_profiles import CHUNKS, PLACED_BY_LAST_BEST, QUERY, placement, write_profile
from ..proxy_upstream import FakeOpenAI, start_proxy
from ..servers import stop

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
        None, "no model given (model=...): auto places by edges", order="edges")


def test_a_model_the_catalogue_does_not_know_packs_as_before(same_env):
    body = {"model": "local", "max_tokens": 50, "messages": [{"role": "user", "content": QUERY}],
            "edgewise": {"documents": CHUNKS, "context_window": 2000, "tokenizer": "cl100k_base", "layout": "paper"}}
    plan = prepare(body)
    expected = edgewise.pack(QUERY, CHUNKS, budget=plan.documents_budget, tokenizer="cl100k_base", layout="paper")
    assert plan.body["messages"] == [{"role": "user", "content": expected.prompt}]
