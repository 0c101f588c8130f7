"""An Anthropic Messages request packed, no HTTP: :mod:`edgewise.serve.proxy.anthropic`.

The arithmetic is written out again here and the forwarded body compared whole: ``system`` kept as
sent and counted as a system message, the earlier turns kept newest first (a tool result stays
with its call), ``max_tokens`` reserved, the documents sized by the stand-in tokenizer (cl100k_base)
times the margin, the conversation either counted by the upstream (a number given to ``finish``)
or estimated the same way.
"""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgewise import pack
from edgewise.errors import BudgetError, ConfigError, InputError
from edgewise.serve.errors import ApiError
from edgewise.serve.proxy.anthropic import CLAUDE_WINDOW, MARGIN, draft
from edgewise.tokens.tokenizers import get_tokenizer

from ..conftest import examples

TOK = get_tokenizer("cl100k_base")
DOCS = [{"id": "paris", "text": "Paris is the capital of France.", "score": 0.9},
        {"id": "alps", "text": "The Alps run along the eastern border. " * 30, "score": 0.1},
        {"id": "loire", "text": "The Loire is the longest river of France. " * 150, "score": 0.05}]
OPTS = {"documents": DOCS, "context_window": 2000}
QUESTION = "What is the capital of France?"
SYSTEM = "Answer in one sentence."
MODEL = "claude-sonnet-4-5"
IMAGE = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}
TOOLS = [{"name": "weather", "description": "The weather in a city",
          "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}]


def text(content) -> str:
    """A content's text as the estimate reads it, written out again: text blocks, a tool call's name
    and compact input, a tool result's content; images not at all."""
    if isinstance(content, str):
        return content
    parts = []
    for block in content:
        if block["type"] == "text":
            parts.append(block["text"])
        elif block["type"] == "tool_use":
            parts.append(block["name"] + " " + json.dumps(block["input"], separators=(",", ":")))
        elif block["type"] == "tool_result":
            parts.append(text(block["content"]))
    return "\n".join(parts)


def cost(message: dict) -> int:
    """The chat rule (3 a message, its role, its text) in stand-in tokens."""
    return 3 + TOK.count(message["role"]) + TOK.count(text(message.get("content") or ""))


def claude(n: int) -> int:
    return math.ceil(n * MARGIN)


def system_cost(system) -> int:
    return 3 + TOK.count("system") + TOK.count(system if isinstance(system, str) else "\n".join(b["text"] for b in system))


def test_a_question_with_a_system_prompt_is_packed_by_the_estimate():
    body = {"model": MODEL, "max_tokens": 100, "system": SYSTEM, "messages": [{"role": "user", "content": QUESTION}],
            "edgewise": OPTS}
    plan = draft(body).finish(None)
    q = TOK.count(QUESTION)
    fixed = 3 + cost({"role": "user"}) + system_cost(SYSTEM)  # reply priming, the query's frame, the system prompt
    conversation = claude(fixed + q)
    pack_budget = q + math.floor((2000 - 100 - conversation) / MARGIN)
    expected = pack(QUESTION, DOCS, budget=pack_budget, tokenizer="cl100k_base")
    assert plan.body == {"model": MODEL, "max_tokens": 100, "system": SYSTEM,
                         "messages": [{"role": "user", "content": expected.prompt}]}
    assert (plan.counter, plan.conversation_tokens, plan.pack_budget, plan.prompt_budget) == \
        ("estimate", conversation, pack_budget, 1900)
    assert plan.prompt_tokens == conversation + claude(expected.debug_info.prompt_tokens - q) <= 1900
    assert plan.packed.debug_info.to_dict() == expected.debug_info.to_dict()
    assert [*expected.debug_info.truncated, *expected.debug_info.dropped] != []  # the budget cut
    assert plan.headers() == {
        "x-edgewise-prompt-tokens": str(plan.prompt_tokens), "x-edgewise-budget": "1900",
        "x-edgewise-documents-budget": str(pack_budget), "x-edgewise-dropped": str(len(expected.debug_info.dropped)),
        "x-edgewise-dropped-messages": "0", "x-edgewise-counter": "estimate", "x-edgewise-stand-in": "cl100k_base x1.25"}


def test_an_upstream_count_replaces_the_estimate_of_the_conversation():
    body = {"model": MODEL, "max_tokens": 100, "system": [{"type": "text", "text": SYSTEM,
                                                            "cache_control": {"type": "ephemeral"}}],
            "messages": [{"role": "user", "content": QUESTION}], "edgewise": {**OPTS, "debug": True}}
    first = draft(body)
    assert first.count_body() == {"model": MODEL, "system": body["system"],
                                  "messages": [{"role": "user", "content": QUESTION}]}
    plan = first.finish(321)
    q = TOK.count(QUESTION)
    pack_budget = q + math.floor((1900 - 321) / MARGIN)
    expected = pack(QUESTION, DOCS, budget=pack_budget, tokenizer="cl100k_base")
    assert plan.body["system"] == body["system"]  # a list of text blocks, cache_control and all, as sent
    assert plan.body["messages"] == [{"role": "user", "content": expected.prompt}]
    assert (plan.counter, plan.counter_reason, plan.pack_budget) == ("count_tokens", None, pack_budget)
    assert plan.prompt_tokens == 321 + claude(expected.debug_info.prompt_tokens - q)
    summary = json.loads(plan.headers()["x-edgewise-debug"])
    assert {k: summary[k] for k in ("counter", "conversation_tokens", "documents_budget", "prompt_budget")} == \
        {"counter": "count_tokens", "conversation_tokens": 321, "documents_budget": 1900 - 321, "prompt_budget": 1900}
    assert summary["stand_in"]["fixed_tokens"] == 3 + cost({"role": "user"}) + system_cost(body["system"])
    assert plan.debug()["pack"]["placed"] == expected.debug_info.placed


HISTORY = [
    {"role": "user", "content": "Tell me about Lyon. " * 20},
    {"role": "assistant", "content": [{"type": "text", "text": "Lyon is in France. " * 20}]},
    {"role": "user", "content": "And what is the weather in Paris?"},
    {"role": "assistant", "content": [{"type": "text", "text": "Let me look."},
                                      {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Paris"}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"}]},
    {"role": "assistant", "content": "It is sunny in Paris."},
]
LAST = {"role": "user", "content": [{"type": "text", "text": QUESTION}, IMAGE]}


def test_earlier_turns_are_kept_newest_first_and_a_tool_result_stays_with_its_call():
    body = {"model": MODEL, "max_tokens": 50, "tools": TOOLS, "messages": [*HISTORY, LAST],
            "edgewise": {**OPTS, "history_share": 0.1}}
    first = draft(body)
    tools = TOK.count(json.dumps(TOOLS, separators=(",", ":")))
    fixed = 3 + cost({"role": "user", "content": [IMAGE]}) + tools
    budget = int(0.1 * (2000 - 50 - claude(fixed)))
    turn = sum(cost(m) for m in HISTORY[2:6])  # the question, the call, its result, the answer: one turn
    assert claude(turn) <= budget < claude(turn) + claude(sum(cost(m) for m in HISTORY[:2]))
    assert (first.keep, first.history_tokens, first.history_budget, first.fixed_tokens) == ([2, 3, 4, 5, 6], turn, budget,
                                                                                             fixed)
    assert [(d["index"], d["role"]) for d in first.dropped_messages] == [(0, "user"), (1, "assistant")]
    plan = first.finish(None)
    sent = plan.body["messages"]
    assert sent[:4] == HISTORY[2:]  # tool_use and tool_result blocks as sent
    assert sent[4] == {"role": "user", "content": [{"type": "text", "text": plan.packed.prompt}, IMAGE]}
    assert plan.body["tools"] == TOOLS and plan.summary()["uncounted_parts"] == 1  # the image
    assert plan.conversation_tokens == claude(fixed + turn + TOK.count(QUESTION))


def test_a_tool_call_in_progress_is_kept_after_the_query():
    call = {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_2", "name": "weather",
                                              "input": {"city": "Paris"}}]}
    result = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_2",
                                           "content": [{"type": "text", "text": "sunny"}]}]}
    body = {"model": MODEL, "max_tokens": 50, "tools": TOOLS, "messages": [LAST, call, result], "edgewise": OPTS}
    first = draft(body)
    assert (first.last, first.keep) == (0, [0, 1, 2])
    tools = TOK.count(json.dumps(TOOLS, separators=(",", ":")))
    assert first.fixed_tokens == 3 + cost({"role": "user", "content": [IMAGE]}) + cost(call) + cost(result) + tools
    plan = first.finish(None)
    assert plan.body["messages"] == [{"role": "user", "content": [{"type": "text", "text": plan.packed.prompt}, IMAGE]},
                                     call, result]


