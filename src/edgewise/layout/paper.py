"""The ``paper`` layout: the multi-document QA prompt of "Lost in the Middle" (Liu et al., 2023).

One line per document, ``Document [i](Title: T) text``, then ``Question: Q`` and ``Answer:``.
With ``query_aware`` the question is also asked before the documents. Titles are put on one line
with balanced parentheses; a summarised or truncated chunk says so before its title
(``Document [i](Summary; Title: T)``). Further lines of a text are indented (see ``quote``); a
caller's ``system`` text replaces the instruction and is indented on every line, the first included.
"""

from __future__ import annotations

from typing import Any

from .base import Item, Rendered, RenderInput, layout, one_line, quote, quote_tail, refuse_layers

INSTRUCTION = (
    "Write a high-quality answer for the given question using only the provided search results "
    "(some of which might be irrelevant)."
)
# the paper's closed-book prompt: what this layout renders when it is given no documents
CLOSED_BOOK = "Write a high-quality answer for the given question."
LABELS = {"whole": "", "summary": "Summary; ", "truncated": "Truncated; "}


def safe_title(title: str | None) -> str:
    """One line; parentheses kept only when they balance, so the title's end is unambiguous."""
    text = one_line(title or "")
    depth = 0
    for ch in text:
        depth += (ch == "(") - (ch == ")")
        if depth < 0:
            break
    if depth != 0:
        text = text.replace("(", "[").replace(")", "]")
    return text


def doc_line(item: Item, index: int) -> str:
    return f"Document [{index}]({LABELS[item.form]}Title: {safe_title(item.chunk.title)}) {quote_tail(item.text)}"


class Paper:
    name = "paper"
    keeps_text_words = True  # blocks quote the text: indentation added, no word joined (see hooks)
    renders_by_name = True  # no file behind it (see hooks)

    def parse(self, prompt: str) -> Any:
        """Read a prompt this layout rendered back into sections and exact chunk texts."""
        from .parsing import parse_paper

        return parse_paper(prompt)

    def block(self, item: Item) -> str:
        return doc_line(item, 99)  # two-digit index: the common case, and re-counted after rendering

    def render(self, inp: RenderInput) -> Rendered:
        """The paper's prompt; with no documents, its closed-book prompt."""
        return self._render(inp, INSTRUCTION if inp.items else CLOSED_BOOK)

    def _render(self, inp: RenderInput, instruction: str) -> Rendered:
        refuse_layers(inp, "paper")
        head = quote(inp.system) if inp.system else instruction  # the caller's text is indented like any payload
        if inp.profile:
            head += "\n\nUser profile: " + quote_tail(inp.profile)
        question = "Question: " + quote_tail(inp.query)
        parts = [head]
        if inp.query_aware:
            parts.append(question)
        if inp.items:
            parts.append("\n".join(doc_line(item, i) for i, item in enumerate(inp.items, 1)))
        parts.append(f"{question}\nAnswer:")
        ids = [i.id for i in inp.items]
        return Rendered("", "\n\n".join(parts), {"documents": ids}, ids, stable_chars=len(head) + 2)


@layout("paper")
def _paper(arg: str | None) -> Paper:
    return Paper()
