"""Pack documents into a chat conversation: the budget, the earlier turns kept, the splice. No HTTP.

A chat request (OpenAI ``/v1/chat/completions`` shape) carries its documents in one of two ways:

- the ``edgewise`` body field: ``{"documents": [...], ...pack options, ...proxy options}`` (what the
  openai client's ``extra_body`` sends);
- a marked message: ``{"role": "user", "name": "edgewise_documents", "content": "<JSON>"}`` whose
  content is a JSON array of documents or the same object as the field. Every client can send it:
  ``name`` is a standard message field, so typed SDKs that refuse unknown body fields accept it.
  The marked message is removed; it is not a turn of the conversation.

The budget (the counting rule, ``ChatFormat``): the forwarded prompt costs, per message,
``per_message + count(role) + count(content text) [+ per_name + count(name)]`` plus the JSON of any
other field (``tool_calls``...), plus ``reply`` tokens priming the reply, plus the JSON of ``tools``.
OpenAI documents 3/1/3 for cl100k and o200k chat models (``openai``); Gemma's template costs 4 per
message and 4 for ``<bos>`` plus the reply header, and leaves system messages out (``gemma``,
llama.cpp's ``gemma`` chat format). The documents get::

    context_window - reply (max_completion_tokens | max_tokens | reply_tokens)
      - the messages always kept (system/developer, the last user message's frame, what follows it)
      - the earlier turns kept (newest first, within history_share of what is left)

The splice: the packed prompt (the layout's instructions, the documents and the last user message's
text as the question, where the layout puts it) becomes the text of the last user message; every
other message is forwarded as sent (image parts of the last message stay, after the text).

>>> plan = prepare({"model": "m", "max_tokens": 20, "messages": [{"role": "user", "content": "Capital of France?"}],
...                 "edgewise": {"documents": ["Paris is the capital of France."], "context_window": 400,
...                              "tokenizer": "cl100k_base", "layout": "layered"}})
>>> plan.prompt_tokens <= 400 - 20, plan.dropped_documents, plan.body["messages"][0]["content"][:8]
(True, 0, '[System]')
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ...checks import check_bool, check_int, check_number
from ...errors import BudgetError, ConfigError, InputError
from ...options import DEFAULT_TOKENIZER, PackOptions
from .chatformat import SYSTEM_ROLES, TEXT_PARTS, ChatFormat, chat_format, message_tokens, text_of
from .rawjson import dumps

FIELD = "edgewise"
MARK = "edgewise_documents"
DEFAULT_REPLY_TOKENS = 512
PROXY_KEYS = ("documents", "context_window", "history_share", "reply_tokens", "chat_format", "debug")
PACK_KEYS = tuple(name for name in PackOptions.names() if name != "model")  # the request's model is the model


@dataclass
class Plan:
    """A packed request: the body to forward and the arithmetic behind it (:meth:`headers`, :meth:`debug`)."""

    body: dict[str, Any]
    packed: Any  # edgewise.packing.packer.Packed
    convention: str
    model: str | None
    tokenizer: str
    chat_format: ChatFormat
    context_window: int
    reply_tokens: int
    reply_from: str
    fixed_tokens: int
    history_budget: int
    history_tokens: int
    documents_budget: int
    prompt_tokens: int
    kept_messages: list[int]
    dropped_messages: list[dict[str, Any]]
    uncounted_parts: int
    want_debug: bool = False
    dropped_documents: int = field(init=False)

    def __post_init__(self) -> None:
        self.dropped_documents = len(self.packed.debug_info.dropped)

    @property
    def prompt_budget(self) -> int:
        return self.context_window - self.reply_tokens

    def headers(self) -> dict[str, str]:
        """The packing summary as ``x-edgewise-*`` response headers (ASCII)."""
        return summary_headers(self, self.documents_budget, len(self.dropped_messages))

    def summary(self) -> dict[str, Any]:
        """The budget arithmetic, bounded in size (no chunk records): what ``x-edgewise-debug`` carries."""
        info = self.packed.debug_info
        return {
            "convention": self.convention, "model": self.model, "tokenizer": self.tokenizer,
            "chat_format": self.chat_format.__dict__, "context_window": self.context_window,
            "reply_tokens": self.reply_tokens, "reply_from": self.reply_from, "prompt_budget": self.prompt_budget,
            "fixed_tokens": self.fixed_tokens, "history_budget": self.history_budget,
            "history_tokens": self.history_tokens, "documents_budget": self.documents_budget,
            "documents_tokens": info.prompt_tokens, "prompt_tokens": self.prompt_tokens,
            "kept_messages": self.kept_messages, "dropped_messages": [m["index"] for m in self.dropped_messages],
            "documents": {"placed": len(info.placed), "summarized": len(info.summarized),
                          "truncated": len(info.truncated), "dropped": self.dropped_documents},
            "uncounted_parts": self.uncounted_parts,
        }

    def debug(self) -> dict[str, Any]:
        """Everything: the summary, each dropped message with its reason, and the pack's full debug info."""
        return {**self.summary(), "dropped_messages": self.dropped_messages,
                "pack": self.packed.debug_info.to_dict()}


