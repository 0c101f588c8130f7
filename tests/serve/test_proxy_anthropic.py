"""Anthropic's Messages API through the proxy, with the official ``anthropic`` client.

A real ``edgewise serve --upstream-anthropic`` process (with an OpenAI upstream beside it, so the
choice between the two is tested too) in front of the loopback fake of ``tests/anthropic_upstream.py``,
which answers as Anthropic's API reference and event schema say, refuses any field it does not
take, and records every request: the tests assert what the upstream received, whole (the packed
system prompt and messages, the budget, the blocks passed through), the count it was asked for,
the events in their order and as they come, and the errors' shapes. A second proxy stands in
front of a fake without ``count_tokens``, with an edgewise key and an upstream key.
"""

from __future__ import annotations

import json
import math
import re

import pytest

from edgewise import pack
from edgewise.serve.proxy.anthropic import MARGIN
from edgewise.serve.proxy.rawjson import dumps
from edgewise.tokens.tokenizers import get_tokenizer

from ..anthropic_upstream import (
    ANSWER,
    MODEL,
    TOOL_INPUT,
    FakeAnthropic,
    events,
    input_tokens,
    message,
    sse,
    start_proxy,
)
from ..conftest import ROOT
from ..proxy_upstream import FakeOpenAI
from ..servers import stop

anthropic = pytest.importorskip("anthropic", reason="needs the anthropic client: pip install -e '.[dev]'")
openai = pytest.importorskip("openai", reason="needs the openai client: pip install -e '.[dev]'")
httpx = pytest.importorskip("httpx")

TOK = get_tokenizer("cl100k_base")
DOCS = [{"id": "paris", "text": "Paris is the capital of France.", "score": 0.9},
        {"id": "alps", "text": "The Alps run along the eastern border. " * 30, "score": 0.1},
        {"id": "loire", "text": "The Loire is the longest river of France. " * 150, "score": 0.05}]
