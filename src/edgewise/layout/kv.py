"""The ``kv`` layout: key-value retrieval, the paper's second task.

Each chunk is a record: its key is ``meta.key`` (or its id) and its value is its text. Records are
rendered as one JSON object, one record a line, in placement order, so the likeliest keys sit at
the edges; the query is the key asked for. JSON escaping makes forging structure impossible; a
caller's ``system`` text replaces the instruction and is indented on every line (see ``quote``).
"""

from __future__ import annotations

from .base import Item, Rendered, RenderInput, attr, layout, quote, refuse_layers

INSTRUCTION = "Extract the value corresponding to the specified key in the JSON object below."


def key_of(item: Item) -> str:
    key = item.chunk.meta.get("key")
    return key if isinstance(key, str) else item.id


def record(item: Item) -> str:
    return f"{attr(key_of(item))}: {attr(item.text)}"


class KV:
    name = "kv"
    renders_by_name = True  # no file behind it (see hooks)

    def block(self, item: Item) -> str:
        return record(item) + ",\n "

    def render(self, inp: RenderInput) -> Rendered:
        refuse_layers(inp, "kv")
        head = quote(inp.system) if inp.system else INSTRUCTION  # the caller's text is indented like any payload
        if inp.profile:
            head += "\n\nUser profile: " + attr(inp.profile)
        body = "{" + ",\n ".join(record(i) for i in inp.items) + "}"
        user = f"{head}\n\nJSON data:\n{body}\n\nKey: {attr(inp.query)}\nCorresponding value:"
        ids = [i.id for i in inp.items]
        return Rendered("", user, {"records": ids}, ids, stable_chars=len(head) + 2)


@layout("kv")
def _kv(arg: str | None) -> KV:
    return KV()
