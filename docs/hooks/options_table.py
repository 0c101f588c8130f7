"""An MkDocs hook: the table of every pack option, generated from ``PackOptions.json_schema()``.

A page that holds the line ``<!-- pack options -->`` gets, in its place, one row per option: its
name (the keyword of ``pack()`` and the field of ``PackOptions``), its command-line flag, what it
accepts, its default and its help, from the same schema the HTTP service publishes. The table
cannot drift from the code: it is the code's.
"""

from __future__ import annotations

import json
from typing import Any

MARKER = "<!-- pack options -->"


def accepts(schema: dict[str, Any]) -> str:
    """What one option accepts, in words: ``integer ≥ 1, or none``."""
    kinds = [s for s in schema.get("anyOf", [schema]) if s.get("type") != "null"]
    words = []
    for kind in kinds:
        if "enum" in kind:
            words.append(" / ".join(f"`{v}`" for v in kind["enum"]))
            continue
        word = {"integer": "integer", "number": "number", "boolean": "true / false", "string": "text"}[kind["type"]]
        low, high = kind.get("minimum", kind.get("exclusiveMinimum")), kind.get("maximum")
        if low is not None and high is not None:
            word += f" in [{low}, {high}]"
        elif "exclusiveMinimum" in kind:
            word += f" > {low}"
        elif low is not None:
            word += f" ≥ {low}"
        words.append(word)
    if len(kinds) < len(schema.get("anyOf", [schema])):
        words.append("none")
    return ", or ".join(words)


def table() -> str:
    from edgewise import PackOptions

    rows = ["| option | flag | accepts | default | what |", "| --- | --- | --- | --- | --- |"]
    for name, schema in PackOptions.json_schema()["properties"].items():
        default = "none" if schema.get("default") is None else f"`{json.dumps(schema['default'])}`"
        flag = "--" + name.replace("_", "-")
        rows.append(f"| `{name}` | `{flag}` | {accepts(schema)} | {default} | {schema.get('description', '')} |")
    return "\n".join(rows)


def on_page_markdown(markdown: str, **kwargs: Any) -> str:  # noqa: ARG001
    return markdown.replace(MARKER, table()) if MARKER in markdown else markdown