WINDOW = 1500
FIELD = {"edgewise": {"documents": DOCS, "context_window": WINDOW}}
QUESTION = "What is the capital of France?"
SYSTEM = "Answer in one sentence."
ASK = {"model": MODEL, "max_tokens": 300, "system": SYSTEM, "messages": [{"role": "user", "content": QUESTION}]}
IMAGE = {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                     "data": "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="}}
TOOLS = [{"name": "weather", "description": "The weather in a city",
          "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}]


@pytest.fixture(scope="module")
def upstream():
    with FakeAnthropic() as fake:
        yield fake


@pytest.fixture(scope="module")
def openai_upstream():
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture(scope="module")
def proxy(upstream, openai_upstream, tmp_path_factory):
    proc, base = start_proxy(tmp_path_factory.mktemp("proxy"), upstream.url, "--upstream", openai_upstream.url)
    yield base
    stop(proc)


def client(base: str, **keys) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=base, max_retries=0, timeout=30, **({"api_key": "client-key"} | keys))


def packed_for(budget: int) -> str:
    return pack(QUESTION, DOCS, budget=budget, tokenizer="cl100k_base").prompt


def expect_budget(conversation: int, max_tokens: int = 300) -> int:
    """The packer's budget (stand-in tokens): the question, and what the conversation leaves over the margin."""
    return TOK.count(QUESTION) + math.floor((WINDOW - max_tokens - conversation) / MARGIN)


def test_create_packs_the_documents_into_what_the_counted_conversation_leaves(proxy, upstream):
    counts = len(upstream.requests("/v1/messages/count_tokens"))
    raw = client(proxy).messages.with_raw_response.create(**ASK, extra_body=FIELD)
    asked = upstream.requests("/v1/messages/count_tokens")[counts:]
    assert asked == [{"model": MODEL, "system": SYSTEM, "messages": ASK["messages"]}]  # one call, no documents
    conversation = input_tokens(asked[0])
    budget = expect_budget(conversation)
    sent = upstream.requests("/v1/messages")[-1]
    assert sent == {**ASK, "messages": [{"role": "user", "content": packed_for(budget)}]}  # no edgewise field
    packed = pack(QUESTION, DOCS, budget=budget, tokenizer="cl100k_base")
    documents = math.ceil(MARGIN * (packed.debug_info.prompt_tokens - TOK.count(QUESTION)))
    assert {k: v for k, v in raw.headers.items() if k.startswith("x-edgewise")} == {
        "x-edgewise-prompt-tokens": str(conversation + documents), "x-edgewise-budget": str(WINDOW - 300),
        "x-edgewise-documents-budget": str(budget), "x-edgewise-dropped": str(len(packed.debug_info.dropped)),
        "x-edgewise-dropped-messages": "0", "x-edgewise-counter": "count_tokens",
        "x-edgewise-stand-in": "cl100k_base x1.25"}
    assert conversation + documents <= WINDOW - 300
    assert json.loads(raw.http_response.read()) == message(sent)  # the upstream's reply, as it sent it
    assert raw.parse().content[0].text == "".join(ANSWER)


def test_a_stream_is_relayed_event_for_event(proxy, upstream):
    stream = client(proxy).messages.create(**ASK, extra_body=FIELD, stream=True)
    got = [e.model_dump(exclude_unset=True) for e in stream]
    sent = upstream.requests("/v1/messages")[-1]
    assert sent["stream"] is True and sent["messages"][0]["content"].startswith("[System]")
    assert got == [e for e in events(sent) if e["type"] != "ping"]  # the client drops pings; the rest in order
    assert [e["type"] for e in got] == ["message_start", "content_block_start", *["content_block_delta"] * len(ANSWER),
                                        "content_block_stop", "message_delta", "message_stop"]
    with httpx.stream("POST", proxy + "/v1/messages", json={**ASK, **FIELD, "stream": True}, timeout=30,
                      headers={"anthropic-version": "2023-06-01", "x-api-key": "k"}) as r:
        relayed = r.read()
        assert (r.headers["content-type"], r.headers["x-edgewise-counter"]) == ("text/event-stream", "count_tokens")
    assert relayed == b"".join(sse(e) for e in events(upstream.requests("/v1/messages")[-1]))  # pings too, byte for byte


def test_events_arrive_as_the_upstream_sends_them(proxy, upstream):
    """The upstream holds its stream after ``message_start`` until the test has read that event through
    the proxy: a proxy that waited for the whole reply would never deliver it."""
    upstream.gate.clear()
    stream = client(proxy).messages.create(**{**ASK, "model": "claude-gated"}, extra_body=FIELD, stream=True)
    events_in = iter(stream)
    first = next(events_in)
    assert (first.type, upstream.gate.is_set()) == ("message_start", False)
    upstream.gate.set()
    assert [e.type for e in events_in] == ["content_block_start", *["content_block_delta"] * len(ANSWER),
                                           "content_block_stop", "message_delta", "message_stop"]


def test_tool_use_and_image_blocks_pass_through_as_sent(proxy, upstream):
    c = client(proxy)
    question = {"role": "user", "content": [{"type": "text", "text": QUESTION}, IMAGE]}
    reply = c.messages.create(model=MODEL, max_tokens=300, tools=TOOLS, tool_choice={"type": "any"},
                              messages=[question], extra_body=FIELD)
    assert [(b.type, b.name, b.input) for b in reply.content] == [("tool_use", "weather", TOOL_INPUT)]
    call = {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in reply.content]}
    result = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": reply.content[0].id,
                                           "content": [{"type": "text", "text": "sunny, 24 °C"}]}]}
    counts = len(upstream.requests("/v1/messages/count_tokens"))
    raw = c.messages.with_raw_response.create(model=MODEL, max_tokens=300, tools=TOOLS,
                                              messages=[question, call, result], extra_body=FIELD)
    assert raw.parse().content[0].text == "".join(ANSWER)
    asked = upstream.requests("/v1/messages/count_tokens")[counts:]
    assert asked == [{"model": MODEL, "tools": TOOLS, "messages": [question, call, result]}]
    budget = expect_budget(input_tokens(asked[0]))
    assert raw.headers["x-edgewise-documents-budget"] == str(budget)
    body = upstream.seen[-1][3]
    sent = json.loads(body)
    assert sent == {"model": MODEL, "max_tokens": 300, "tools": TOOLS, "messages": [
        {"role": "user", "content": [{"type": "text", "text": packed_for(budget)}, IMAGE]}, call, result]}
    for block in (IMAGE, *call["content"], *result["content"]):  # each block whole, as the proxy writes what it keeps
        assert dumps(block).encode() in body


def test_documents_in_a_marked_block_are_packed_and_the_block_removed(proxy, upstream):
    block = {"type": "document", "title": "edgewise_documents",
             "source": {"type": "text", "media_type": "text/plain", "data": json.dumps(FIELD["edgewise"])}}
    raw = client(proxy).messages.with_raw_response.create(
        model=MODEL, max_tokens=300, system=SYSTEM,
        messages=[{"role": "user", "content": [block, {"type": "text", "text": QUESTION}]}])
    budget = int(raw.headers["x-edgewise-documents-budget"])
    assert upstream.requests("/v1/messages")[-1] == {
        **ASK, "messages": [{"role": "user", "content": [{"type": "text", "text": packed_for(budget)}]}]}
    assert upstream.requests("/v1/messages/count_tokens")[-1]["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": QUESTION}]}]