# -- reading the request -------------------------------------------------------------------------

def extract(body: Mapping[str, Any]) -> tuple[dict[str, Any] | None, dict[str, Any], str | None]:
    """``(edgewise options, body without them, convention)``; ``(None, body, None)`` without documents."""
    messages = body.get("messages")
    marked = [i for i, m in enumerate(messages) if isinstance(m, Mapping) and m.get("name") == MARK] \
        if isinstance(messages, list) else []
    if FIELD not in body and not marked:
        return None, dict(body), None
    if FIELD in body and marked:
        raise InputError(f"documents must come either in the {FIELD!r} field or in a message named {MARK!r}, "
                         f"but this request has both (message {marked[0]})")
    if len(marked) > 1:
        raise InputError(f"at most one message may be named {MARK!r}, but got {len(marked)} (messages {marked})")
    rest = {k: v for k, v in body.items() if k != FIELD}
    if FIELD in body:
        opts, convention = body[FIELD], "field"
    else:
        assert isinstance(messages, list)
        opts, convention = _marked_options(messages[marked[0]]), "message"
        rest["messages"] = [m for i, m in enumerate(messages) if i != marked[0]]
    if isinstance(opts, list):
        opts = {"documents": opts}
    if not isinstance(opts, Mapping):
        raise InputError(f"{FIELD} must be an object with a documents list, but got {type(opts).__name__}")
    if "documents" not in opts:
        raise InputError(f"{FIELD} must have a documents list, but its keys are {sorted(opts)}")
    if not isinstance(opts["documents"], list):
        raise InputError(f"{FIELD}.documents must be a list, but got {type(opts['documents']).__name__}")
    if "model" in opts:
        raise ConfigError(f"{FIELD}.model is not an option of the proxy: the request's own model field names the "
                          f"model (its context window and tokenizer), or give {FIELD}.context_window and tokenizer")
    unknown = sorted(set(opts) - set(PROXY_KEYS) - set(PACK_KEYS))
    if unknown:
        raise ConfigError(f"unknown {FIELD} option {unknown[0]!r}; choose from: {', '.join((*PROXY_KEYS, *PACK_KEYS))}")
    return dict(opts), rest, convention


def _marked_options(message: Mapping[str, Any]) -> Any:
    """The marked message's content, read as the ``edgewise`` field is: a content that breaks one of
    the body's rules (a lone surrogate, a number beyond a double...) is the same 400, naming it."""
    from .readbody import read_options

    text = text_of(message.get("content"))[0]
    try:
        return read_options(text)
    except ValueError as e:
        raise InputError(f"the content of the message named {MARK!r} must be JSON (a documents list or an "
                         f"object with documents), but it does not parse: {e}") from None


