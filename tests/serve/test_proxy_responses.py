"""The Responses API packed: ``POST /v1/responses`` with documents in the ``edgewise`` field.

First the plan, no HTTP: the budget arithmetic recomputed here from the forwarded body (the same
counting rule as chat completions: instructions count as a system message), ``input`` as a string
or as items, what is kept and what is dropped. Then the official ``openai`` client against
edgewise in front of the loopback fake of ``tests/proxy_upstream.py``, which answers with OpenAI's
published Response object and event stream; ``llama_cpp.server`` has no ``/v1/responses``.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgewise import pack
from edgewise.errors import InputError
from edgewise.serve.proxy.openai_responses import prepare_response
from edgewise.tokens.tokenizers import get_tokenizer

from ..proxy_upstream import ANSWER, MODEL, FakeOpenAI, response_events, start_proxy
from ..servers import stop

TOK = get_tokenizer("cl100k_base")
DOCS = [{"id": "paris", "text": "Paris is the capital of France.", "score": 0.9},
        {"id": "alps", "text": "The Alps run along the eastern border. " * 30, "score": 0.1}]
OPTS = {"documents": DOCS, "context_window": 2000, "tokenizer": "cl100k_base"}
QUESTION = "What is the capital of France?"
INSTRUCTIONS = "Answer in one sentence."


def cost(item: dict) -> int:
    """The rule written out again: 3 a message, each string field's tokens, other fields as compact JSON,
    1 more for a name; a content list counts its text parts (input_text, output_text) joined by newlines."""
    n = 3
    for key, value in item.items():
        if key == "content" and isinstance(value, list):
            value = "\n".join(p["text"] for p in value if p.get("type") in ("input_text", "output_text", "text"))
        if value is None:
            continue
        n += TOK.count(value if isinstance(value, str) else json.dumps(value, separators=(",", ":")))
        n += key == "name"
    return n


def recount(body: dict) -> int:
    items = [{"role": "user", "content": body["input"]}] if isinstance(body["input"], str) else body["input"]
    fixed = cost({"role": "system", "content": body["instructions"]}) if body.get("instructions") else 0
    tools = TOK.count(json.dumps(body["tools"], separators=(",", ":"))) if body.get("tools") else 0
    return 3 + fixed + tools + sum(cost(i) for i in items)


def test_a_string_input_stays_a_string_and_instructions_are_a_fixed_layer():
    body = {"model": "local", "max_output_tokens": 40, "instructions": INSTRUCTIONS, "input": QUESTION,
            "edgewise": OPTS}
    plan = prepare_response(body)
    fixed = 3 + cost({"role": "user"}) + cost({"role": "system", "content": INSTRUCTIONS})
    assert (plan.reply_tokens, plan.reply_from, plan.fixed_tokens) == (40, "max_output_tokens", fixed)
    assert plan.documents_budget == 2000 - 40 - fixed == plan.packed.debug_info.budget
    expected = pack(QUESTION, DOCS, budget=plan.documents_budget, tokenizer="cl100k_base")
    assert plan.body == {"model": "local", "max_output_tokens": 40, "instructions": INSTRUCTIONS,
                         "input": expected.prompt}
    assert plan.prompt_tokens == recount(plan.body) <= 2000 - 40
    assert (plan.kept_messages, plan.dropped_messages) == ([0], [])


HISTORY = [
    {"role": "developer", "content": "Be exact."},
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Tell me about Lyon. " * 20}]},
    {"type": "message", "role": "assistant", "id": "msg_0", "status": "completed",
     "content": [{"type": "output_text", "text": "Lyon is in France. " * 20, "annotations": []}]},
    {"role": "user", "content": "And what is the weather in Paris?"},
    {"type": "function_call", "call_id": "c1", "name": "weather", "arguments": "{\"city\": \"Paris\"}"},
    {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
]
LAST = {"role": "user", "content": [{"type": "input_text", "text": QUESTION},
                                    {"type": "input_image", "image_url": "https://example.com/map.png"}]}


def test_input_items_keep_their_turns_and_the_last_message_gets_the_prompt():
    tools = [{"type": "function", "name": "weather", "parameters": {"type": "object"}}]
    body = {"model": "local", "input": [*HISTORY, LAST], "tools": tools, "edgewise": OPTS}
    plan = prepare_response(body)
    assert (plan.reply_tokens, plan.reply_from) == (512, "default")
    assert plan.kept_messages == [0, 1, 2, 3, 4, 5, 6]
    sent = plan.body["input"]
    assert sent[:6] == HISTORY
    assert sent[6] == {"role": "user", "content": [{"type": "input_text", "text": plan.packed.prompt},
                                                   {"type": "input_image", "image_url": "https://example.com/map.png"}]}
    assert plan.uncounted_parts == 1  # the image
    assert plan.prompt_tokens == recount(plan.body) <= 2000 - 512
    assert {k: v for k, v in plan.body.items() if k != "input"} == {"model": "local", "tools": tools}


def test_older_turns_are_dropped_whole_and_reported():
    plan = prepare_response({"model": "local", "input": [*HISTORY, LAST], "edgewise": {**OPTS, "history_share": 0.05}})
    turn = cost(HISTORY[3]) + cost(HISTORY[4]) + cost(HISTORY[5])  # the user message and its tool call and result
    assert plan.kept_messages == [0, 3, 4, 5, 6] and plan.history_tokens == turn
    assert [(d["index"], d["role"]) for d in plan.dropped_messages] == [(1, "user"), (2, "assistant")]
    assert plan.body["input"][:4] == [HISTORY[0], *HISTORY[3:]]


@pytest.mark.parametrize(("body", "message"), [
    ({"model": "m", "input": 3, "edgewise": OPTS}, "input must be a string or a list of input items (objects), but got int"),
    ({"model": "m", "edgewise": OPTS}, "input must be a string or a list of input items (objects), but got nothing"),
    ({"model": "m", "input": ["hi"], "edgewise": OPTS}, "input must be a string or a list of input items"),
    ({"model": "m", "input": [{"role": "assistant", "content": "x"}], "edgewise": OPTS},
     "input must hold a user message: its text is the query the documents are packed for"),
    ({"model": "m", "input": [{"role": "user", "content": [{"type": "input_image", "image_url": "u"}]}],
      "edgewise": OPTS}, "the last user message (input item 0) must have text"),
    ({"model": "m", "input": "q", "instructions": ["x"], "edgewise": OPTS}, "instructions must be a string, but got list"),
    ({"model": "m", "input": "q", "previous_response_id": "resp_0", "edgewise": OPTS},
     "a request with previous_response_id continues a conversation the upstream stores, whose tokens edgewise cannot "
     "count: give edgewise.budget, the tokens the packed message may take"),
])
def test_errors_state_the_rule(body, message):
    with pytest.raises(InputError) as info:
        prepare_response(body)
    assert str(info.value).startswith(message)


def test_a_stored_conversation_is_packed_into_the_budget_given():
    plan = prepare_response({"model": "m", "input": QUESTION, "conversation": "conv_1",
                             "edgewise": {**OPTS, "budget": 300}})
    assert plan.documents_budget == 300 and plan.packed.debug_info.prompt_tokens <= 300
    assert plan.body["conversation"] == "conv_1" and plan.body["input"] == plan.packed.prompt


def test_without_documents_nothing_is_planned():
    assert prepare_response({"model": "m", "input": QUESTION}) is None


messages = st.builds(lambda role, text: {"role": role, "content": text},
                     st.sampled_from(["user", "assistant", "developer"]), st.text("abc de.", min_size=1, max_size=80))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(messages, max_size=6), st.integers(150, 1500), st.integers(1, 100), st.floats(0, 1))
def test_the_forwarded_prompt_fits_and_every_item_is_kept_or_reported(history, window, reply, share):
    body = {"model": "m", "max_output_tokens": reply, "instructions": INSTRUCTIONS, "input": [*history, LAST],
            "edgewise": {**OPTS, "context_window": window, "history_share": share}}
    try:
        plan = prepare_response(body)
    except Exception as e:  # noqa: BLE001 - a window too small is refused with the budget's rule, never forwarded
        assert type(e).__name__ == "BudgetError", e
        return
    assert plan.prompt_tokens == recount(plan.body) <= window - reply
    dropped = [d["index"] for d in plan.dropped_messages]
    assert sorted(plan.kept_messages + dropped) == list(range(len(history) + 1))
    assert all(history[i]["role"] != "developer" for i in dropped)


# -- through the proxy, with the openai client ------------------------------------------------------

openai = pytest.importorskip("openai")
httpx = pytest.importorskip("httpx")


@pytest.fixture(scope="module")
def upstream():
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture(scope="module")
def proxy(upstream, tmp_path_factory):
    proc, base = start_proxy(tmp_path_factory.mktemp("proxy"), upstream.url)
    yield base
    stop(proc)


def client(base: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=base + "/v1", api_key="k", max_retries=0, timeout=30)


ASK = {"model": MODEL, "instructions": INSTRUCTIONS, "input": QUESTION, "max_output_tokens": 50}
FIELD = {"edgewise": {**OPTS, "context_window": 4096}}


def test_responses_create_packs_the_documents(proxy, upstream):
    raw = client(proxy).responses.with_raw_response.create(**ASK, extra_body=FIELD)
    reply = raw.parse()
    assert (reply.output_text, reply.status) == ("".join(ANSWER), "completed")
    sent = json.loads(upstream.seen[-1][3])
    budget = int(raw.headers["x-edgewise-documents-budget"])
    expected = pack(QUESTION, DOCS, budget=budget, tokenizer="cl100k_base")
    assert sent == {**ASK, "input": expected.prompt}  # instructions as sent, no edgewise field
    assert int(raw.headers["x-edgewise-budget"]) == 4096 - 50
    assert int(raw.headers["x-edgewise-prompt-tokens"]) == recount(sent)
    assert raw.headers["x-edgewise-dropped"] == "0"


def test_a_streamed_response_is_relayed_event_for_event(proxy, upstream):
    stream = client(proxy).responses.create(**ASK, extra_body=FIELD, stream=True)
    events = [e.model_dump(exclude_unset=True) for e in stream]
    sent = json.loads(upstream.seen[-1][3])
    assert events == response_events(sent)  # every event, in order, as the upstream sent it
    assert [e["type"] for e in events] == [
        "response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
        *["response.output_text.delta"] * len(ANSWER), "response.output_text.done", "response.content_part.done",
        "response.output_item.done", "response.completed"]
    # the bytes: what edgewise relays is what the upstream wrote
    with httpx.stream("POST", proxy + "/v1/responses", json={**ASK, **FIELD, "stream": True}, timeout=30) as r:
        via = r.read()
        assert r.headers["content-type"] == "text/event-stream" and "x-edgewise-prompt-tokens" in r.headers
    with httpx.stream("POST", upstream.url + "/responses", json=json.loads(upstream.seen[-1][3]), timeout=30) as r:
        assert via == r.read()


def test_debug_adds_the_pack_to_a_plain_response(proxy):
    r = httpx.post(proxy + "/v1/responses", json={**ASK, "edgewise": {**FIELD["edgewise"], "debug": True}}, timeout=30)
    body = r.json()
    assert body["edgewise"]["pack"]["placed"] == ["paris", "alps"] and body["object"] == "response"
    assert json.loads(r.headers["x-edgewise-debug"])["documents"] == {"placed": 2, "summarized": 0, "truncated": 0,
                                                                      "dropped": 0}


def test_a_response_without_documents_goes_through_byte_for_byte(proxy, upstream):
    raw = b'{"model": "fake-model",  "input": "caf\\u00e9"}'
    r = httpx.post(proxy + "/v1/responses", content=raw, headers={"content-type": "application/json"}, timeout=30)
    assert (r.status_code, upstream.seen[-1][3]) == (200, raw)
    assert "x-edgewise-prompt-tokens" not in r.headers


def test_a_budget_error_is_edgewises_own(proxy, upstream):
    n = len(upstream.seen)
    r = httpx.post(proxy + "/v1/responses", timeout=30,
                   json={**ASK, "max_output_tokens": 4000, "edgewise": {**OPTS, "context_window": 4000}})
    assert (r.status_code, r.json()["error"]["type"], r.headers["x-edgewise-error"]) == (422, "edgewise_budget_error", "1")
    assert len(upstream.seen) == n
