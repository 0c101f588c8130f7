"""The proxy's conversation logic, no HTTP: the budget arithmetic, earlier turns, the splice, both
conventions. The counting rule is recomputed here from the forwarded body, independently of the
plan's own arithmetic."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from edgewise.errors import BudgetError, ConfigError, InputError
from edgewise.serve.proxy.chatformat import CHAT_FORMATS, chat_format, message_tokens
from edgewise.serve.proxy.conversation import MARK, extract, prepare, splice
from edgewise.tokens.tokenizers import get_tokenizer

TOK = get_tokenizer("cl100k_base")
OPENAI = CHAT_FORMATS["openai"]
DOCS = [{"id": "paris", "text": "Paris is the capital of France.", "score": 0.9},
        {"id": "lyon", "text": "Lyon is known for its food and its silk.", "score": 0.4},
        {"id": "alps", "text": "The Alps run along the eastern border. " * 30, "score": 0.1}]


def models(name: str) -> SimpleNamespace:
    known = {"tiny-4k": SimpleNamespace(name="tiny-4k", tokenizer="o200k_base", context_window=4096)}
    if name not in known:
        raise ConfigError(f"unknown model {name!r}; choose one of: {', '.join(known)}")
    return known[name]


def cost(message: dict) -> int:
    """The rule, written out again: 3 + each string value's tokens (+1 for a name)."""
    n = 3
    for key, value in message.items():
        if key == "content" and isinstance(value, list):
            value = "\n".join(p["text"] for p in value if p.get("type") == "text")
        if value is None:  # an assistant message with only tool calls has content null: nothing to count
            continue
        n += TOK.count(value if isinstance(value, str) else json.dumps(value, separators=(",", ":")))
        n += key == "name"
    return n


def recount(body: dict) -> int:
    """Tokens of a forwarded request by the OpenAI rule (3 priming the reply)."""
    return sum(cost(m) for m in body["messages"]) + 3


def request(messages: list[dict], **edgewise) -> dict:
    return {"model": "local", "max_tokens": 50, "messages": messages,
            "edgewise": {"documents": DOCS, "context_window": 2000, "tokenizer": "cl100k_base", **edgewise}}


SYSTEM = {"role": "system", "content": "You are terse."}
TURNS = [{"role": "user", "content": "Tell me about Lyon. " * 10},
         {"role": "assistant", "content": "Lyon is in France. " * 10},
         {"role": "user", "content": "And Marseille?"},
         {"role": "assistant", "content": "A port city."}]
LAST = {"role": "user", "content": "What is the capital of France?"}


def test_cost_rule_matches_openai_cookbook_numbers():
    # the cookbook's example: [{"role": "system", "content": "You are a helpful assistant."}] → 3 + 1 + 6 tokens
    assert message_tokens({"role": "system", "content": "You are a helpful assistant."}, TOK.count, OPENAI) == 10
    assert message_tokens({"role": "user", "name": "bob", "content": "hi"}, TOK.count, OPENAI) == 3 + 1 + 1 + 1 + 1
    assert chat_format({"per_message": 5, "per_name": 0, "reply": 2}).per_message == 5
    with pytest.raises(ConfigError, match="unknown chat_format 'llama'; choose one of: openai, gemma"):
        chat_format("llama")