# -- the plan ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Shape:
    """Where one API's request holds its conversation: the turns (``messages`` of a chat completion,
    ``input`` items of a response), the fields that size the reply, the tokens of the fields always
    sent beside the turns (tools, instructions), and how the forwarded body is rebuilt."""

    name: str
    field: str  # where the turns are, as errors name them: messages, input
    item: str  # one turn, as errors name it: message, input item
    reply_keys: tuple[str, ...]
    turns: Callable[[Mapping[str, Any]], list[Mapping[str, Any]]]
    fixed: Callable[[Mapping[str, Any], Callable[[str], int], ChatFormat], int]
    rebuild: Callable[[Mapping[str, Any], list[dict[str, Any]]], dict[str, Any]]


def _chat_turns(rest: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    messages = rest.get("messages")
    if not isinstance(messages, list) or not all(isinstance(m, Mapping) for m in messages):
        raise InputError("messages must be a list of message objects")
    return messages


CHAT = Shape("chat", "messages", "message", ("max_completion_tokens", "max_tokens"), _chat_turns,
             lambda rest, count, fmt: _tools_tokens(rest, count), lambda rest, out: {**rest, "messages": out})


def prepare(body: Mapping[str, Any], *, history_share: float = 0.5, packer: Any = None,
            get_model: Callable[[str], Any] | None = None, check: Callable[[list, dict], None] | None = None,
            resolve: Callable[[dict], dict] | None = None, shape: Shape = CHAT) -> Plan | None:
    """Pack the request's documents into its conversation; ``None`` when it carries none.

    ``check(documents, options)`` runs before any work (the server's limits on chunks and text);
    ``resolve(pack_options)`` maps the client's pack options (the server's file-path rules);
    ``shape`` says where the conversation is (:data:`CHAT`, or the Responses API's)."""
    opts, rest, convention = extract(body)
    if opts is None:
        return None
    assert convention is not None
    if check is not None:
        check(opts["documents"], opts)
    messages = shape.turns(rest)
    last = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=None)
    if last is None:
        raise InputError(f"{shape.field} must hold a user message: its text is the query the documents are packed for")
    query, _ = text_of(messages[last].get("content"))
    if not query.strip():
        raise InputError(f"the last user message ({shape.item} {last}) must have text: it is the query, but it has none")
    s = _settings(rest, opts, history_share, packer, get_model, resolve, shape)
    count = s.count
    fmt = s.chat_format

    # always kept: system/developer messages, the last user message's frame, everything after it
    frame = {k: v for k, v in messages[last].items() if k != "content"}
    fixed = fmt.reply + message_tokens(frame, count, fmt) + shape.fixed(rest, count, fmt)
    fixed += sum(message_tokens(m, count, fmt) for i, m in enumerate(messages) if i > last or m.get("role") in SYSTEM_ROLES)
    available = s.window - s.reply - fixed
    if available < 1:
        raise BudgetError(f"the context window must hold the reply and the messages always kept: {s.window} - {s.reply} "
                          f"({s.reply_from}) leaves {s.window - s.reply} tokens, but the system messages, the last user "
                          f"message's frame and what follows it need {fixed}; raise context_window or lower the reply")
    history_budget = int(s.share * available)
    kept_turns, dropped, history_tokens = _trim_history(messages, last, count, fmt, history_budget)
    documents_budget = available - history_tokens
    if s.pack_opts.get("budget") is not None:
        documents_budget = min(documents_budget, s.pack_opts["budget"])
    packed = s.pack(query, opts["documents"], documents_budget)

    keep = set(kept_turns) | {i for i, m in enumerate(messages) if i >= last or m.get("role") in SYSTEM_ROLES}
    out = [dict(messages[i]) for i in sorted(keep)]
    spliced = sorted(keep).index(last)
    out[spliced]["content"] = splice(messages[last].get("content"), packed.prompt)
    prompt_tokens = fixed + history_tokens + packed.debug_info.prompt_tokens
    uncounted = sum(text_of(m.get("content"))[1] for m in out)
    debug = check_bool("debug", opts.get("debug", False))
    return Plan(shape.rebuild(rest, out), packed, convention, s.model, s.tokenizer, fmt, s.window, s.reply, s.reply_from,
                fixed, history_budget, history_tokens, documents_budget, prompt_tokens, sorted(keep), dropped, uncounted,
                debug)


