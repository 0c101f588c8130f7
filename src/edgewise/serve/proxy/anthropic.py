"""Pack documents into an Anthropic Messages API request (``POST /v1/messages``). No HTTP.

The documents come in the same ``edgewise`` body field as for chat completions (the anthropic
client's ``extra_body``), or in a marked content block of a user message: a ``document`` block
titled ``edgewise_documents`` whose plain-text source is the JSON (a documents list, or the same
object as the field). Every typed SDK sends such a block; it is removed before forwarding.

The conversation: ``system`` (a string or a list of text blocks) is a fixed layer, forwarded as
sent; ``messages`` alternate ``user`` and ``assistant`` turns whose content is a string or a list of
blocks. The query is the text of the last user message that has text; what follows it (a tool call
and its result in progress) is always kept; earlier turns are kept newest first within
``history_share``, a turn being a user message with the assistant messages and tool results that
follow it (a ``tool_use`` block never loses its ``tool_result``). ``max_tokens`` is reserved for the
reply. Tool definitions, ``tool_use``, ``tool_result``, images and every other block are forwarded
untouched; the packed prompt takes the place of the query message's first text block.

Counting: Claude's tokenizer is not published. The documents are counted by a stand-in tokenizer
(``cl100k_base``, or the request's ``tokenizer``) times :data:`MARGIN`, a safety margin: their
Claude tokens are held to be at most that many. The rest of the request (system, tools, the turns
kept, the query) is counted once, either exactly by the upstream (``/v1/messages/count_tokens``, one
call: :meth:`Draft.count_body` is what it counts) or, when the upstream has no such endpoint, by the
same estimate. So planning is two steps: :func:`draft` (no upstream call) and
:meth:`Draft.finish` with the conversation's count, or ``None`` for the estimate::

    prompt budget = context_window - max_tokens (else reply_tokens, else 512)
    conversation  = count_tokens(system, tools, kept turns, the query message as sent)
                    | ceil(MARGIN * stand-in tokens of the same, by the chat rule)
    documents     = prompt budget - conversation   (Claude tokens; the packer gets
                    question tokens + floor(documents / MARGIN) stand-in tokens, capped by ``budget``)

A model the registry does not know whose name starts with ``claude`` has a window of
:data:`CLAUDE_WINDOW` tokens; any other needs ``context_window`` (or ``--models FILE``).

>>> d = draft({"model": "claude-sonnet-4-5", "max_tokens": 100, "system": "Be terse.",
...            "messages": [{"role": "user", "content": "Capital of France?"}],
...            "edgewise": {"documents": ["Paris is the capital of France."], "layout": "layered"}})
>>> d.count_body()
{'model': 'claude-sonnet-4-5', 'system': 'Be terse.', 'messages': [{'role': 'user', 'content': 'Capital of France?'}]}
>>> plan = d.finish(None)
>>> plan.counter, plan.prompt_budget, plan.body["system"], plan.body["messages"][0]["content"][:8]
('estimate', 199900, 'Be terse.', '[System]')
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ...checks import check_bool
from ...errors import BudgetError, InputError
from .chatformat import message_tokens, text_of
from .conversation import FIELD, MARK, Shape, _settings, extract, splice, summary_headers
from .rawjson import dumps

MARGIN = 1.25  # Claude tokens per stand-in (cl100k_base) token, at most: the documents' safety margin
CLAUDE_WINDOW = 200_000  # the context window of Anthropic's Claude models (a larger one is a beta opt-in)
COUNT_FIELDS = ("model", "system", "tools", "tool_choice", "thinking", "output_config")  # what count_tokens takes
ROLES = ("user", "assistant")


def _turns(rest: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    messages = rest.get("messages")
    if not isinstance(messages, list) or not all(isinstance(m, Mapping) for m in messages):
        raise InputError("messages must be a list of message objects")
    for i, m in enumerate(messages):
        if m.get("role") not in ROLES:
            raise InputError(f"a message's role must be user or assistant, but message {i} has {m.get('role')!r} "
                             "(the system prompt is the top-level system field)")
    return messages


MESSAGES = Shape("messages", "messages", "message", ("max_tokens",), _turns,
                 lambda rest, count, fmt: 0, lambda rest, out: {**rest, "messages": out})


# -- reading the request -------------------------------------------------------------------------

def _is_mark(block: Any) -> bool:
    return isinstance(block, Mapping) and block.get("type") == "document" and block.get("title") == MARK


def extract_messages(body: Mapping[str, Any]) -> tuple[dict[str, Any] | None, dict[str, Any], str | None]:
    """``(edgewise options, body without them, convention)`` for a Messages request: the ``edgewise``
    field (``"field"``) or the marked document block (``"block"``); ``(None, body, None)`` without documents."""
    messages = body.get("messages")
    marked = [(i, j) for i, m in enumerate(messages) if isinstance(m, Mapping) and isinstance(m.get("content"), list)
              for j, block in enumerate(m["content"]) if _is_mark(block)] if isinstance(messages, list) else []
    if not marked:
        return extract(body)
    if FIELD in body:
        raise InputError(f"documents must come either in the {FIELD!r} field or in a document block titled {MARK!r}, "
                         f"but this request has both (message {marked[0][0]})")
    if len(marked) > 1:
        raise InputError(f"at most one document block may be titled {MARK!r}, but got {len(marked)} "
                         f"(messages {[i for i, _ in marked]})")
    assert isinstance(messages, list)
    i, j = marked[0]
    if messages[i].get("role") != "user":
        raise InputError(f"the document block titled {MARK!r} must be in a user message, but message {i} is "
                         f"{messages[i].get('role')!r}")
    options = _block_options(messages[i]["content"][j])
    content = [b for k, b in enumerate(messages[i]["content"]) if k != j]
    out = [m if k != i else {**m, "content": content} for k, m in enumerate(messages) if k != i or content]
    opts, rest, _ = extract({**body, FIELD: options, "messages": out})
    return opts, rest, "block"


def _block_options(block: Mapping[str, Any]) -> Any:
    """The marked block's JSON, read by the rules of the ``edgewise`` field."""
    from ..errors import ApiError
    from .readbody import read_options

    source = block.get("source")
    if not isinstance(source, Mapping) or source.get("type") != "text" or not isinstance(source.get("data"), str):
        raise InputError(f"the document block titled {MARK!r} must have a text source ({{\"type\": \"text\", "
                         f"\"media_type\": \"text/plain\", \"data\": \"<JSON>\"}}), but got {dumps(source)[:80]}")
    try:
        return read_options(source["data"])
    except ApiError as e:
        e.message = e.message.replace(f"the message named {MARK!r}", f"the document block titled {MARK!r}")
        e.detail = e.message
        raise
    except ValueError as e:
        raise InputError(f"the source of the document block titled {MARK!r} must be JSON (a documents list or an "
                         f"object with documents), but it does not parse: {e}") from None


