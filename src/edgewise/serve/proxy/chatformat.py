"""The counting rule of a chat format: what one message of a chat request costs in tokens.

Per message, ``per_message + count(role) + count(content text) [+ per_name + count(name)]`` plus the
compact JSON of any other field; ``reply`` tokens prime the reply. OpenAI documents 3/1/3 for its
cl100k and o200k chat models (``openai``); Gemma's template costs 4 per message and 4 for ``<bos>``
plus the reply header (``gemma``), and renders no system message: llama.cpp's ``gemma`` chat format
(llama-cpp-python's ``--chat_format gemma``) leaves ``system`` and ``developer`` messages out of the
prompt, so under ``gemma`` they cost nothing (``drops_system``).

>>> message_tokens({"role": "user", "content": "hi"}, lambda s: len(s.split()), CHAT_FORMATS["openai"])
5
>>> message_tokens({"role": "system", "content": "Be terse."}, lambda s: len(s.split()), CHAT_FORMATS["gemma"])
0
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ...checks import check_int
from ...errors import ConfigError, InputError
from .rawjson import dumps

TEXT_PARTS = ("text", "input_text", "output_text")  # chat completions' text parts; the Responses API's
SYSTEM_ROLES = ("system", "developer")


@dataclass(frozen=True)
class ChatFormat:
    """The per-message cost rule of a chat format (see the module docstring); ``drops_system``: the
    template leaves system and developer messages out of the prompt (they cost nothing)."""

    name: str
    per_message: int
    per_name: int
    reply: int
    drops_system: bool = False


CHAT_FORMATS = {
    "openai": ChatFormat("openai", 3, 1, 3),  # OpenAI's cookbook, gpt-3.5-turbo-0613 onwards
    # <start_of_turn>role\n...<end_of_turn>\n; <bos> <start_of_turn>model\n; only user and assistant turns
    # are rendered (llama_cpp.llama_chat_format.format_gemma): a system message is left out
    "gemma": ChatFormat("gemma", 4, 0, 4, drops_system=True),
}


def chat_format(value: Any) -> ChatFormat:
    """A named rule (``openai``, ``gemma``) or ``{"per_message", "per_name", "reply"}``."""
    if isinstance(value, str):
        if value not in CHAT_FORMATS:
            raise ConfigError(f"unknown chat_format {value!r}; choose one of: {', '.join(CHAT_FORMATS)}")
        return CHAT_FORMATS[value]
    if not isinstance(value, Mapping) or set(value) != {"per_message", "per_name", "reply"}:
        raise InputError("chat_format must be a name or an object with exactly per_message, per_name and reply, "
                         f"but got {value!r}")
    n = {k: check_int(f"chat_format.{k}", value[k], minimum=0) for k in ("per_message", "per_name", "reply")}
    return ChatFormat("custom", n["per_message"], n["per_name"], n["reply"])


def text_of(content: Any) -> tuple[str, int]:
    """The text of a message's content (a string, or its text parts joined by newlines: ``text``, and the
    Responses API's ``input_text`` and ``output_text``) and how many other parts (images, audio, files)
    it has: those are not counted."""
    if content is None:
        return "", 0
    if isinstance(content, str):
        return content, 0
    if isinstance(content, list):
        texts = [p["text"] for p in content if isinstance(p, Mapping) and p.get("type") in TEXT_PARTS
                 and isinstance(p.get("text"), str)]
        return "\n".join(texts), len(content) - len(texts)
    raise InputError(f"message content must be a string or a list of parts, but got {type(content).__name__}")


def message_tokens(message: Mapping[str, Any], count: Callable[[str], int], fmt: ChatFormat) -> int:
    """Tokens one message costs by the rule: string fields counted, other fields as compact JSON;
    nothing for a system message the format's template leaves out."""
    if fmt.drops_system and message.get("role") in SYSTEM_ROLES:
        return 0
    n = fmt.per_message
    for key, value in message.items():
        if key == "content":
            n += count(text_of(value)[0])
        elif isinstance(value, str):
            n += count(value)
        elif value is not None:
            n += count(dumps(value, compact=True, allow_nan=True))
        if key == "name":
            n += fmt.per_name
    return n