def test_a_request_without_documents_goes_through_byte_for_byte(proxy, upstream):
    counts = len(upstream.requests("/v1/messages/count_tokens"))
    raw = b'{"model": "claude-fake-1",  "max_tokens": 10, "messages": [{"role": "user", "content": "caf\\u00e9"}]}'
    r = httpx.post(proxy + "/v1/messages", content=raw, timeout=30,
                   headers={"content-type": "application/json", "anthropic-version": "2023-06-01", "x-api-key": "k"})
    assert (r.status_code, upstream.seen[-1][1], upstream.seen[-1][3]) == (200, "/v1/messages", raw)
    assert len(upstream.requests("/v1/messages/count_tokens")) == counts
    assert [k for k in r.headers if k.startswith("x-edgewise")] == []


def test_count_tokens_counts_the_packed_request(proxy, upstream):
    counts = len(upstream.requests("/v1/messages/count_tokens"))
    raw = client(proxy).messages.with_raw_response.count_tokens(
        model=MODEL, system=SYSTEM, messages=ASK["messages"], extra_body=FIELD)
    asked = upstream.requests("/v1/messages/count_tokens")[counts:]
    conversation = input_tokens(asked[0])
    budget = expect_budget(conversation, max_tokens=512)  # no max_tokens in a count: the default reply
    assert asked == [{"model": MODEL, "system": SYSTEM, "messages": ASK["messages"]},  # edgewise's own count
                     {"model": MODEL, "system": SYSTEM,  # the client's, packed
                      "messages": [{"role": "user", "content": packed_for(budget)}]}]
    assert raw.parse().input_tokens == input_tokens(asked[1])
    assert raw.headers["x-edgewise-budget"] == str(WINDOW - 512)


def test_edgewise_errors_are_in_anthropics_shape(proxy, upstream):
    n = len(upstream.seen)
    with pytest.raises(anthropic.UnprocessableEntityError) as info:
        client(proxy).messages.create(**{**ASK, "max_tokens": 1490}, extra_body=FIELD)
    e = info.value
    assert e.response.headers["x-edgewise-error"] == "1"
    assert e.body == {"type": "error", "error": {"type": "invalid_request_error", "message": (
        f"the context window must hold the reply and the conversation: {WINDOW} - 1490 (max_tokens) leaves 10 tokens, "
        f"but the system prompt, tools and the turns kept take {input_tokens(upstream.requests('/v1/messages/count_tokens')[-1])} "
        "(count_tokens); raise context_window or lower max_tokens")}}
    assert [p for _, p, _, _ in upstream.seen[n:]] == ["/v1/messages/count_tokens"]  # nothing was sent to be answered
    with pytest.raises(anthropic.UnprocessableEntityError) as info:  # the field on a path that does not pack it
        client(proxy).messages.batches.create(requests=[], extra_body=FIELD)
    assert info.value.body == {"type": "error", "error": {"type": "invalid_request_error", "message": (
        "the 'edgewise' field is read on POST /v1/chat/completions, POST /v1/responses and POST /v1/messages only, "
        "but this request is POST /v1/messages/batches, which the proxy forwards unchanged: remove the field")}}


def test_upstream_errors_are_relayed_as_sent(proxy, upstream):
    with pytest.raises(anthropic.APIStatusError) as info:
        client(proxy).messages.create(**{**ASK, "model": "claude-overloaded"}, extra_body=FIELD)
    e = info.value
    assert (e.status_code, e.body) == (529, {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"},
                                             "request_id": "req_fake1"})
    assert (e.response.headers["request-id"], "x-edgewise-error" in e.response.headers) == ("req_fake1", False)
    with httpx.stream("POST", proxy + "/v1/messages", timeout=30, headers={"anthropic-version": "2023-06-01", "x-api-key": "k"},
                      json={**ASK, "model": "claude-stream-error", "stream": True, **FIELD}) as r:
        relayed = r.read()
    start = events(upstream.requests("/v1/messages")[-1])[0]
    assert relayed == sse(start) + sse({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})


def test_other_paths_go_to_the_upstream_the_client_speaks_to(proxy, upstream, openai_upstream):
    models = client(proxy).models.list()
    assert [m.id for m in models.data] == [MODEL]
    assert (upstream.seen[-1][0], upstream.seen[-1][1]) == ("GET", "/v1/models")
    assert client(proxy).models.retrieve(MODEL).display_name == "Claude Fake 1"
    n = len(upstream.seen)
    listed = openai.OpenAI(base_url=proxy + "/v1", api_key="k", max_retries=0, timeout=30).models.list()
    assert [m.id for m in listed.data] == ["fake-model"] and len(upstream.seen) == n  # no anthropic-version: OpenAI's


