"""``ask``: retrieve from the store, pack within the model's context, and get the LLM's answer.

The LLM is any :mod:`edgewise.eval.backends` backend in chat mode: the bundled Gemma 3 270M in
process (``local``, extra ``eval``) or any OpenAI-compatible endpoint (``openai``). The prompt is
counted with the model's own tokenizer (the GGUF vocabulary for the local model, the registry's for
a named model) and packed into ``context − max_tokens − TEMPLATE_TOKENS``: what the model's chat
template adds around one user message (Gemma's adds 9 tokens; OpenAI's chat format 7).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..checks import check_int
from ..errors import ConfigError
from ..options import PackOptions
from ..packing.packer import Packed, Packer
from .search import Hit, cited, retrieve
from .store import Store

TEMPLATE_TOKENS = 16
DEFAULT_MAX_TOKENS = 256


@dataclass
class Answer:
    """The model's answer, the chunk ids it cites, the packed prompt and the retrieved hits."""

    question: str
    text: str
    cited: list[str]
    packed: Packed
    hits: list[Hit]
    usage: dict[str, Any] = field(default_factory=dict)

    def sources(self) -> list[dict[str, Any]]:
        """Where each cited chunk (or, when none is cited, each chunk in the prompt) came from."""
        rows = {h.row.id: h.row for h in self.hits}
        ids = self.cited or [it.id for it in self.packed.items]
        out = []
        for i in ids:
            r = rows[i]
            src = {"id": i, "source": r.source, "title": r.title, "start": r.start, "end": r.end}
            if r.page is not None:
                src["page"] = r.page
            out.append(src)
        return out

    def to_dict(self, debug: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {"question": self.question, "answer": self.text, "cited": self.cited,
                               "sources": self.sources(), "usage": self.usage}
        if debug:
            out["debug_info"] = self.packed.debug_info.to_dict()
        return out


def budget_for(context: int, max_tokens: int) -> int:
    """The prompt's share of a context window of ``context`` tokens.

    >>> budget_for(4096, 256)
    3824
    """
    check_int("context", context, minimum=1)
    check_int("max_tokens", max_tokens, minimum=1)
    room = context - max_tokens - TEMPLATE_TOKENS
    if room < 64:
        raise ConfigError(f"the context window ({context} tokens) must leave room for a prompt after max_tokens "
                          f"({max_tokens}) and the chat template ({TEMPLATE_TOKENS}); got {room} tokens")
    return room


def ask(question: str, store: Store, backend: Any, options: PackOptions, *, top_n: int = 20, mode: str = "hybrid",
        max_tokens: int = DEFAULT_MAX_TOKENS) -> Answer:
    """Answer ``question`` from ``store`` with ``backend`` (a chat-mode backend); ``options`` must
    carry the budget (see :func:`budget_for`) and the model's tokenizer."""
    if options.budget is None and options.model is None:
        raise ConfigError("ask needs a budget: give --budget, or a --model the registry knows (edgewise list)")
    hits = retrieve(store, question, top_n=top_n, mode=mode)
    packed = Packer(options, preload=False).pack(question, [h.chunk() for h in hits])  # one pack per question
    done = backend.complete(packed.prompt, max_tokens=max_tokens, stop=[])
    text = done.text.strip()
    usage = {"prompt_tokens": done.prompt_tokens, "completion_tokens": done.completion_tokens,
             "packed_prompt_tokens": packed.debug_info.prompt_tokens, "seconds": round(done.seconds, 3)}
    return Answer(question, text, cited(text, [it.id for it in packed.items]), packed, hits, usage)