# -- what a message costs ------------------------------------------------------------------------

def content_text(content: Any) -> tuple[str, int]:
    """The text of a message's content as the estimate counts it, and how many blocks it does not
    count (images, files and PDFs: their cost is the provider's). Text, thinking, a tool call's name
    and input, a tool result's content and a plain-text document count as text; any other block as
    its compact JSON.

    >>> content_text([{"type": "text", "text": "Hi"}, {"type": "tool_use", "id": "t1", "name": "f", "input": {"a": 1}},
    ...               {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}}])
    ('Hi\\nf {"a":1}', 1)
    """
    if content is None:
        return "", 0
    if isinstance(content, str):
        return content, 0
    if not isinstance(content, list):
        raise InputError(f"message content must be a string or a list of content blocks, but got {type(content).__name__}")
    texts: list[str] = []
    uncounted = 0
    for block in content:
        text, n = _block_text(block)
        uncounted += n
        if text:
            texts.append(text)
    return "\n".join(texts), uncounted


def _block_text(block: Any) -> tuple[str, int]:
    if not isinstance(block, Mapping):
        return dumps(block, compact=True, allow_nan=True), 0
    kind = block.get("type")
    if kind == "text" and isinstance(block.get("text"), str):
        return block["text"], 0
    if kind == "thinking" and isinstance(block.get("thinking"), str):
        return block["thinking"], 0
    if kind in ("tool_use", "server_tool_use"):
        return f"{block.get('name', '')} {dumps(block.get('input', {}), compact=True, allow_nan=True)}", 0
    if kind == "tool_result":
        return content_text(block.get("content"))
    source = block.get("source")
    if kind == "document" and isinstance(source, Mapping) and source.get("type") == "text":
        return str(source.get("data", "")), 0
    if kind == "document" and isinstance(source, Mapping) and source.get("type") == "content":
        return content_text(source.get("content"))
    if kind in ("image", "document"):
        return "", 1
    return dumps(block, compact=True, allow_nan=True), 0


