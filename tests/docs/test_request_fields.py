"""Every ``edgewise.*`` request field the docs name is a field the proxy takes.

In ``docs/proxy.md`` and the proxy's own docstrings, ``edgewise.X`` is the ``edgewise`` field of a
request body (``edgewise.budget``, ``edgewise.documents[0]``), or of a reply with ``debug: true``
(``edgewise.pack.placement``). Each such name must be a path of the request schema the proxy
publishes in ``/openapi.json`` (:func:`edgewise.serve.proxy.routes.field_schema`, which holds the pack
options as :mod:`edgewise.options` declares them, and the proxy's own) or of a real debug reply.
A Python module's name is not one: a module rename once turned ``edgewise.budget`` into
``edgewise.packing.budget`` in the proxy's guide (a module of that name exists; the field does not).

The option table and the ``"edgewise": {...}`` examples of ``docs/proxy.md`` are held to the same
schema, and the schema to what the proxy reads (:data:`edgewise.serve.proxy.conversation.PROXY_KEYS`).
Everywhere else in ``docs/`` and ``README.md``, ``edgewise.X`` must name something that exists: a
Python module or attribute, a logger or entry-point group of the code, or a request field.
"""

from __future__ import annotations

import importlib
import re
import warnings
from typing import Any

import pytest

from ..conftest import ROOT

pytest.importorskip("fastapi")

from edgewise.serve.proxy.conversation import PACK_KEYS, PROXY_KEYS, prepare  # noqa: E402
from edgewise.serve.proxy.routes import field_schema  # noqa: E402

PROXY_DOC = ROOT / "docs" / "proxy.md"
# the modules whose docstrings speak of the request's field (``edgewise.budget`` in double backticks)
PROXY_SOURCES = [ROOT / "src" / "edgewise" / "serve" / "proxy" / f"{name}.py"
                 for name in ("routes", "conversation", "openai_responses", "passthrough", "readbody", "chatformat")]
OTHER_DOCS = sorted(p for p in [*(ROOT / "docs").rglob("*.md"), ROOT / "README.md"] if p != PROXY_DOC)

FENCE = re.compile(r"^(```|~~~)[^\n]*\n.*?^\1[ \t]*$", re.S | re.M)
SPAN = re.compile(r"(`+)(.+?)\1", re.S)
NAME = re.compile(r"(?<![\w/.-])edgewise\.[A-Za-z_]\w*(?:\.[A-Za-z_]\w*|\[\d+\])*")


def mentions(text: str, *, spans: str = "`") -> list[str]:
    """The ``edgewise.X`` names in the inline code of ``text`` (fenced blocks left out); ``spans``:
    the backticks around a span (``"``"`` for a docstring's double-backtick literals)."""
    text = FENCE.sub("", text)
    found = []
    for m in SPAN.finditer(text):
        if spans == "``" and m.group(1) != "``":
            continue
        found += [n.group(0) for n in NAME.finditer(m.group(2))]
    return sorted(set(found))


def steps(name: str) -> list[str | int]:
    """``edgewise.documents[0].score`` -> ``["documents", 0, "score"]``."""
    out: list[str | int] = []
    for key, index in re.findall(r"\.([A-Za-z_]\w*)|\[(\d+)\]", name.removeprefix("edgewise")):
        out.append(key if key else int(index))
    return out


def in_schema(schema: dict[str, Any], path: list[str | int]) -> bool:
    """Whether ``path`` leads somewhere in the JSON Schema ``schema``."""
    if not path:
        return True
    step, rest = path[0], path[1:]
    options = schema.get("anyOf", [schema])
    for option in options:
        if isinstance(step, int) and option.get("type") == "array" and "items" in option:
            if in_schema(option["items"], rest):
                return True
        elif isinstance(step, str) and step in option.get("properties", {}):
            if in_schema(option["properties"][step], rest):
                return True
        elif isinstance(step, str) and option.get("type") == "object" and "properties" not in option:
            return True  # a free-form object (meta): any key
    return False


def in_value(value: Any, path: list[str | int]) -> bool:
    for step in path:
        if isinstance(step, int) and isinstance(value, list) and step < len(value):
            value = value[step]
        elif isinstance(step, str) and isinstance(value, dict) and step in value:
            value = value[step]
        else:
            return False
    return True


@pytest.fixture(scope="module")
def request_schema() -> dict[str, Any]:
    return field_schema()


