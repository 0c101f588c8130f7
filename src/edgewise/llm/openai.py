"""Any OpenAI-compatible endpoint over HTTP (standard library only): :class:`OpenAIBackend`, and the
bounds a reply is held to.

It talks to a llama.cpp server, Ollama, vLLM or OpenAI, completions or chat, decodes
deterministically (temperature 0) and retries 429, 5xx and timeouts with exponential backoff. A
reply is read up to :func:`reply_byte_limit` of the request's ``max_tokens`` and its completion
checked against ``max_tokens``, so an upstream that ignores the limit is an error, not a reply held
whole.

>>> OpenAIBackend("http://127.0.0.1:8080/v1", "m").describe()
{'backend': 'openai', 'model': 'm', 'api': 'completions', 'temperature': 0.0}
"""

from __future__ import annotations

import json
import os
import random
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from typing import Any

from ..checks import check_int
from ..errors import BackendError, ConfigError, InputError
from .protocol import Completion

RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
#: bytes of reply a completion token may take: its text as JSON, even a 40-character token written as
#: \u escapes (240 bytes), with room to spare (logprobs and other per-token fields are not asked for)
REPLY_BYTES_PER_TOKEN = 256
#: bytes of reply allowed beside the completion's text: the JSON envelope (ids, usage, timings,
#: the settings llama.cpp echoes...), whatever max_tokens is
REPLY_ENVELOPE_BYTES = 1024 * 1024
#: tokens a reply may report past max_tokens (a stop or end-of-turn token counted by some servers)
COMPLETION_TOKEN_SLACK = 16
#: characters of text a completion token may carry, at most: a longer text cannot be max_tokens tokens
MAX_CHARS_PER_TOKEN = 64
ERROR_DETAIL_BYTES = 4096  # of an error reply: what the message quotes (300 characters) and more
_READ_PIECE = 64 * 1024


def reply_byte_limit(max_tokens: int) -> int:
    """The most bytes a reply to a request for ``max_tokens`` tokens is read for.

    >>> reply_byte_limit(256)
    1114112
    """
    return REPLY_ENVELOPE_BYTES + REPLY_BYTES_PER_TOKEN * max(0, max_tokens)


def read_bounded(resp: Any, limit: int, url: str) -> bytes:
    """The body of ``resp`` read piece by piece; a :class:`BackendError` naming the limit and ``url``
    as soon as it is past ``limit`` bytes (or declares a length past it), never read further."""
    length = resp.headers.get("Content-Length", "") if getattr(resp, "headers", None) is not None else ""
    if length.strip().isdigit() and int(length) > limit:
        raise BackendError(_too_large(url, limit, f"declares {int(length)} bytes (Content-Length)"))
    data = bytearray()
    while True:
        piece = resp.read(min(_READ_PIECE, limit + 1 - len(data)))
        if not piece:
            return bytes(data)
        data += piece
        if len(data) > limit:
            raise BackendError(_too_large(url, limit, "sent more"))


def _too_large(url: str, limit: int, what: str) -> str:
    return (f"{url} answered with a reply over the limit of {limit} bytes: it {what}. The limit follows from "
            f"max_tokens ({REPLY_ENVELOPE_BYTES} bytes of envelope + {REPLY_BYTES_PER_TOKEN} bytes a token); "
            "a reply that large means the upstream did not keep to max_tokens")


