"""The ``template:FILE`` layout: a user's Jinja2 template, rendered in a sandbox.

What the template sees is quoted the way the built-in layouts quote it, so no value can put a
line at the left margin that the template did not write:

- ``query``, ``system``, ``profile``, ``instructions``, ``expected_output`` (``None`` when not
  given): every line indented by two spaces (``quote``), the first line included;
- ``chunks`` (placement order) and ``sections`` (``A``, ``B``, ``C`` as in the ``sections``
  layout): lists of chunks, each with ``text`` and ``summary`` (quoted like the query; ``summary``
  is ``None`` without one), ``block`` (the whole quoted ``<doc>`` block), ``id`` and ``title``
  (JSON string literals, quotes included, that hold no line break: ``"doc-1"``; ``title`` is
  ``None`` without one), ``form`` (``whole``, ``summary`` or ``truncated``), ``rank``, ``score`` and
  ``meta`` (strings as JSON literals, at any depth; numbers, booleans and nulls as they are; a key
  that is not a plain name of letters, digits, ``_``, ``.`` and ``-`` as a JSON literal too).

**Raw values are an explicit opt-in.** ``raw.query``, ``raw.system``, ``raw.profile``,
``raw.instructions``, ``raw.expected_output`` and, per chunk, ``c.raw.text``, ``c.raw.summary``,
``c.raw.id``, ``c.raw.title`` and ``c.raw.meta`` are the values as given, unquoted. They come from
the caller and from retrieved documents: printed as they are, any of them can open a line at the
margin and forge a section, a document or an instruction. Use them only for text the template
escapes itself (for example ``{{ c.raw.text | tojson }}``).

With no chunks (while the packer measures the template's fixed part, or when none fit), indexing
an empty list (``chunks[0]``, ``sections.B[0]``, ``chunks | first``) gives a blank chunk whose
every field prints as nothing, so a template may index its chunks directly.

Errors are :class:`ConfigError` with one line naming the file and the problem: a file that cannot
be read or is not UTF-8, invalid Jinja2, ``{% include %}``/``{% extends %}``/``{% import %}``
(a template is one self-contained file), and anything that fails while rendering (an undefined
name, ``1/0``, a macro that recurses without end). The sandbox also stops ranges over 100,000
numbers (and 1,000,000 in total per render), repeating a string or list past 1,000,000 items,
integer powers past 100,000 bits, and output past 1,000,000 characters plus 8 per input character.
A template is configuration you trust: these limits stop mistakes, not every slow template.

The file is read and compiled once per version (see :mod:`edgewise.files`).
"""

from __future__ import annotations

import contextvars
import re
from dataclasses import replace
from functools import lru_cache
from typing import Any

from ..errors import ConfigError, InputError
from ..files import load_cached
from .base import (
    DocTags,
    Item,
    Rendered,
    RenderInput,
    attr,
    doc_block,
    layout,
    one_line,
    quote,
)
from .sections import split_sections

MAX_RANGE_TOTAL = 1_000_000  # numbers all range() calls of one render may cover
MAX_REPEAT = 1_000_000  # items (characters) a `*` repetition may produce
MAX_POWER_BITS = 100_000  # bits an integer `**` may produce
MAX_OUTPUT = 1_000_000  # characters of output, plus OUTPUT_PER_INPUT per character of input
OUTPUT_PER_INPUT = 8
_PLAIN_KEY = re.compile(r"[\w.-]+")
_range_used: contextvars.ContextVar[list[int]] = contextvars.ContextVar("edgewise_template_range")