def test_budget_arithmetic_whole():
    body = request([SYSTEM, *TURNS, LAST], history_share=0.5)
    plan = prepare(body)
    fixed = 3 + cost(SYSTEM) + cost({"role": "user"})  # reply priming, the system message, the last message's frame
    available = 2000 - 50 - fixed
    history = int(0.5 * available)
    turn_costs = [cost(TURNS[0]) + cost(TURNS[1]), cost(TURNS[2]) + cost(TURNS[3])]
    assert sum(turn_costs) <= history  # both earlier turns fit
    assert (plan.context_window, plan.reply_tokens, plan.reply_from) == (2000, 50, "max_tokens")
    assert (plan.fixed_tokens, plan.history_budget, plan.history_tokens) == (fixed, history, sum(turn_costs))
    assert plan.documents_budget == available - sum(turn_costs)
    assert plan.packed.debug_info.budget == plan.documents_budget
    assert plan.prompt_tokens == recount(plan.body) <= 2000 - 50
    assert plan.kept_messages == [0, 1, 2, 3, 4, 5] and plan.dropped_messages == []
    # the body forwarded: the field removed, every message as sent but the last, which holds the packed prompt
    assert plan.body == {"model": "local", "max_tokens": 50,
                         "messages": [SYSTEM, *TURNS, {"role": "user", "content": plan.packed.prompt}]}
    assert "  What is the capital of France?" in plan.packed.prompt  # the question, quoted by the layout
    assert plan.headers() == {"x-edgewise-prompt-tokens": str(plan.prompt_tokens), "x-edgewise-budget": "1950",
                              "x-edgewise-documents-budget": str(plan.documents_budget),
                              "x-edgewise-dropped": str(plan.dropped_documents), "x-edgewise-dropped-messages": "0"}


def test_reply_reservation_sources():
    msgs = [LAST]
    assert prepare({**request(msgs), "max_completion_tokens": 70}).reply_tokens == 70
    no_max = request(msgs)
    del no_max["max_tokens"]
    assert (prepare(no_max).reply_tokens, prepare(no_max).reply_from) == (512, "default")
    no_max["edgewise"]["reply_tokens"] = 10
    assert (prepare(no_max).reply_tokens, prepare(no_max).reply_from) == (10, "reply_tokens")


def test_older_turns_dropped_oldest_first_and_reported():
    turn_new = cost(TURNS[2]) + cost(TURNS[3])
    # a share that holds the newest earlier turn and not the one before it
    body = request([SYSTEM, *TURNS, LAST])
    available = 2000 - 50 - (3 + cost(SYSTEM) + cost({"role": "user"}))
    share = (turn_new + 5) / available
    plan = prepare(body, history_share=share)
    history = int(share * available)
    assert plan.kept_messages == [0, 3, 4, 5]
    assert plan.history_tokens == turn_new
    first = cost(TURNS[0]) + cost(TURNS[1])
    reason = f"its turn needs {first} tokens, {history - turn_new} of the history budget {history} left"
    assert plan.dropped_messages == [{"index": 1, "role": "user", "reason": reason},
                                     {"index": 2, "role": "assistant", "reason": reason}]
    assert plan.body["messages"] == [SYSTEM, TURNS[2], TURNS[3], {"role": "user", "content": plan.packed.prompt}]
    assert plan.headers()["x-edgewise-dropped-messages"] == "2"
    # share 0: no history at all, documents get everything
    none = prepare(body, history_share=0)
    assert (none.kept_messages, none.history_tokens, [d["index"] for d in none.dropped_messages]) == ([0, 5], 0, [1, 2, 3, 4])
    # the request's own history_share wins over the server's
    assert prepare(request([SYSTEM, *TURNS, LAST], history_share=0.0), history_share=1.0).kept_messages == [0, 5]


def test_a_newer_turn_that_does_not_fit_drops_the_older_ones_too():
    big = {"role": "user", "content": "word " * 300}
    small = {"role": "user", "content": "hi"}
    msgs = [small, {"role": "assistant", "content": "hello"}, big, {"role": "assistant", "content": "ok"}, LAST]
    plan = prepare(request(msgs), history_share=0.1)
    assert plan.kept_messages == [4]
    assert [(d["index"], d["reason"].startswith("its turn needs")) for d in plan.dropped_messages] == \
        [(0, False), (1, False), (2, True), (3, True)]


def test_tool_messages_stay_with_their_turn_and_after_the_last_user_message():
    call = {"role": "assistant", "content": None,
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}
    result = {"role": "tool", "tool_call_id": "c1", "content": "42"}
    msgs = [{"role": "user", "content": "old"}, call, result, {"role": "assistant", "content": "It is 42."},
            LAST, dict(call), dict(result)]
    plan = prepare(request(msgs), history_share=0)
    assert plan.kept_messages == [4, 5, 6]  # the turn in progress is kept whole
    assert [d["index"] for d in plan.dropped_messages] == [0, 1, 2, 3]  # the old turn goes whole
    assert plan.prompt_tokens == recount(plan.body)