def message_cost(message: Mapping[str, Any], count: Callable[[str], int], fmt: Any) -> int:
    """Stand-in tokens of one message by the chat rule, its content read by :func:`content_text`."""
    return message_tokens({**message, "content": content_text(message.get("content"))[0]}, count, fmt)


def _system_text(system: Any) -> str:
    if system is None or isinstance(system, str):
        return system or ""
    if isinstance(system, list) and all(isinstance(b, Mapping) and b.get("type") == "text"
                                        and isinstance(b.get("text"), str) for b in system):
        return "\n".join(b["text"] for b in system)
    raise InputError(f"system must be a string or a list of text blocks, but got {dumps(system, allow_nan=True)[:80]}")


def _without_text(message: Mapping[str, Any]) -> dict[str, Any]:
    """The query message less its text (what stays of it beside the packed prompt)."""
    content = message.get("content")
    kept = [b for b in content if not (isinstance(b, Mapping) and b.get("type") == "text")] \
        if isinstance(content, list) else None
    return {**message, "content": kept}


def _opens_turn(message: Mapping[str, Any]) -> bool:
    """A user message that answers no tool call (a tool result belongs to the turn of its call)."""
    content = message.get("content")
    return message.get("role") == "user" and not (isinstance(content, list) and any(
        isinstance(b, Mapping) and b.get("type") == "tool_result" for b in content))


# -- the plan ------------------------------------------------------------------------------------

def draft(body: Mapping[str, Any], *, history_share: float = 0.5, packer: Any = None,
          get_model: Callable[[str], Any] | None = None, check: Callable[[list, dict], None] | None = None,
          resolve: Callable[[dict], dict] | None = None) -> Draft | None:
    """The first step: the settings, the turns kept (by the estimate) and what the upstream is asked
    to count; ``None`` for a request without documents. The keywords are
    :func:`~edgewise.serve.proxy.conversation.prepare`'s."""
    opts, rest, convention = extract_messages(body)
    if opts is None:
        return None
    assert convention is not None
    if check is not None:
        check(opts["documents"], opts)
    messages = _turns(rest)
    with_text = [i for i, m in enumerate(messages) if m.get("role") == "user" and text_of(m.get("content"))[0].strip()]
    if not with_text:
        raise InputError("messages must hold a user message with text: its text is the query the documents are packed for")
    last = with_text[-1]
    model = rest.get("model") if isinstance(rest.get("model"), str) else None
    if "context_window" not in opts and model is not None and model.startswith("claude") and not _known(model):
        opts = {**opts, "context_window": CLAUDE_WINDOW}
    s = _settings(rest, opts, history_share, packer, get_model, resolve, MESSAGES)
    system = _system_text(rest.get("system"))
    fixed = s.chat_format.reply + message_cost(_without_text(messages[last]), s.count, s.chat_format)
    fixed += sum(message_cost(m, s.count, s.chat_format) for m in messages[last + 1:])
    fixed += message_tokens({"role": "system", "content": system}, s.count, s.chat_format) if system else 0
    fixed += s.count(dumps(rest["tools"], compact=True, allow_nan=True)) if rest.get("tools") else 0
    history_budget = int(s.share * max(s.window - s.reply - _claude(fixed), 0))
    kept, dropped, history = _trim(messages, last, lambda m: message_cost(m, s.count, s.chat_format), history_budget)
    return Draft(rest, opts, convention, s, messages, last, sorted({*kept, *range(last, len(messages))}), dropped,
                 fixed, history, history_budget, check_bool("debug", opts.get("debug", False)))