def marked(documents) -> dict:
    return {"type": "document", "title": "edgewise_documents",
            "source": {"type": "text", "media_type": "text/plain", "data": json.dumps(documents)}}


@pytest.mark.parametrize("block_first", [True, False])
def test_documents_in_a_marked_block_pack_as_the_field_does(block_first):
    blocks = [marked(OPTS), {"type": "text", "text": QUESTION}]
    content = blocks if block_first else blocks[::-1]
    by_block = draft({"model": MODEL, "max_tokens": 100, "messages": [{"role": "user", "content": content}]}).finish(None)
    by_field = draft({"model": MODEL, "max_tokens": 100, "messages": [{"role": "user", "content": [blocks[1]]}],
                      "edgewise": OPTS}).finish(None)
    assert by_block.body == by_field.body and by_block.draft.convention == "block"
    assert by_block.body["messages"] == [{"role": "user", "content": [{"type": "text", "text": by_field.packed.prompt}]}]


def test_a_marked_block_alone_in_its_message_takes_the_message_with_it():
    messages = [{"role": "user", "content": [marked(DOCS)]}, {"role": "user", "content": QUESTION}]
    plan = draft({"model": MODEL, "max_tokens": 100, "messages": messages}).finish(None)
    assert plan.body["messages"] == [{"role": "user", "content": plan.packed.prompt}]
    assert plan.prompt_budget == CLAUDE_WINDOW - 100  # a claude model the registry does not know