def test_splice_keeps_image_parts_in_order():
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    content = [image, {"type": "text", "text": "What is"}, {"type": "text", "text": "the capital?"}]
    assert splice(content, "PACKED") == [image, {"type": "text", "text": "PACKED"}]
    assert splice("question", "PACKED") == "PACKED"
    plan = prepare(request([{"role": "user", "content": content}]))
    assert plan.body["messages"][0]["content"] == [image, {"type": "text", "text": plan.packed.prompt}]
    assert "  What is\n  the capital?" in plan.packed.prompt  # the text parts joined are the query
    assert plan.uncounted_parts == 1 and plan.summary()["uncounted_parts"] == 1


def test_marked_message_convention_equals_the_field():
    field = request([SYSTEM, LAST])
    options = dict(field["edgewise"])
    marked = {k: v for k, v in field.items() if k != "edgewise"}
    marked["messages"] = [SYSTEM, {"role": "user", "name": MARK, "content": json.dumps(options)}, LAST]
    a, b = prepare(field), prepare(marked)
    assert (a.convention, b.convention) == ("field", "message")
    assert a.body == b.body and a.prompt_tokens == b.prompt_tokens


def test_marked_message_alone_needs_a_known_model():
    body = {"model": "tiny-4k", "messages": [{"role": "user", "name": MARK, "content": json.dumps(DOCS)}, LAST]}
    plan = prepare(body, get_model=models)
    assert (plan.context_window, plan.tokenizer, plan.convention) == (4096, "o200k_base", "message")
    assert plan.body["messages"] == [{"role": "user", "content": plan.packed.prompt}]
    with pytest.raises(ConfigError) as info:
        prepare({**body, "model": "other"}, get_model=models)
    assert str(info.value) == ("unknown model 'other'; choose one of: tiny-4k; or add it to the models file "
                               "(--models FILE), or send edgewise.context_window (and tokenizer)")


def test_without_documents_nothing_is_planned():
    body = {"model": "x", "messages": [LAST]}
    assert prepare(body) is None
    assert extract(body) == (None, body, None)


@pytest.mark.parametrize(("body", "error", "message"), [
    ({**request([LAST]), "messages": [{"role": "user", "name": MARK, "content": "[]"}, LAST]}, InputError,
     "either in the 'edgewise' field or in a message named 'edgewise_documents', but this request has both"),
    (request([SYSTEM]), InputError, "messages must hold a user message"),
    (request([{"role": "user", "content": "  "}]), InputError, "the last user message (message 0) must have text"),
    ({**request([LAST]), "edgewise": {"documents": DOCS, "topk": 3}}, ConfigError, "unknown edgewise option 'topk'"),
    ({**request([LAST]), "edgewise": {"documents": DOCS, "model": "gpt-4o"}}, ConfigError,
     "edgewise.model is not an option of the proxy: the request's own model field names the model"),
    ({**request([LAST]), "edgewise": {"documents": "x", "context_window": 10}}, InputError,
     "edgewise.documents must be a list, but got str"),
    ({**request([LAST]), "model": None, "edgewise": {"documents": DOCS}}, InputError,
     "needs a model (to look up its context window) or edgewise.context_window"),
    ({**request([LAST]), "model": None}, None, None),
    (request([{"role": "system", "content": "rule " * 3000}, LAST]), BudgetError,
     "the context window must hold the reply and the messages always kept: 2000 - 50 (max_tokens) leaves 1950"),
    ({"model": "m", "messages": [{"role": "user", "name": MARK, "content": "not json"}, LAST]}, InputError,
     "the content of the message named 'edgewise_documents' must be JSON"),
    ({"model": "m", "messages": [{"role": "user", "name": MARK, "content": "{}"}, LAST]}, InputError,
     "edgewise must have a documents list, but its keys are []"),
    (request([LAST], history_share=1.5), InputError, "history_share must be a finite number >= 0 and <= 1, but got 1.5"),
])
def test_errors_state_the_rule(body, error, message):
    if error is None:  # no model name is fine with an explicit context window
        assert prepare(body).tokenizer == "cl100k_base"
        return
    with pytest.raises(error) as info:
        prepare(body)
    assert message in str(info.value)