def _known(model: str) -> bool:
    from ...catalog import resolve_name

    return resolve_name(model) is not None


def _claude(stand_in_tokens: int) -> int:
    """Claude tokens held for ``stand_in_tokens`` (the margin, rounded up)."""
    return math.ceil(stand_in_tokens * MARGIN)


def _trim(messages: list[Mapping[str, Any]], last: int, cost: Callable[[Mapping[str, Any]], int],
          budget: int) -> tuple[list[int], list[dict[str, Any]], int]:
    """Earlier turns kept newest first while their estimate (Claude tokens) fits in ``budget``; the
    first that does not is dropped with every older one. ``(kept, dropped, stand-in tokens kept)``."""
    turns: list[list[int]] = []
    for i in range(last):
        if not turns or _opens_turn(messages[i]):
            turns.append([])
        turns[-1].append(i)
    kept: list[int] = []
    dropped: list[dict[str, Any]] = []
    used = tokens = 0
    full = False
    for turn in reversed(turns):
        n = sum(cost(messages[i]) for i in turn)
        if not full and used + _claude(n) <= budget:
            kept += turn
            used += _claude(n)
            tokens += n
            continue
        reason = "an earlier turn than one that did not fit" if full else \
            f"its turn needs about {_claude(n)} tokens, {budget - used} of the history budget {budget} left"
        full = True
        dropped += [{"index": i, "role": messages[i].get("role"), "reason": reason} for i in turn]
    return sorted(kept), sorted(dropped, key=lambda d: d["index"]), tokens


@dataclass
class Draft:
    """A Messages request planned up to its documents: what is kept, and what the upstream counts."""

    rest: dict[str, Any]
    opts: dict[str, Any]
    convention: str
    settings: Any  # the request's window, reply, tokenizer, pack options and packer
    messages: list[Mapping[str, Any]]
    last: int  # the query message
    keep: list[int]
    dropped_messages: list[dict[str, Any]]
    fixed_tokens: int  # stand-in tokens, by the chat rule: system, tools, the query's frame, what follows it
    history_tokens: int  # stand-in tokens of the earlier turns kept
    history_budget: int  # Claude tokens (estimated)
    want_debug: bool

    @property
    def question(self) -> str:
        return text_of(self.messages[self.last].get("content"))[0]

    def count_body(self) -> dict[str, Any]:
        """What the upstream's ``count_tokens`` is asked to count: the request as it will be sent, less
        the documents (the query message as the client sent it), in the fields that endpoint takes."""
        kept = [self.messages[i] for i in self.keep]
        return {**{k: self.rest[k] for k in COUNT_FIELDS if k in self.rest}, "messages": kept}

    def finish(self, counted: int | None, reason: str | None = None) -> AnthropicPlan:
        """Pack the documents into what the conversation leaves: ``counted`` is the upstream's count
        of :meth:`count_body`, or ``None`` to estimate it (``reason``: why there is no count)."""
        s = self.settings
        question = self.question
        q_tokens = s.count(question)
        budget = s.window - s.reply
        if counted is None:
            conversation, counter = _claude(self.fixed_tokens + self.history_tokens + q_tokens), "estimate"
        else:
            conversation, counter = counted, "count_tokens"
        room = budget - conversation
        if room < 1:
            raise BudgetError(f"the context window must hold the reply and the conversation: {s.window} - {s.reply} "
                              f"({s.reply_from}) leaves {budget} tokens, but the system prompt, tools and the turns kept "
                              f"take {conversation} ({counter}); raise context_window or lower max_tokens")
        pack_budget = q_tokens + math.floor(room / MARGIN)
        if s.pack_opts.get("budget") is not None:
            pack_budget = min(pack_budget, s.pack_opts["budget"])
        packed = s.pack(question, self.opts["documents"], pack_budget)
        out = [dict(self.messages[i]) for i in self.keep]
        spliced = self.keep.index(self.last)
        out[spliced]["content"] = splice(self.messages[self.last].get("content"), packed.prompt)
        added = max(packed.debug_info.prompt_tokens - q_tokens, 0)
        return AnthropicPlan({**self.rest, "messages": out}, packed, self, counter, reason, conversation, room,
                             pack_budget, conversation + _claude(added))


