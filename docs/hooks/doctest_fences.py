"""A Griffe extension for the API reference: docstrings written for doctest and Sphinx read as Markdown.

edgewise's docstrings hold doctest examples (``>>>`` lines and their output), Sphinx roles
(``:func:`edgewise.pack```) and reST literal blocks (``text::``). Markdown would show the first as
nested block quotes and the others with their markup; this extension, listed in ``mkdocs.yml``,
fences each example as a ``pycon`` code block, turns each role into inline code and each ``::``
into ``:`` before mkdocstrings renders the docstring. The
source docstrings stay as they are, so ``pytest --doctest-modules`` still runs them.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

LITERAL = re.compile(r"(?<=\S)::$", re.M)  # reST's "text::" before an indented block reads "text:"
ROLE = re.compile(r":(?:py:)?(?:func|class|meth|attr|data|mod|exc|obj|const):`~?([^`]+)`")
FENCE = "```"


def _role(match: re.Match[str]) -> str:
    target = match.group(1)
    shown = target.rsplit(".", 1)[-1] if match.group(0).split("`", 1)[1].startswith("~") else target
    return f"`{shown}`"


def fence_examples(text: str) -> str:
    """Wrap every run of doctest lines (``>>>`` up to the next blank line) in a ``pycon`` fence."""
    out: list[str] = []
    inside = in_code = False
    for line in text.splitlines():
        stripped = line.lstrip()
        if stripped.startswith(FENCE):
            in_code = not in_code
        if not in_code and not inside and stripped.startswith(">>>"):
            indent = line[: len(line) - len(stripped)]
            out.append(f"{indent}{FENCE}pycon")
            inside = True
        elif inside and not stripped:
            out.append(f"{indent}{FENCE}")
            inside = False
        out.append(line)
    if inside:
        out.append(f"{indent}{FENCE}")
    return "\n".join(out)


def to_markdown(text: str) -> str:
    """A docstring's text with its doctest examples fenced, its Sphinx roles as inline code and its
    reST literal-block markers (``text::``) as plain colons."""
    return fence_examples(LITERAL.sub(":", ROLE.sub(_role, text)))


class DoctestFences(griffe.Extension):
    """Rewrites each loaded object's docstring with :func:`to_markdown`."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:  # noqa: ARG002
        if obj.docstring is not None:
            obj.docstring.value = to_markdown(obj.docstring.value)
