"""A third-party edgewise plugin: one object per entry-point group (see ../pyproject.toml)."""

from __future__ import annotations

from collections.abc import Sequence

from edgewise.eval.backends import Completion
from edgewise.layout import Rendered, RenderInput, quote


def reverse_pairs(n, ctx):
    """Order: swap each pair of neighbours in rank order (1, 0, 3, 2, ...)."""
    out = []
    for i in range(0, n - 1, 2):
        out += [i + 1, i]
    return out + ([n - 1] if n % 2 else [])


def rotate(n, ctx):
    """Order ``plugin-rotate:N``: rank order rotated left by N."""
    k = int(ctx.arg) % n
    return list(range(k, n)) + list(range(k))


rotate.edgewise_arg = "N"  # the argument the order requires, shown as plugin-rotate:N


class Plain:
    """Layout: one ``#id`` line and the quoted text per chunk, then the question."""

    name = "plugin-plain"

    def __init__(self, arg: str | None) -> None:
        self.arg = arg

    def block(self, item) -> str:
        return f"#{item.id}\n{quote(item.text)}\n"

    def render(self, inp: RenderInput) -> Rendered:
        ids = [i.id for i in inp.items]
        user = "".join(self.block(i) for i in inp.items) + f"Q:\n{quote(inp.query)}"
        return Rendered("", user, {"docs": ids}, ids, stable_chars=0)


class Overlap:
    """Scorer: how many distinct query words the text contains."""

    name = "plugin-overlap"

    def __init__(self, arg: str | None) -> None:
        pass

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        words = set(query.lower().split())
        return [float(len(words & set(t.lower().split()))) for t in texts]


class Bytes:
    """Tokenizer: one token per UTF-8 byte (exact for a byte-level model)."""

    name = "plugin-bytes"
    estimated = False

    def __init__(self, arg: str | None) -> None:
        pass

    def count(self, text: str) -> int:
        return len(text.encode("utf-8"))

    def truncate(self, text: str, max_tokens: int) -> str:
        return text.encode("utf-8")[:max_tokens].decode("utf-8", errors="ignore")

    def count_prefix(self, text: str, n_chars: int) -> int:
        return self.count(text[:n_chars])

    def count_parts(self, parts: Sequence[str]) -> int:
        return sum(self.count(p) for p in parts)


class Echo:
    """Backend: answers with the prompt's last line."""

    name = "plugin-echo"
    concurrency = 1

    def __init__(self, model: str = "echo", **options) -> None:
        self.model = model

    def complete(self, prompt: str, *, max_tokens: int, stop: Sequence[str]) -> Completion:
        return Completion(prompt.splitlines()[-1][:max_tokens])

    def describe(self) -> dict:
        return {"backend": self.name, "model": self.model}


def contains(prediction: str, golds: Sequence[str]) -> float:
    """Metric: 1.0 when any gold answer occurs in the prediction."""
    return 1.0 if any(g in prediction for g in golds) else 0.0
