"""LLM clients: the models edgewise asks for text, behind one :class:`~edgewise.llm.protocol.LLM` protocol.

- :mod:`~edgewise.llm.protocol`: what a caller needs from a model (``complete``, ``describe``) and
  the :class:`~edgewise.llm.protocol.Completion` it returns (the text and what it cost);
- :mod:`~edgewise.llm.local`: ``LocalBackend``, a GGUF model run in-process by llama.cpp (by default
  the Gemma 3 270M shipped on PyPI), loaded once per process and shared;
- :mod:`~edgewise.llm.openai`: ``OpenAIBackend``, any OpenAI-compatible endpoint over HTTP
  (completions or chat), with retries and bounded replies.

Both decode deterministically (temperature 0). They write LLM summaries
(:mod:`edgewise.prune.summaries.llm`), answer evaluation prompts (:mod:`edgewise.eval.backends`
registers them as the ``local`` and ``openai`` backends) and answer ``edgewise ask``.

>>> from edgewise.llm import OpenAIBackend
>>> OpenAIBackend("http://127.0.0.1:8080/v1", "m", api="chat").describe()
{'backend': 'openai', 'model': 'm', 'api': 'chat', 'temperature': 0.0}
"""

from .local import LocalBackend
from .openai import OpenAIBackend
from .protocol import LLM, Completion

__all__ = ["LLM", "Completion", "LocalBackend", "OpenAIBackend"]