def test_without_documents_nothing_is_planned():
    assert draft({"model": MODEL, "max_tokens": 10, "messages": [{"role": "user", "content": QUESTION}]}) is None


ASK = {"model": MODEL, "max_tokens": 100, "messages": [{"role": "user", "content": QUESTION}]}


@pytest.mark.parametrize(("body", "error", "message"), [
    ({**ASK, "messages": "hi", "edgewise": OPTS}, InputError, "messages must be a list of message objects"),
    ({**ASK, "messages": [{"role": "system", "content": "x"}], "edgewise": OPTS}, InputError,
     "a message's role must be user or assistant, but message 0 has 'system' (the system prompt is the top-level "
     "system field)"),
    ({**ASK, "messages": [{"role": "user", "content": [IMAGE]}], "edgewise": OPTS}, InputError,
     "messages must hold a user message with text: its text is the query the documents are packed for"),
    ({**ASK, "system": 3, "edgewise": OPTS}, InputError, "system must be a string or a list of text blocks, but got 3"),
    ({**ASK, "system": [{"type": "image"}], "edgewise": OPTS}, InputError,
     'system must be a string or a list of text blocks, but got [{"type": "image"}]'),
    ({**ASK, "messages": [{"role": "user", "content": [marked(DOCS), {"type": "text", "text": "q"}]}], "edgewise": OPTS},
     InputError, "documents must come either in the 'edgewise' field or in a document block titled "
                 "'edgewise_documents', but this request has both (message 0)"),
    ({**ASK, "messages": [{"role": "user", "content": [marked(DOCS), marked(DOCS), {"type": "text", "text": "q"}]}]},
     InputError, "at most one document block may be titled 'edgewise_documents', but got 2 (messages [0, 0])"),
    ({**ASK, "messages": [{"role": "user", "content": [{**marked(DOCS), "source": {"type": "base64", "data": "e30="}},
                                                        {"type": "text", "text": "q"}]}]},
     InputError, "the document block titled 'edgewise_documents' must have a text source"),
    ({**ASK, "messages": [{"role": "user", "content": [{**marked(DOCS), "source": {"type": "text", "data": "nope"}},
                                                        {"type": "text", "text": "q"}]}]},
     InputError, "the source of the document block titled 'edgewise_documents' must be JSON (a documents list or an "
                 "object with documents), but it does not parse: Expecting value: line 1 column 1 (char 0)"),
    ({**ASK, "model": "gpt-x", "edgewise": {"documents": DOCS}}, ConfigError, "unknown model 'gpt-x'"),
    ({**ASK, "edgewise": {**OPTS, "model": "m"}}, ConfigError, "edgewise.model is not an option of the proxy"),
])
def test_errors_state_the_rule(body, error, message):
    with pytest.raises(error) as info:
        draft(body)
    assert str(info.value).startswith(message)