@dataclass
class AnthropicPlan:
    """A packed Messages request: the body to forward and the arithmetic (:meth:`headers`, :meth:`debug`)."""

    body: dict[str, Any]
    packed: Any  # edgewise.packing.packer.Packed
    draft: Draft
    counter: str  # count_tokens | estimate
    counter_reason: str | None
    conversation_tokens: int  # Claude tokens of everything but the documents (exact with count_tokens)
    room: int  # Claude tokens left for the documents
    pack_budget: int  # the packer's budget, in stand-in tokens
    prompt_tokens: int  # Claude tokens of the forwarded prompt: the conversation plus the documents' estimate
    dropped_documents: int = field(init=False)

    def __post_init__(self) -> None:
        self.dropped_documents = len(self.packed.debug_info.dropped)

    @property
    def want_debug(self) -> bool:
        return self.draft.want_debug

    @property
    def prompt_budget(self) -> int:
        return self.draft.settings.window - self.draft.settings.reply

    def headers(self) -> dict[str, str]:
        """The packing summary as ``x-edgewise-*`` response headers (ASCII), with the counter used."""
        extra = {"x-edgewise-counter": self.counter, "x-edgewise-stand-in": f"{self.draft.settings.tokenizer} x{MARGIN:g}"}
        if self.counter_reason:
            extra["x-edgewise-counter-reason"] = self.counter_reason.encode("ascii", "replace").decode()
        return summary_headers(self, self.pack_budget, len(self.draft.dropped_messages), extra)

    def summary(self) -> dict[str, Any]:
        """The budget arithmetic, bounded in size (no chunk records): what ``x-edgewise-debug`` carries.
        Its numbers are Claude tokens, but those under ``stand_in``: the stand-in tokenizer's."""
        d, s, info = self.draft, self.draft.settings, self.packed.debug_info
        return {
            "convention": d.convention, "model": s.model, "counter": self.counter,
            "counter_reason": self.counter_reason, "context_window": s.window, "reply_tokens": s.reply,
            "reply_from": s.reply_from, "prompt_budget": self.prompt_budget,
            "conversation_tokens": self.conversation_tokens, "history_budget": d.history_budget,
            "documents_budget": self.room, "prompt_tokens": self.prompt_tokens, "kept_messages": d.keep,
            "dropped_messages": [m["index"] for m in d.dropped_messages],
            "documents": {"placed": len(info.placed), "summarized": len(info.summarized),
                          "truncated": len(info.truncated), "dropped": self.dropped_documents},
            "uncounted_parts": sum(content_text(m.get("content"))[1] for m in self.body["messages"]),
            "stand_in": {"tokenizer": s.tokenizer, "margin": MARGIN, "chat_format": s.chat_format.__dict__,
                         "fixed_tokens": d.fixed_tokens, "history_tokens": d.history_tokens,
                         "question_tokens": s.count(d.question), "pack_budget": self.pack_budget,
                         "prompt_tokens": info.prompt_tokens},
        }

    def debug(self) -> dict[str, Any]:
        """Everything: the summary, each dropped message with its reason, and the pack's full debug info."""
        return {**self.summary(), "dropped_messages": self.draft.dropped_messages, "pack": self.packed.debug_info.to_dict()}