class Template(DocTags):
    """A compiled ``template:FILE`` layout; see the module docstring for what the template sees."""

    keeps_text_words = True  # budgeted blocks are doc blocks, which quote the text (see hooks)

    def __init__(self, path: str) -> None:
        self.name = f"template:{path}"
        self.path = path
        try:
            self._template = load_cached(path, _compile, what="template file")
        except _Invalid as exc:
            raise ConfigError(f"template file {path!r} is not valid Jinja2: {exc}") from None

    def block(self, item: Item) -> str:
        return doc_block(item)

    def render_fixed(self, inp: RenderInput) -> Rendered:
        """The prompt with no chunks: what the packer reserves before it adds any."""
        return self.render(replace(inp, items=(), reminders=()))

    def render(self, inp: RenderInput) -> Rendered:
        a, b, c = split_sections(inp)
        views = {id(i): _view(i) for i in inp.items}
        context = {
            "query": quote(inp.query), "system": _quoted(inp.system), "profile": _quoted(inp.profile),
            "instructions": _quoted(inp.instructions), "expected_output": _quoted(inp.expected_output),
            "chunks": _views(inp.items, views),
            "sections": {"A": _views(a, views), "B": _views(b, views), "C": _views(c, views)},
            "raw": {"query": inp.query, "system": inp.system, "profile": inp.profile,
                    "instructions": inp.instructions, "expected_output": inp.expected_output},
        }
        size = sum(len(s or "") for s in (inp.query, inp.system, inp.profile, inp.instructions, inp.expected_output))
        size += sum(len(i.text) + len(i.id) + len(i.chunk.title or "") for i in inp.items)
        user = self._run(context, MAX_OUTPUT + OUTPUT_PER_INPUT * size)
        ids = [i.id for i in inp.items]
        return Rendered("", user, {"A": [i.id for i in a], "B": [i.id for i in b], "C": [i.id for i in c]}, ids, stable_chars=0)

    def _run(self, context: dict[str, Any], limit: int) -> str:
        out: list[str] = []
        size = 0
        token = _range_used.set([0])
        try:
            for piece in self._template.generate(**context):
                size += len(piece)
                if size > limit:
                    raise ConfigError(f"template {self.path!r} output grew past {limit:,} characters; is a loop running away?")
                out.append(piece)
        except ConfigError:
            raise
        except Exception as exc:  # noqa: BLE001 - whatever a template does wrong is the template's error
            raise ConfigError(f"template {self.path!r} failed to render{_line(exc)}: {_problem(exc)}") from None
        finally:
            _range_used.reset(token)
        return "".join(out)


@layout("template", arg="FILE")
def _template(arg: str | None) -> Template:
    if not arg:
        raise ConfigError("layout 'template' needs a file: template:FILE")
    return Template(arg)


class _Invalid(Exception):
    """A template's text did not compile; the message says where and why."""


def _compile(source: str) -> Any:  # noqa: ANN401 - jinja2.Template
    env = _environment()[0]
    try:
        return env.from_string(source)
    except RecursionError:
        raise _Invalid("it is nested too deeply to compile") from None
    except Exception as exc:  # noqa: BLE001 - TemplateSyntaxError, and what the parser may raise besides
        line = getattr(exc, "lineno", None)
        raise _Invalid(f"{f'line {line}: ' if line else ''}{_problem(exc)}") from None


def _quoted(text: str | None) -> str | None:
    return None if text is None else quote(text)


def _views(items: tuple[Item, ...] | list[Item], views: dict[int, dict[str, Any]]) -> list[dict[str, Any]]:
    return [views[id(i)] for i in items] if items else _NoChunks()


def _view(item: Item) -> dict[str, Any]:
    c = item.chunk
    summary = c.summary
    try:
        meta = _quote_meta(c.meta)
    except RecursionError:
        raise InputError(f"chunk {c.id!r}: meta is nested too deeply for a template") from None
    return {
        "id": attr(c.id), "title": attr(c.title) if c.title else None, "form": item.form, "rank": item.rank,
        "score": c.score, "text": quote(item.text), "summary": _quoted(summary), "block": doc_block(item),
        "meta": meta, "raw": {"id": c.id, "title": c.title, "text": item.text, "summary": summary, "meta": c.meta},
    }


def _quote_meta(value: Any) -> Any:  # noqa: ANN401 - any JSON value
    """Strings as JSON literals at any depth; numbers, booleans and None as they are."""
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, dict):
        return {(k if isinstance(k, str) and _PLAIN_KEY.fullmatch(k) else attr(str(k))): _quote_meta(v)
                for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_quote_meta(v) for v in value]
    return attr(value if isinstance(value, str) else str(value))


class _NoChunks(list):
    """An empty list of chunks whose every index reads as a blank chunk (see the module docstring)."""

    def __getitem__(self, index: Any) -> Any:  # noqa: ANN401
        if isinstance(index, int) and not isinstance(index, bool):
            return _environment()[1]()
        return _NoChunks() if isinstance(index, slice) else list.__getitem__(self, index)