@pytest.fixture(scope="module")
def debug_reply() -> dict[str, Any]:
    """The ``edgewise`` field of a reply to a packed request with ``debug: true`` (``order: auto``, so
    the placement record is there too)."""
    plan = prepare({"model": "gpt-4o", "max_tokens": 20, "messages": [{"role": "user", "content": "Capital of France?"}],
                    "edgewise": {"documents": ["Paris is the capital of France."], "order": "auto", "debug": True}})
    return plan.debug()


def test_the_schema_is_what_the_proxy_reads(request_schema):
    from edgewise.serve.api.assets import LLM_SUMMARY_OPTIONS

    assert set(request_schema["properties"]) == {*PROXY_KEYS, *PACK_KEYS} - set(LLM_SUMMARY_OPTIONS)
    assert "model" not in request_schema["properties"]  # the request's own model field names it


def test_every_field_the_proxy_doc_and_docstrings_name_is_in_the_request_schema(request_schema, debug_reply):
    named = {(PROXY_DOC.name, m) for m in mentions(PROXY_DOC.read_text(encoding="utf-8"))}
    for source in PROXY_SOURCES:
        named |= {(source.name, m) for m in mentions(source.read_text(encoding="utf-8"), spans="``")}
    assert ("proxy.md", "edgewise.budget") in named  # the check sees what it is meant to
    wrong = sorted((where, name) for where, name in named
                   if not in_schema(request_schema, steps(name)) and not in_value(debug_reply, steps(name)))
    assert not wrong, f"named as request (or debug reply) fields, but the proxy has no such field: {wrong}"


def test_the_option_table_of_the_proxy_doc_is_the_schema(request_schema):
    text = PROXY_DOC.read_text(encoding="utf-8")
    table = text[text.index("| option | default | meaning |"):]
    table = table[: table.index("\n\n")]
    listed = re.findall(r"^\| `(\w+)` \|", table, re.M)
    assert listed and all(name in request_schema["properties"] for name in listed), listed
    # every option of the proxy's own is in the table (the pack options are PackOptions', listed elsewhere)
    assert set(PROXY_KEYS) - {"documents"} <= set(listed)


def _object_keys(text: str, start: int) -> list[str]:
    """The keys at the top level of the JSON-like object that opens at ``text[start]`` ("{")."""
    depth, keys, i, in_string = 0, [], start, False
    while i < len(text):
        c = text[i]
        if in_string:
            if c == "\\":
                i += 1
            elif c == '"':
                in_string = False
        elif c == '"':
            if depth == 1:
                key = re.match(r'"(\w+)"\s*:', text[i:])
                if key:
                    keys.append(key.group(1))
            in_string = True
        elif c in "{[":
            depth += 1
        elif c in "}]":
            depth -= 1
            if depth == 0:
                return keys
        i += 1
    raise AssertionError(f"unbalanced object at offset {start}")


def test_the_edgewise_objects_in_the_examples_take_only_request_fields(request_schema):
    seen = 0
    for doc in [PROXY_DOC, *OTHER_DOCS]:
        text = doc.read_text(encoding="utf-8")
        for m in re.finditer(r'"edgewise"\s*:\s*\{', text):
            keys = _object_keys(text, m.end() - 1)
            seen += 1
            unknown = [k for k in keys if k not in request_schema["properties"]]
            assert not unknown, f"{doc.name}: the edgewise object at offset {m.start()} has {unknown}, no request fields"
    assert seen >= 2


def _is_python(name: str) -> bool:
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        try:
            for attr in parts[i:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return False
        return True
    return False


def _declared_names() -> set[str]:
    """Loggers and entry-point groups the code names (``getLogger("edgewise...")``, ``group="edgewise..."``)."""
    names = set()
    for path in (ROOT / "src" / "edgewise").rglob("*.py"):
        names |= set(re.findall(r'["\'](edgewise\.[\w.]+)["\']', path.read_text(encoding="utf-8")))
    return names


def test_every_other_edgewise_name_in_the_docs_exists(request_schema):
    declared = _declared_names()
    missing = []
    for doc in OTHER_DOCS:
        for name in mentions(doc.read_text(encoding="utf-8")):
            if name in declared or _is_python(name) or in_schema(request_schema, steps(name)):
                continue
            missing.append((str(doc.relative_to(ROOT)), name))
    assert not missing, f"names no module, attribute, logger, entry-point group or request field: {missing}"