def test_each_upstream_gets_its_own_error_shape(proxy, upstream, openai_upstream):
    n, m = len(upstream.seen), len(openai_upstream.seen)
    body = {"model": "m", "input": "Paris", **FIELD}
    message = ("the 'edgewise' field is read on POST /v1/chat/completions, POST /v1/responses and POST /v1/messages "
               "only, but this request is POST /v1/embeddings, which the proxy forwards unchanged: remove the field")
    as_openai = httpx.post(proxy + "/v1/embeddings", json=body, timeout=30)
    as_anthropic = httpx.post(proxy + "/v1/embeddings", json=body, timeout=30, headers={"anthropic-version": "2023-06-01"})
    assert (as_openai.status_code, as_openai.json()) == (422, {"error": {"type": "edgewise_invalid_input", "message": message}})
    assert (as_anthropic.status_code, as_anthropic.json()) == (
        422, {"type": "error", "error": {"type": "invalid_request_error", "message": message}})
    assert as_openai.headers["x-edgewise-error"] == as_anthropic.headers["x-edgewise-error"] == "1"
    assert (len(upstream.seen), len(openai_upstream.seen)) == (n, m)


def test_an_unreachable_upstream_is_a_502_in_anthropics_shape():
    from fastapi.testclient import TestClient

    from edgewise.serve.app import create_app
    from edgewise.serve.config import ServeConfig

    from ..servers import free_port

    config = ServeConfig(api_key=None, upstream_anthropic=f"http://127.0.0.1:{free_port()}")  # nothing listens there
    with TestClient(create_app(config)) as app:
        r = app.post("/v1/messages", json=ASK, headers={"anthropic-version": "2023-06-01"})
    assert (r.status_code, r.headers["x-edgewise-error"], r.json()["type"], r.json()["error"]["type"]) == \
        (502, "1", "error", "api_error")
    assert re.fullmatch(r"the upstream could not be reached \(ConnectError: .+\); tried 3 times",
                        r.json()["error"]["message"]), r.json()


def test_the_docs_example_runs_against_the_proxy(proxy, upstream):
    text = (ROOT / "docs" / "proxy.md").read_text(encoding="utf-8")
    section = text[text.index("## Anthropic's Messages API"):]
    block = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    port = proxy.rsplit(":", 1)[1]
    printed: list[str] = []
    exec(compile(block.replace("8000", port), "docs/proxy.md", "exec"), {"print": lambda *a: printed.append(" ".join(map(str, a)))})
    sent = upstream.requests("/v1/messages")[-1]
    assert sent["messages"][-1]["content"].startswith("[System]") and "edgewise" not in sent
    assert printed == ["count_tokens", "".join(ANSWER)]


# -- an upstream without count_tokens, behind keys --------------------------------------------------

@pytest.fixture(scope="module")
def plain_upstream():
    with FakeAnthropic(counts=False) as fake:
        yield fake


@pytest.fixture(scope="module")
def keyed_proxy(plain_upstream, tmp_path_factory):
    proc, base = start_proxy(tmp_path_factory.mktemp("keyed"), plain_upstream.url + "/v1",
                             env={"EDGEWISE_API_KEY": "s3cret", "EDGEWISE_UPSTREAM_ANTHROPIC_API_KEY": "operator-key"})
    yield base
    stop(proc)


def test_without_count_tokens_the_conversation_is_estimated_and_not_asked_again(keyed_proxy, plain_upstream):
    c = client(keyed_proxy, api_key="s3cret")  # this client sends it as Authorization: Bearer
    first = c.messages.with_raw_response.create(**ASK, extra_body=FIELD)
    second = c.messages.with_raw_response.create(**ASK, extra_body=FIELD)
    assert [p for _, p, _, _ in plain_upstream.seen] == ["/v1/messages/count_tokens", "/v1/messages", "/v1/messages"]
    reason = "the upstream has no /v1/messages/count_tokens (it answered 404)"
    for raw in (first, second):
        assert (raw.headers["x-edgewise-counter"], raw.headers["x-edgewise-counter-reason"]) == ("estimate", reason)
    q = TOK.count(QUESTION)
    fixed = 3 + (3 + TOK.count("user")) + (3 + TOK.count("system") + TOK.count(SYSTEM))
    conversation = math.ceil(MARGIN * (fixed + q))
    budget = expect_budget(conversation)
    assert plain_upstream.requests("/v1/messages")[-1] == {**ASK, "messages": [{"role": "user", "content": packed_for(budget)}]}
    headers = plain_upstream.seen[-1][2]
    assert (headers["x-api-key"], "authorization" in headers) == ("operator-key", False)  # the operator's key only


def test_the_edgewise_key_is_checked_with_an_anthropic_error(keyed_proxy, plain_upstream):
    n = len(plain_upstream.seen)
    with pytest.raises(anthropic.AuthenticationError) as info:
        client(keyed_proxy).messages.create(**ASK, extra_body=FIELD)
    assert info.value.body == {"type": "error", "error": {"type": "authentication_error", "message": "the API key is wrong"}}
    assert (info.value.response.headers["x-edgewise-error"], len(plain_upstream.seen)) == ("1", n)