def _range(*args: int) -> range:
    """``range`` limited per call (as in Jinja's sandbox) and in total per render."""
    numbers = range(*args)
    used = _range_used.get(None)
    if len(numbers) > 100_000 or (used is not None and used[0] + len(numbers) > MAX_RANGE_TOTAL):
        raise OverflowError(
            f"range() may cover at most 100,000 numbers a call and {MAX_RANGE_TOTAL:,} per render, "
            f"but got range({', '.join(map(str, args))})"
        )
    if used is not None:
        used[0] += len(numbers)
    return numbers


def _check_binop(operator: str, left: Any, right: Any) -> None:  # noqa: ANN401
    def is_int(x: Any) -> bool:  # noqa: ANN401
        return isinstance(x, int) and not isinstance(x, bool)

    if operator == "*":
        for seq, n in ((left, right), (right, left)):
            if isinstance(seq, (str, list, tuple)) and is_int(n) and len(seq) * n > MAX_REPEAT:
                raise OverflowError(f"repeating a {type(seq).__name__} may give at most {MAX_REPEAT:,} items, but got {len(seq)} * {n}")
    elif operator == "**" and is_int(left) and is_int(right) and abs(left) > 1 and right > 0:
        if abs(left).bit_length() * right > MAX_POWER_BITS:
            raise OverflowError(f"an integer power may have at most {MAX_POWER_BITS:,} bits, but got {left} ** {right}")


@lru_cache(maxsize=1)
def _environment() -> tuple[Any, type]:
    """The sandboxed Jinja2 environment (imported on first use) and the blank-chunk class."""
    try:
        from jinja2 import BaseLoader, ChainableUndefined, StrictUndefined, TemplateError, pass_environment
        from jinja2.filters import do_last, sync_do_first
        from jinja2.sandbox import SandboxedEnvironment
    except ImportError:  # pragma: no cover - jinja2 is a core dependency
        raise ImportError("template layouts need jinja2: pip install -e . (in an edgewise checkout)") from None

    class Blank(ChainableUndefined):
        """A chunk that is not there: prints as nothing, and every use of it gives a blank."""

        __slots__ = ()

        def _blank(self, *args: Any, **kwargs: Any) -> Blank:  # noqa: ANN401
            return self

        def _false(self, other: Any) -> bool:  # noqa: ANN401
            return False

        __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _blank
        __truediv__ = __rtruediv__ = __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = _blank
        __pow__ = __rpow__ = __pos__ = __neg__ = __call__ = _blank
        __lt__ = __le__ = __gt__ = __ge__ = _false

        def __int__(self) -> int:
            return 0

        def __float__(self) -> float:
            return 0.0

    class NoIncludes(BaseLoader):
        def get_source(self, environment: Any, template: str) -> Any:  # noqa: ANN401
            raise TemplateError(
                f"{{% include %}}, {{% extends %}} and {{% import %}} are not supported (it asked for {template!r}): "
                "a template is one self-contained file"
            )

    class Environment(SandboxedEnvironment):
        intercepted_binops = frozenset({"*", "**"})

        def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:  # noqa: ANN401
            _check_binop(operator, left, right)
            return super().call_binop(context, operator, left, right)

    @pass_environment
    def first(environment: Any, seq: Any) -> Any:  # noqa: ANN401
        return Blank() if isinstance(seq, _NoChunks) else sync_do_first(environment, seq)

    @pass_environment
    def last(environment: Any, seq: Any) -> Any:  # noqa: ANN401
        return Blank() if isinstance(seq, _NoChunks) else do_last(environment, seq)

    env = Environment(undefined=StrictUndefined, loader=NoIncludes(), keep_trailing_newline=False, autoescape=False)
    env.globals["range"] = _range
    env.filters["first"] = first
    env.filters["last"] = last
    return env, Blank


def _line(exc: BaseException) -> str:
    """`` at line N`` of the template where ``exc`` was raised, when the traceback says."""
    line = None
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == "<template>":
            line = tb.tb_lineno
        tb = tb.tb_next
    return f" at line {line}" if line else ""


def _problem(exc: BaseException) -> str:
    if isinstance(exc, RecursionError):
        return "runaway recursion (a macro that calls itself without end?)"
    if isinstance(exc, MemoryError):
        return "it ran out of memory"
    kind = type(exc).__name__
    text = one_line(str(exc)) or kind
    text = text if len(text) <= 300 else text[:300] + " [...]"
    plain = isinstance(exc, OverflowError) or type(exc).__module__.startswith("jinja2")  # messages that say it all
    return text if plain else f"{kind}: {text}"