@dataclass
class _Settings:
    model: str | None
    window: int
    tokenizer: str  # as the client named it (or the model's)
    share: float
    chat_format: ChatFormat
    reply: int
    reply_from: str
    pack_opts: dict[str, Any]
    packer: Any
    count: Callable[[str], int]
    unpacked: str | None = None  # why the request's model is not the model packed for

    def pack(self, query: str, documents: Any, budget: int) -> Any:
        """Pack the documents into ``budget`` tokens; when ``order="auto"`` had no model because the
        request's is not packed for, the placement's reason says why."""
        packed = self.packer.pack(query, documents, PackOptions.from_dict({**self.pack_opts, "budget": budget}))
        placement = packed.debug_info.placement
        if self.unpacked is not None and placement is not None and placement["profile"] is None:
            placement["reason"] = f"{self.unpacked}: auto places by edges"
        return packed


def _settings(rest: Mapping[str, Any], opts: Mapping[str, Any], history_share: float, packer: Any,
              get_model: Callable[[str], Any] | None, resolve: Callable[[dict], dict] | None, shape: Shape) -> _Settings:
    """The request's window, tokenizer, share, chat format, reply and pack options, each checked."""
    model = rest.get("model") if isinstance(rest.get("model"), str) else None
    window, tokenizer = _window(opts, model, get_model)
    share = check_number("history_share", opts.get("history_share", history_share), low=0, high=1)
    fmt = chat_format(opts.get("chat_format", "openai"))
    reply, reply_from = _reply(rest, opts, shape.reply_keys)
    pack_opts = {k: v for k, v in opts.items() if k in PACK_KEYS}
    PackOptions.from_dict(pack_opts)  # the options' own messages first, before any path is resolved
    if resolve is not None:
        pack_opts = resolve(pack_opts)
    if pack_opts.get("tokenizer") is None:
        pack_opts["tokenizer"] = tokenizer
    unpacked = None if model is None else _not_packed_for(model, pack_opts["tokenizer"])
    if model is not None and unpacked is None:
        pack_opts["model"] = model  # the request's model is the model packed for: order="auto" uses its profile
    if packer is None:
        from ...packing.packer import default_packer

        packer = default_packer()
    tok = packer.tokenizer(PackOptions.from_dict(pack_opts))
    return _Settings(model, window, opts.get("tokenizer") or tokenizer, share, fmt, reply, reply_from, pack_opts,
                     packer, tok.count, unpacked)


def _not_packed_for(model: str, tokenizer: Any) -> str | None:
    """None when the packer can be told it packs for ``model``: the catalogue knows the model, and the
    budget is counted with the model's own tokenizer (a client's other ``tokenizer`` still counts);
    else why not."""
    from ...catalog import get_model, resolve_name

    if resolve_name(model) is None:
        return f"the request's model {model!r} is not in the catalogue (edgewise list), so no model is packed for"
    own = get_model(model).tokenizer
    if tokenizer != own:
        return (f"the request counts with tokenizer {tokenizer!r}, not model {model!r}'s own {own!r}, "
                "so no model is packed for")
    return None


def splice(content: Any, prompt: str) -> Any:
    """The last user message's content with its text replaced by the packed prompt (which holds it
    as the question): a string becomes the prompt; in a list of parts, one text part with the prompt
    takes the place of the first text part, and the other parts (images...) keep their order."""
    if not isinstance(content, list):
        return prompt
    out: list[Any] = []
    for part in content:
        if isinstance(part, Mapping) and part.get("type") in TEXT_PARTS:
            if not any(isinstance(p, Mapping) and p.get("type") in TEXT_PARTS for p in out):
                out.append({**part, "text": prompt})
        else:
            out.append(part)
    return out