class OpenAIBackend:
    """An OpenAI-compatible endpoint over HTTP (standard library only).

    ``api="completions"`` posts the prompt to ``/completions``; ``api="chat"`` sends it as one user
    message to ``/chat/completions``. The key is read from the environment variable ``api_key_env``
    (none is sent when it is unset, as local servers expect). Failed requests are retried
    ``retries`` times on 429, 5xx, connection errors and timeouts, waiting ``backoff * 2**attempt``
    seconds (or the server's ``Retry-After``), with jitter, capped at ``max_backoff``.

    A reply is read piece by piece up to :func:`reply_byte_limit` of the request's ``max_tokens``
    (:data:`REPLY_ENVELOPE_BYTES` plus :data:`REPLY_BYTES_PER_TOKEN` a token) and refused past it, and
    its completion must be within ``max_tokens`` (:data:`COMPLETION_TOKEN_SLACK` tokens of slack, by
    ``usage.completion_tokens``, else by the text's length): an upstream that ignores ``max_tokens``
    is a :class:`~edgewise.errors.BackendError` naming the limit, not a reply held whole. Neither is
    retried.
    """

    name = "openai"

    def __init__(self, base_url: str = "http://127.0.0.1:8080/v1", model: str = "default", *,
                 api: str = "completions", api_key_env: str = "OPENAI_API_KEY", timeout: float = 120.0,
                 retries: int = 5, backoff: float = 1.0, max_backoff: float = 30.0, concurrency: int = 4,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        if api not in ("completions", "chat"):
            raise ConfigError(f"api must be 'completions' or 'chat', but got {api!r}")
        if not base_url.startswith(("http://", "https://")):
            raise InputError(f"base_url must start with http:// or https://, but got {base_url!r}")
        for label, value in (("retries", retries), ("concurrency", concurrency)):
            check_int(label, value, minimum=0 if label == "retries" else 1)
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api = api
        self.api_key_env = api_key_env
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.concurrency = concurrency
        self._sleep = sleep

    def describe(self) -> dict[str, Any]:
        return {"backend": "openai", "model": self.model, "api": self.api, "temperature": 0.0}

    def _request(self, prompt: str, max_tokens: int, stop: Sequence[str]) -> tuple[str, dict[str, Any]]:
        body: dict[str, Any] = {"model": self.model, "temperature": 0.0, "max_tokens": max_tokens}
        if stop:
            body["stop"] = list(stop)
        if self.api == "chat":
            body["messages"] = [{"role": "user", "content": prompt}]
            return f"{self.base_url}/chat/completions", body
        body["prompt"] = prompt
        return f"{self.base_url}/completions", body

    def complete(self, prompt: str, *, max_tokens: int, stop: Sequence[str]) -> Completion:
        url, body = self._request(prompt, max_tokens, stop)
        headers = {"Content-Type": "application/json"}
        key = os.environ.get(self.api_key_env)
        if key:
            headers["Authorization"] = f"Bearer {key}"
        data = json.dumps(body).encode()
        start = time.perf_counter()
        last = ""
        for attempt in range(self.retries + 1):
            wait = None
            try:
                req = urllib.request.Request(url, data=data, headers=headers, method="POST")
                with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                    payload = json.loads(read_bounded(resp, reply_byte_limit(max_tokens), url).decode("utf-8"))
                return self._completion(payload, time.perf_counter() - start, attempt + 1, max_tokens, url)
            except urllib.error.HTTPError as exc:
                try:
                    detail = exc.read(ERROR_DETAIL_BYTES).decode("utf-8", "replace")[:300]
                finally:
                    exc.close()
                if exc.code not in RETRY_STATUS:
                    raise BackendError(f"{url} answered HTTP {exc.code}: {detail}") from None
                last = f"HTTP {exc.code}: {detail}"
                wait = _retry_after(exc.headers.get("Retry-After"))
            except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
                reason = getattr(exc, "reason", exc)
                last = f"{type(reason).__name__}: {reason}"
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                raise BackendError(f"{url} did not answer with JSON: {exc}") from None
            if attempt < self.retries:
                delay = wait if wait is not None else self.backoff * 2**attempt * (1 + 0.1 * random.random())
                self._sleep(min(delay, self.max_backoff))
        raise BackendError(
            f"{url} failed after {self.retries + 1} attempts (last: {last}); check that the server is running "
            "and --base-url is right"
        )

    def _completion(self, payload: dict[str, Any], seconds: float, attempts: int, max_tokens: int | None = None,
                    url: str = "") -> Completion:
        try:
            choice = payload["choices"][0]
            text = choice["message"]["content"] if self.api == "chat" else choice["text"]
        except (KeyError, IndexError, TypeError):
            raise BackendError(f"{self.base_url} answered without choices[0]: {json.dumps(payload)[:300]}") from None
        usage = payload.get("usage") if isinstance(payload.get("usage"), dict) else {}
        text = text or ""
        if max_tokens is not None:
            _check_length(url or self.base_url, text, usage.get("completion_tokens"), max_tokens)
        return Completion(text, usage.get("prompt_tokens"), usage.get("completion_tokens"), seconds, attempts)


def _check_length(url: str, text: Any, completion_tokens: Any, max_tokens: int) -> None:
    """A :class:`BackendError` when the reply is longer than ``max_tokens`` allows: its own count
    (``usage.completion_tokens``) past ``max_tokens + COMPLETION_TOKEN_SLACK``, or, without one, a
    text longer than ``MAX_CHARS_PER_TOKEN`` characters a token could make."""
    allowed = max_tokens + COMPLETION_TOKEN_SLACK
    if isinstance(completion_tokens, int) and not isinstance(completion_tokens, bool):
        if completion_tokens > allowed:
            raise BackendError(f"{url} answered with {completion_tokens} completion tokens (usage.completion_tokens), "
                               f"but max_tokens was {max_tokens} (at most {allowed} are taken): the upstream did not "
                               "keep to max_tokens")
        return
    if isinstance(text, str) and len(text) > MAX_CHARS_PER_TOKEN * allowed:
        raise BackendError(f"{url} answered with {len(text)} characters of text, more than {max_tokens} tokens can "
                           f"hold (at most {MAX_CHARS_PER_TOKEN} characters a token, {allowed} tokens): the upstream "
                           "did not keep to max_tokens")


def _retry_after(value: str | None) -> float | None:
    try:
        return max(0.0, float(value)) if value else None
    except ValueError:
        return None
