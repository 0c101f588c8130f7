"""What a caller needs from a model (:class:`LLM`) and what one answer gives back (:class:`Completion`).

>>> Completion("Paris", prompt_tokens=12, completion_tokens=2).to_dict()
{'text': 'Paris', 'prompt_tokens': 12, 'completion_tokens': 2, 'seconds': 0.0, 'attempts': 1}
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Protocol, runtime_checkable


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