def test_a_block_that_breaks_the_fields_rules_is_the_same_400_naming_the_block():
    block = {**marked(DOCS), "source": {"type": "text", "data": '[{"text": "a", "score": 1e999}]'}}
    with pytest.raises(ApiError) as info:
        draft({**ASK, "messages": [{"role": "user", "content": [block, {"type": "text", "text": "q"}]}]})
    assert (info.value.status_code, info.value.message) == (
        400, "numbers in the document block titled 'edgewise_documents' must be finite JSON numbers, but its "
             "content[0].score is 1e999, beyond a double (±1.8e308)")


def test_a_conversation_that_leaves_no_room_is_a_budget_error_naming_the_counter():
    first = draft({**ASK, "system": SYSTEM, "edgewise": {**OPTS, "context_window": 600}})
    with pytest.raises(BudgetError) as info:
        first.finish(500)
    assert str(info.value) == ("the context window must hold the reply and the conversation: 600 - 100 (max_tokens) "
                               "leaves 500 tokens, but the system prompt, tools and the turns kept take 500 "
                               "(count_tokens); raise context_window or lower max_tokens")


texts = st.text("abc de.", min_size=1, max_size=80)
turns = st.lists(st.tuples(texts, texts), max_size=4)


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(turns, st.integers(400, 3000), st.integers(1, 200), st.floats(0, 1), st.one_of(st.none(), st.integers(0, 900)))
def test_the_forwarded_prompt_fits_and_every_message_is_kept_or_reported(pairs, window, reply, share, counted):
    history = [m for a, b in pairs for m in ({"role": "user", "content": a}, {"role": "assistant", "content": b})]
    body = {"model": MODEL, "max_tokens": reply, "system": SYSTEM, "messages": [*history, LAST],
            "edgewise": {**OPTS, "context_window": window, "history_share": share}}
    try:
        plan = draft(body).finish(counted)
    except BudgetError:  # a window too small is refused with the budget's rule, never forwarded
        return
    sent = plan.body["messages"]
    q = TOK.count(QUESTION)
    if counted is None:  # the estimate, recounted from the forwarded body
        rest = 3 + system_cost(SYSTEM) + sum(cost(m) for m in sent[:-1]) + cost({"role": "user", "content": [IMAGE]})
        counted = claude(rest + q)
    assert plan.prompt_tokens == counted + claude(TOK.count(sent[-1]["content"][0]["text"]) - q) <= window - reply
    dropped = [d["index"] for d in plan.draft.dropped_messages]
    assert sorted(plan.draft.keep + dropped) == list(range(len(history) + 1))
    assert sent == [m for i, m in enumerate(history) if i in plan.draft.keep] + [
        {"role": "user", "content": [{"type": "text", "text": plan.packed.prompt}, IMAGE]}]


def test_auto_for_a_claude_model_says_why_no_profile_places():
    """Claude is not in the catalogue: ``order="auto"`` places by ``edges`` and its record says why."""
    body = {"model": MODEL, "max_tokens": 100, "messages": [{"role": "user", "content": QUESTION}],
            "edgewise": {**OPTS, "order": "auto"}}
    placement = draft(body).finish(None).packed.debug_info.to_dict()["placement"]
    assert placement == {"requested": "auto", "order": "edges", "prune": None, "profile_prune": None, "profile": None,
                         "reason": f"the request's model {MODEL!r} is not in the catalogue (edgewise list), so no "
                                   "model is packed for: auto places by edges"}
