"""The inspector: one page that shows where every chunk of a pack went, served at ``/ui`` and written as a file.

The page is plain HTML, CSS and JavaScript shipped in ``edgewise/data/inspector/`` (no build step,
nothing fetched from anywhere else). Its script renders one *view* of a pack:

- ``query``, ``chunks`` (as given), ``options`` (as sent) and ``messages_format``;
- ``result``: what ``/v1/pack`` answers (``prompt``, ``messages``, ``debug_info``);
- ``pruning``: what ``/v1/prune`` answers for the chunks the pack's pruning cut, with the pack's
  threshold, ``prune_relative`` and ``prune_scorer`` (the sentences each kept), or None;
- ``curve``: the position profile that placed the chunks, or was chosen and not used (:func:`curve`), or None;
- in a file, ``messages``: the chat messages in both formats (no server to ask for the other one).

On ``/ui`` the page builds the view itself from the public API (``/v1/capabilities``, ``/v1/pack``,
``/v1/prune``) and ``/ui/curve``; ``edgewise pack --html FILE`` (and ``retrieve``) writes the view
into one self-contained file with the same CSS and JavaScript inlined (:func:`page`), so the file
shows what the page shows. Chunk text is untrusted: the script puts every value in the page as
text, and the view is embedded so that nothing in it can close its ``<script>`` block (:func:`embed`).
Nothing here needs the ``serve`` extra: the CLI writes the file from a base install.

>>> from edgewise import pack
>>> p = pack("capital?", ["Paris is the capital.", "<script>alert(1)</script>"], tokenizer="words")
>>> html = page(view("capital?", ["Paris is the capital.", "<script>alert(1)</script>"], PackOptions(tokenizer="words"), p))
>>> html.count("<script"), "<script>alert" in html
(2, False)
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

from ... import __version__
from ...options import PackOptions

STATIC = Path(__file__).parents[2] / "data" / "inspector"
#: the files of the page: its markup, its style and its script
ASSETS = ("inspector.html", "inspector.css", "inspector.js")
VIEW_ID = "edgewise-view"  # the id of the <script type="application/json"> block that holds a file's view
HEAD, TAIL = "<!-- edgewise:head -->", "<!-- edgewise:tail -->"  # where page() puts the style and the script
#: the Content-Security-Policy of ``/ui``: its own script and style, its own API, nothing else
SERVED_POLICY = ("default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; base-uri 'none'; "
                 "form-action 'none'; frame-ancestors 'none'")
_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}


@cache
def asset(name: str) -> str:
    """The text of one file of the page (:data:`ASSETS`)."""
    if name not in ASSETS:
        raise ValueError(f"the inspector's files are {', '.join(ASSETS)}, but got {name!r}")
    return (STATIC / name).read_text(encoding="utf-8")


def embed(value: Any) -> str:
    """``value`` as JSON for an HTML ``<script type="application/json">`` block: no ``<``, ``>`` or
    ``&`` in it (each is a ``\\u`` escape, inside strings, the only place JSON holds them), so no
    text can end the block (``</script>``) or open a comment (``<!--``); U+2028 and U+2029 escaped too.

    >>> embed({"text": "</script><!-- & \\u2028"})
    '{"text":"\\\\u003c/script\\\\u003e\\\\u003c!-- \\\\u0026 \\\\u2028"}'
    >>> json.loads(embed({"text": "</script><!-- & \\u2028"}))["text"] == "</script><!-- & \\u2028"
    True
    """
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    for char, escape in _ESCAPES.items():
        text = text.replace(char, escape)
    return text


def _digest(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii") + "'"


def file_policy(css: str, js: str) -> str:
    """The Content-Security-Policy of a written file: its one inline style and its one inline script
    (by their hashes), nothing fetched, no form, no base URL.

    >>> file_policy("p { color: red; }", "run()").split("; ")[:2]
    ["default-src 'none'", "script-src 'sha256-AvyuiL0SD1mVY3NNxR+V2uo+lhk6RMFrytWmRt6CrJQ='"]
    """
    return f"default-src 'none'; script-src {_digest(js)}; style-src {_digest(css)}; base-uri 'none'; form-action 'none'"


def page(view: Mapping[str, Any] | None = None) -> str:
    """The page's HTML. Without ``view``: the page ``/ui`` serves (its style and script linked from
    ``/ui/``, the view built from the API). With one: a self-contained file, the style and the
    script inlined, the view embedded (:func:`embed`), and a policy that lets only those two run.

    >>> import re
    >>> re.findall(r'(?:src|href)="([^"]+)"', page())
    ['/ui/inspector.css', '/ui/inspector.js']
    """
    html = asset("inspector.html")
    if view is None:
        head = '<link rel="stylesheet" href="/ui/inspector.css">'
        tail = '<script src="/ui/inspector.js"></script>'
    else:
        css, js = asset("inspector.css"), asset("inspector.js")
        head = f'<meta http-equiv="Content-Security-Policy" content="{file_policy(css, js)}">\n<style>{css}</style>'
        tail = f'<script type="application/json" id="{VIEW_ID}">{embed(view)}</script>\n<script>{js}</script>'
    return html.replace(HEAD, head).replace(TAIL, tail)


def view(query: str, chunks: Sequence[Any], options: PackOptions, packed: Any, *, source: str = "edgewise pack",
         found: Any = None) -> dict[str, Any]:
    """The view of one pack (see the module docstring): ``packed`` is what :func:`edgewise.pack`
    returned for ``query``, ``chunks`` and ``options``; ``source`` says what made it."""
    result = packed.to_dict()
    debug = result["debug_info"]
    placement = debug.get("placement") or {}
    named = placement.get("profile") or {}
    return {
        "source": f"{source} (edgewise {__version__})",
        "query": query,
        "chunks": [c.to_dict() if hasattr(c, "to_dict") else c for c in chunks],
        "options": options.to_dict(changed_only=True),
        "messages_format": "openai",
        "result": result,
        "messages": {"openai": packed.messages("openai"), "anthropic": packed.messages("anthropic")},
        "pruning": pruning(query, chunks, debug, options),
        "curve": curve(profile=named.get("name"), strategy=debug["strategy"], found=found),
    }


def pruning(query: str, chunks: Sequence[Any], debug_info: Mapping[str, Any], options: PackOptions) -> list[dict] | None:
    """What ``/v1/prune`` answers for the chunks the pack's pruning cut, pruned as the pack pruned
    them (the threshold it applied, ``order="auto"``'s profile's among them): each with the spans
    of the sentences it kept (``meta.prune.spans``, offsets into its text). None when none was cut."""
    cut = {r["id"] for r in debug_info.get("pruned") or ()}
    if not cut:
        return None
    from ...chunk import normalize
    from ...prune.steps import prune

    placement = debug_info.get("placement")
    threshold = placement["prune"] if placement else options.prune
    todo = [c for c in normalize(chunks)[0] if c.id in cut]
    kept = prune(query, todo, threshold, relative=options.prune_relative, scorer=options.prune_scorer)
    return [p.apply(c).to_dict() for c, p in zip(todo, kept)]


def curve(*, profile: str | None = None, strategy: str | None = None, found: Any = None,
          resolve: Callable[[str], str] | None = None) -> dict[str, Any] | None:
    """The position curve of a pack: the profile ``order="auto"`` chose (by its ``profile`` name,
    among the profiles found), else the file of a ``calibrated:FILE`` ``strategy`` (``resolve``
    turns its argument into the path to read). ``{"name", "accuracy", "measured"}``: the accuracy
    at evenly spaced places (first to last) and the measured points with their intervals; None for
    an order that placed without a profile, or a profile no longer found.

    >>> curve(profile="gemma-3-270m/qa-paper-20")["measured"][0]["accuracy"]
    0.1
    >>> curve(strategy="edges") is None
    True
    """
    from ...errors import ConfigError
    from ...order import load_profile
    from ...order import profiles as found_profiles

    if profile:
        found = found_profiles.discover() if found is None else found
        match = next((p for p in found.profiles if p.name == profile), None)
        return None if match is None else _curve(match.name, match.accuracy, match.measured)
    name, _, arg = (strategy or "").partition(":")
    if name != "calibrated" or not arg:
        return None
    path = resolve(arg) if resolve is not None else arg
    accuracy = load_profile(path)
    try:
        measured: Sequence[Mapping[str, Any]] = found_profiles.load(path).measured
    except ConfigError:  # a bare list of accuracies: no measured points
        measured = ()
    return _curve(Path(arg).name, accuracy, measured)


def _curve(name: str, accuracy: Sequence[float], measured: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    keys = ("position", "relative_position", "n", "accuracy", "interval")
    return {"name": name, "accuracy": [float(a) for a in accuracy],
            "measured": [{k: m[k] for k in keys if k in m} for m in measured]}


def write(path: str | Path, view: Mapping[str, Any]) -> None:
    """Write the self-contained page of ``view`` to ``path``; a path that cannot be written is an
    :class:`~edgewise.errors.InputError` that names it."""
    from ...errors import InputError

    try:
        Path(path).write_text(page(view), encoding="utf-8")
    except OSError as exc:
        raise InputError(f"--html must name a file that can be written, but {str(path)!r} cannot: "
                         f"{exc.strerror or exc}") from None


__all__ = ["ASSETS", "SERVED_POLICY", "VIEW_ID", "asset", "curve", "embed", "file_policy", "page", "pruning", "view",
           "write"]