def _window(opts: Mapping[str, Any], model: str | None, get_model: Callable[[str], Any] | None) -> tuple[int, str]:
    """The context window and the default tokenizer: ``context_window`` given, else the model registry's."""
    tokenizer = opts.get("tokenizer")
    if "context_window" in opts:
        window = check_int("context_window", opts["context_window"], minimum=1)
        if tokenizer is None and model is not None:
            spec = _lookup(model, get_model, quiet=True)
            tokenizer = spec.tokenizer if spec is not None else None
        assert window is not None
        return window, tokenizer or DEFAULT_TOKENIZER
    if model is None:
        raise InputError(f"a request with documents needs a model (to look up its context window) or "
                         f"{FIELD}.context_window, but has neither")
    spec = _lookup(model, get_model, quiet=False)
    return int(spec.context_window), tokenizer or spec.tokenizer


def _lookup(model: str, get_model: Callable[[str], Any] | None, *, quiet: bool) -> Any:
    if get_model is None:
        from ...catalog import get_model
    try:
        return get_model(model)
    except ConfigError as e:
        if quiet:
            return None
        raise ConfigError(f"{e}; or add it to the models file (--models FILE), or send {FIELD}.context_window "
                          "(and tokenizer)") from None


def _reply(body: Mapping[str, Any], opts: Mapping[str, Any], keys: tuple[str, ...]) -> tuple[int, str]:
    """Tokens reserved for the reply and where the number came from (the first of ``keys`` given)."""
    for key in keys:
        if body.get(key) is not None:
            return check_int(key, body[key], minimum=1), key  # type: ignore[return-value]
    if "reply_tokens" in opts:
        return check_int("reply_tokens", opts["reply_tokens"], minimum=0), "reply_tokens"  # type: ignore[return-value]
    return DEFAULT_REPLY_TOKENS, "default"


def _tools_tokens(body: Mapping[str, Any], count: Callable[[str], int]) -> int:
    """Tool definitions count as their compact JSON (the provider's own rendering is not published)."""
    return sum(count(dumps(body[k], compact=True, allow_nan=True))
               for k in ("tools", "functions") if body.get(k))


def _trim_history(messages: list[Any], last: int, count: Callable[[str], int], fmt: ChatFormat,
                  budget: int) -> tuple[list[int], list[dict[str, Any]], int]:
    """Earlier turns (a user message and the assistant/tool messages after it) kept newest first while
    they fit in ``budget``; a turn that does not fit is dropped with every older one (no gaps)."""
    turns: list[list[int]] = []
    for i in range(last):
        if messages[i].get("role") in SYSTEM_ROLES:
            continue
        if not turns or messages[i].get("role") == "user":
            turns.append([])
        turns[-1].append(i)
    kept: list[int] = []
    dropped: list[dict[str, Any]] = []
    used, full = 0, False
    for turn in reversed(turns):
        cost = sum(message_tokens(messages[i], count, fmt) for i in turn)
        if not full and used + cost <= budget:
            kept += turn
            used += cost
            continue
        if not full:
            reason = f"its turn needs {cost} tokens, {budget - used} of the history budget {budget} left"
        else:
            reason = "an earlier turn than one that did not fit"
        full = True
        dropped += [{"index": i, "role": messages[i].get("role"), "reason": reason} for i in turn]
    return sorted(kept), sorted(dropped, key=lambda d: d["index"]), used


def summary_headers(plan: Any, documents_budget: int, dropped_messages: int,
                    extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """A packed request's ``x-edgewise-*`` response headers (ASCII): its prompt and budget, what was
    dropped, ``extra`` (the Anthropic route's counter), and with ``want_debug`` its ``summary()``."""
    out = {
        "x-edgewise-prompt-tokens": str(plan.prompt_tokens),
        "x-edgewise-budget": str(plan.prompt_budget),
        "x-edgewise-documents-budget": str(documents_budget),
        "x-edgewise-dropped": str(plan.dropped_documents),
        "x-edgewise-dropped-messages": str(dropped_messages),
        **(extra or {}),
    }
    if plan.want_debug:
        out["x-edgewise-debug"] = json.dumps(plan.summary(), separators=(",", ":"), ensure_ascii=True, default=repr)
    return out
