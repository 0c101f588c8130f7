"""Pack documents into an OpenAI Responses API request (``POST /v1/responses``). No HTTP.

The documents come in the same ``edgewise`` body field as for chat completions. The conversation
is the request's ``input``: a string (one user message), or a list of items, whose messages
(``{"role", "content"}``, ``type: "message"`` or not) are counted and kept like chat messages, and
whose other items (``function_call``, ``function_call_output``, ``reasoning``...) belong to the turn
they follow. ``instructions`` is a fixed layer: always sent as it came, counted as a system message.
The reply is sized by ``max_output_tokens`` (else ``reply_tokens``, else 512); ``tools`` count as
their compact JSON. The packed prompt becomes the text of the last user message (its first
``input_text`` part); a string ``input`` stays a string.

A request that continues a stored conversation (``previous_response_id`` or ``conversation``) has
earlier turns the upstream adds and edgewise cannot count: it must give ``edgewise.budget``, the
tokens the packed message may take, and the budget of the whole prompt is then the client's.

>>> plan = prepare_response({"model": "m", "max_output_tokens": 20, "instructions": "Be terse.",
...                          "input": "Capital of France?",
...                          "edgewise": {"documents": ["Paris is the capital of France."], "context_window": 400,
...                                       "tokenizer": "cl100k_base", "layout": "layered"}})
>>> plan.prompt_tokens <= 400 - 20, plan.body["instructions"], plan.body["input"][:8]
(True, 'Be terse.', '[System]')
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ...errors import InputError
from .conversation import FIELD, ChatFormat, Plan, Shape, message_tokens, prepare
from .rawjson import dumps

STORED = ("previous_response_id", "conversation")  # earlier turns the upstream holds


def _items(rest: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The request's input as message-like items (a string is one user message)."""
    value = rest.get("input")
    if isinstance(value, str):
        return [{"role": "user", "content": value}]
    if not isinstance(value, list) or not all(isinstance(item, Mapping) for item in value):
        got = type(value).__name__ if value is not None else "nothing"
        raise InputError(f"input must be a string or a list of input items (objects), but got {got}")
    return value


def _fixed(rest: Mapping[str, Any], count: Callable[[str], int], fmt: ChatFormat) -> int:
    """Instructions (as a system message) and tool definitions (as compact JSON)."""
    n = 0
    instructions = rest.get("instructions")
    if instructions is not None:
        if not isinstance(instructions, str):
            raise InputError(f"instructions must be a string, but got {type(instructions).__name__}")
        n += message_tokens({"role": "system", "content": instructions}, count, fmt)
    if rest.get("tools"):
        n += count(dumps(rest["tools"], compact=True, allow_nan=True))
    return n


def _rebuild(rest: Mapping[str, Any], out: list[dict[str, Any]]) -> dict[str, Any]:
    if isinstance(rest.get("input"), str):  # one message, as the client sent it: a string
        return {**rest, "input": out[0]["content"]}
    return {**rest, "input": out}


RESPONSES = Shape("responses", "input", "input item", ("max_output_tokens",), _items, _fixed, _rebuild)


def prepare_response(body: Mapping[str, Any], **kwargs: Any) -> Plan | None:
    """:func:`~edgewise.serve.proxy.conversation.prepare` for a Responses API body (same keywords)."""
    stored = [key for key in STORED if body.get(key) is not None]
    options = body.get(FIELD)
    if stored and isinstance(options, Mapping) and options.get("budget") is None:
        raise InputError(f"a request with {stored[0]} continues a conversation the upstream stores, whose tokens "
                         f"edgewise cannot count: give {FIELD}.budget, the tokens the packed message may take")
    return prepare(body, shape=RESPONSES, **kwargs)