def test_debug_summary_and_header():
    plan = prepare(request([SYSTEM, *TURNS, LAST], debug=True, budget=260), history_share=0)
    assert plan.documents_budget == 260  # the request's budget caps what the documents get
    summary = json.loads(plan.headers()["x-edgewise-debug"])
    assert summary == plan.summary()
    assert summary["dropped_messages"] == [1, 2, 3, 4]
    assert summary["documents"]["dropped"] == plan.dropped_documents == len(plan.packed.debug_info.dropped)
    full = plan.debug()
    assert [d["index"] for d in full["dropped_messages"]] == [1, 2, 3, 4]
    assert full["pack"] == plan.packed.debug_info.to_dict()


# -- properties --------------------------------------------------------------------------------

words = st.text(alphabet=st.sampled_from("abc xyz.\n"), min_size=0, max_size=120)
message = st.fixed_dictionaries({"role": st.sampled_from(["system", "user", "assistant", "developer"]), "content": words})


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(history=st.lists(message, max_size=8), question=words.filter(str.strip), window=st.integers(300, 3000),
       reply=st.integers(1, 150), share=st.floats(0, 1), docs=st.lists(words, max_size=6))
def test_packed_request_fits_keeps_the_fixed_messages_and_reports_every_drop(history, question, window, reply, share, docs):
    msgs = [*history, {"role": "user", "content": question}]
    body = {"model": "m", "max_tokens": reply, "messages": msgs,
            "edgewise": {"documents": docs, "context_window": window, "tokenizer": "cl100k_base", "layout": "layered"}}
    try:
        plan = prepare(body, history_share=share)
    except BudgetError as e:  # the fixed messages or the layout's frame do not fit: said, not forwarded
        event("budget error")
        assert "budget must hold the fixed layers" in str(e) or "the context window must hold" in str(e)
        return
    event("packed")
    assert plan.prompt_tokens == recount(plan.body) <= window - reply
    last = len(msgs) - 1
    fixed = {i for i, m in enumerate(msgs) if m["role"] in ("system", "developer")} | {last}
    assert fixed <= set(plan.kept_messages)
    dropped = [d["index"] for d in plan.dropped_messages]
    assert sorted(plan.kept_messages + dropped) == list(range(len(msgs)))  # every message kept or reported
    kept_history = [i for i in plan.kept_messages if i not in fixed]
    older = [i for i in range(last) if i not in fixed]
    assert kept_history == older[len(older) - len(kept_history):]  # the newest turns, no gaps
    assert plan.body["messages"] == [msgs[i] for i in plan.kept_messages[:-1]] + [{"role": "user", "content": plan.packed.prompt}]
    info = plan.packed.debug_info
    assert len(info.placed) + len(info.summarized) + len(info.truncated) + len(info.dropped) == len(
        {c["id"] for c in info.chunks if c["merged_into"] is None})


def test_the_model_registry_sizes_the_conversation():
    body = {"model": "gpt-4o-2024-08-06", "max_completion_tokens": 1000, "messages": [SYSTEM, LAST],
            "edgewise": {"documents": DOCS}}
    plan = prepare(body)
    assert (plan.context_window, plan.tokenizer, plan.reply_tokens, plan.prompt_budget) == (128000, "o200k_base", 1000, 127000)
    assert plan.packed.debug_info.tokenizer == "o200k_base"
    assert plan.dropped_documents == 0
    with pytest.raises(ConfigError) as info:
        prepare({**body, "model": "gpt-4o-mni"})
    assert str(info.value).startswith("unknown model 'gpt-4o-mni' (did you mean 'gpt-4o-mini'")
    assert str(info.value).endswith("; or add it to the models file (--models FILE), or send edgewise.context_window "
                                    "(and tokenizer)")
