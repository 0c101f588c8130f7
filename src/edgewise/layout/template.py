"""The ``template:FILE`` layout: a user's Jinja2 template, rendered in a sandbox.

The template sees ``query``, ``system``, ``profile``, ``chunks`` (placement order) and
``sections`` (``A``, ``B``, ``C`` as in the ``sections`` layout). Each chunk has ``id``, ``title``,
``form``, ``rank``, ``score`` and ``text`` (already quoted: every line indented, so it cannot forge
structure) and ``block`` (the full quoted ``<doc>`` block); ``raw_text`` is the unquoted text, for
templates that take on the escaping themselves.
"""

from __future__ import annotations

from typing import Any

from ..errors import ConfigError
from .base import Item, Rendered, RenderInput, doc_block, layout, quote
from .sections import split_sections


def _view(item: Item) -> dict[str, Any]:
    c = item.chunk
    return {
        "id": c.id, "title": c.title, "form": item.form, "rank": item.rank, "score": c.score,
        "text": quote(item.text), "raw_text": item.text, "block": doc_block(item), "meta": dict(c.meta),
    }


class Template:
    def __init__(self, path: str) -> None:
        try:
            from jinja2 import StrictUndefined, TemplateError
            from jinja2.sandbox import SandboxedEnvironment
        except ImportError:  # pragma: no cover - jinja2 is a core dependency
            raise ImportError("template layouts need jinja2: pip install -e . (in an edgewise checkout)") from None
        self.name = f"template:{path}"
        try:
            source = _read(path)
        except OSError as exc:
            raise ConfigError(f"template file {path!r} could not be read: {exc.strerror}") from None
        env = SandboxedEnvironment(undefined=StrictUndefined, keep_trailing_newline=False, autoescape=False)
        try:
            self._template = env.from_string(source)
        except TemplateError as exc:
            raise ConfigError(f"template file {path!r} is not valid Jinja2: {exc}") from None
        self._error = TemplateError

    def block(self, item: Item) -> str:
        return doc_block(item)

    def render(self, inp: RenderInput) -> Rendered:
        a, b, c = split_sections(inp)
        try:
            user = self._template.render(
                query=inp.query, system=inp.system, profile=inp.profile,
                chunks=[_view(i) for i in inp.items],
                sections={"A": [_view(i) for i in a], "B": [_view(i) for i in b], "C": [_view(i) for i in c]},
            )
        except self._error as exc:
            raise ConfigError(f"template {self.name!r} failed to render: {exc}") from None
        ids = [i.id for i in inp.items]
        return Rendered("", user, {"A": [i.id for i in a], "B": [i.id for i in b], "C": [i.id for i in c]}, ids, stable_chars=0)


@layout("template")
def _template(arg: str | None) -> Template:
    if not arg:
        raise ConfigError("layout 'template' needs a file: template:FILE")
    return Template(arg)


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()
