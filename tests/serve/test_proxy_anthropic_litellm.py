"""Anthropic's Messages API through the proxy, called by LiteLLM's ``anthropic/`` route.

LiteLLM takes an OpenAI-shaped call, writes Anthropic's request (the system prompt as text blocks,
tools as Anthropic tools, ``tool_choice="required"`` as ``{"type": "any"}``) and reads the reply or
the event stream back. ``api_base`` is edgewise, the documents ride as the ``edgewise`` keyword
(LiteLLM sends unknown keywords as body fields), and the loopback fake of
``tests/anthropic_upstream.py`` records what arrived.
"""

from __future__ import annotations

import json
import math
import os

import pytest

from edgewise import pack
from edgewise.serve.proxy.anthropic import MARGIN
from edgewise.tokens.tokenizers import get_tokenizer

from ..anthropic_upstream import ANSWER, MODEL, FakeAnthropic, input_tokens, start_proxy
from ..servers import stop

# slow: LiteLLM takes seconds to import; its models' pydantic warnings are its own
pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore:.*ReadOnly. qualifier:UserWarning")]
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # read at import: its price list is not fetched
litellm = pytest.importorskip("litellm", reason="needs litellm: pip install -e '.[dev]'")
litellm.suppress_debug_info = True

TOK = get_tokenizer("cl100k_base")
DOCS = [{"id": "paris", "text": "Paris is the capital of France.", "score": 0.9},
        {"id": "loire", "text": "The Loire is the longest river of France. " * 150, "score": 0.05}]
OPTIONS = {"documents": DOCS, "context_window": 1500}
QUESTION = "What is the capital of France?"
SYSTEM = "Answer in one sentence."


@pytest.fixture(scope="module")
def upstream():
    with FakeAnthropic() as fake:
        yield fake


@pytest.fixture(scope="module")
def proxy(upstream, tmp_path_factory):
    proc, base = start_proxy(tmp_path_factory.mktemp("proxy"), upstream.url)
    yield base
    stop(proc)


def call(proxy: str, **kwargs):
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}]
    return litellm.completion(**{"model": "anthropic/" + MODEL, "api_base": proxy, "api_key": "k", "max_tokens": 300,
                                 "messages": messages, "edgewise": OPTIONS, "num_retries": 0, **kwargs})


def packed_body(upstream: FakeAnthropic, **extra) -> dict:
    """The request the upstream should have got: LiteLLM's translation, the documents packed into
    what the counted conversation left."""
    asked = upstream.requests("/v1/messages/count_tokens")[-1]
    assert asked == {"model": MODEL, "system": [{"type": "text", "text": SYSTEM}], **extra.get("counted", {}),
                     "messages": [{"role": "user", "content": [{"type": "text", "text": QUESTION}]}]}
    budget = TOK.count(QUESTION) + math.floor((1500 - 300 - input_tokens(asked)) / MARGIN)
    prompt = pack(QUESTION, DOCS, budget=budget, tokenizer="cl100k_base").prompt
    return {"model": MODEL, "max_tokens": 300, "system": [{"type": "text", "text": SYSTEM}],
            "messages": [{"role": "user", "content": [{"type": "text", "text": prompt}]}], **extra.get("sent", {})}


def test_a_completion_through_litellm_is_packed(proxy, upstream):
    reply = call(proxy)
    assert reply.choices[0].message.content == "".join(ANSWER)
    assert upstream.requests("/v1/messages")[-1] == packed_body(upstream)
    headers = reply._hidden_params["additional_headers"]  # LiteLLM keeps the provider's headers, prefixed
    assert (headers["llm_provider-x-edgewise-counter"], headers["llm_provider-x-edgewise-budget"]) == \
        ("count_tokens", str(1500 - 300))


def test_a_streamed_completion_through_litellm_is_packed(proxy, upstream):
    pieces = [chunk.choices[0].delta.content for chunk in call(proxy, stream=True)]
    assert "".join(p for p in pieces if p) == "".join(ANSWER)
    assert upstream.requests("/v1/messages")[-1] == packed_body(upstream, sent={"stream": True})


def test_a_tool_call_through_litellm(proxy, upstream):
    tools = [{"type": "function", "function": {"name": "weather", "description": "The weather in a city",
                                               "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]
    reply = call(proxy, tools=tools, tool_choice="required")
    calls = reply.choices[0].message.tool_calls
    assert [(c.function.name, json.loads(c.function.arguments)) for c in calls] == [("weather", {"city": "Paris"})]
    sent = upstream.requests("/v1/messages")[-1]
    anthropic_tools = sent["tools"]  # LiteLLM's translation, forwarded as it wrote it
    assert [(t["name"], t["input_schema"]) for t in anthropic_tools] == [("weather", tools[0]["function"]["parameters"])]
    assert sent == packed_body(upstream, sent={"tools": anthropic_tools, "tool_choice": {"type": "any"}},
                               counted={"tools": anthropic_tools, "tool_choice": {"type": "any"}})


def test_an_edgewise_error_reaches_litellm_as_anthropics(proxy, upstream):
    with pytest.raises(litellm.BadRequestError) as info:
        call(proxy, max_tokens=1490)
    assert info.value.status_code == 422
    counted = input_tokens(upstream.requests("/v1/messages/count_tokens")[-1])
    assert json.loads(str(info.value).partition("AnthropicException - ")[2]) == {"type": "error", "error": {
        "type": "invalid_request_error", "message": (
            "the context window must hold the reply and the conversation: 1500 - 1490 (max_tokens) leaves 10 tokens, "
            f"but the system prompt, tools and the turns kept take {counted} (count_tokens); raise context_window or "
            "lower max_tokens")}}
