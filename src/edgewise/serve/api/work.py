"""What each endpoint does: one library call per request, the same one the CLI command makes.

These are plain synchronous functions of validated request bodies, returning JSON-ready values;
:mod:`edgewise.serve.api.routes` runs them in worker threads. The output of each is what the
matching command prints with ``--format json`` (``/v1/pack`` ↔ ``edgewise pack --format json``,
``/v1/score`` ↔ ``edgewise score``...). File-backed specs are resolved inside the assets
directory first (:mod:`edgewise.serve.api.assets`), and named relative to it again in the reply. A
request that names no ``order`` is placed by the server's (``edgewise serve --order``): the pack
options of ``/v1/pack`` and of the proxy's routes go through :func:`request_options`.

>>> from edgewise.packing.packer import Packer
>>> out = pack(Packer(preload=False), PackRequest(query="q", chunks=["a", "b"], options={"tokenizer": "words"}), None)
>>> out["debug_info"]["order"], out["debug_info"]["tokenizer"]
(['chunk-0', 'chunk-1'], 'words')
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ...errors import InputError
from ...options import PackOptions
from ...packing.packer import Packer
from .assets import Assets, relative, resolve_options, resolve_spec
from .schemas import HighlightRequest, PackRequest, PruneRequest, ScoreRequest, TokensRequest, VariantsRequest


def _query(query: str) -> str:
    if not query.strip():
        raise InputError(f"query must be a non-empty string, but got {query!r}")
    return query


def _packed_dict(packed: Any, messages_format: str, assets: Assets | None) -> dict[str, Any]:
    out = packed.to_dict(messages_format)
    relative(out["debug_info"], assets)
    return out


def request_options(options: Mapping[str, Any], assets: Assets | None, order: str | None = None) -> dict[str, Any]:
    """A request's pack options as the server packs with them: ``order``, the server's, where the
    request names none (its own always wins), then file-backed specs resolved inside ``assets``.

    >>> request_options({"model": "gpt-4o"}, None, order="auto"), request_options({"order": "edges"}, None, order="auto")
    ({'model': 'gpt-4o', 'order': 'auto'}, {'order': 'edges'})
    """
    if order is not None and "order" not in options:
        options = {**options, "order": order}
    return resolve_options(options, assets)


def pack(packer: Packer, req: PackRequest, assets: Assets | None, *, order: str | None = None) -> dict[str, Any]:
    """``edgewise pack --format json``: ``{"prompt", "messages", "debug_info"}`` (``order``: the
    server's, for a request that names none)."""
    PackOptions.from_dict(req.options)  # the options' own messages first, before any path is resolved
    opts = PackOptions.from_dict(request_options(req.options, assets, order))
    return _packed_dict(packer.pack(req.query, req.chunks, opts), req.messages_format, assets)


def variants(packer: Packer, req: VariantsRequest, assets: Assets | None) -> dict[str, Any]:
    """``edgewise variants --format json``: one packed prompt per position of the key chunk.

    ``edgewise.variants`` packs with the shared default Packer, which is ``packer`` in the service.
    """
    from ...packing.front import variants as run

    given = dict(req.options)
    PackOptions.from_dict(given)
    if "key_id" in given:
        raise InputError("variants takes key_id beside the options, not among them")
    given = resolve_options(given, assets)
    layout = given.pop("layout", "layered")
    out = run(req.query, req.chunks, req.key_id, req.positions, layout=layout, **given)
    return {name: _packed_dict(p, req.messages_format, assets) for name, p in out.items()}


def score(packer: Packer, req: ScoreRequest, assets: Assets | None) -> list[dict[str, Any]]:
    """``edgewise score``: every chunk with its score under the scorer and its rank (1 = best)."""
    from ...chunk import normalize
    from ...score.ranking import score_chunks

    query = _query(req.query)
    opts = PackOptions(scorer=req.scorer)
    opts = opts.replace(scorer=resolve_spec("scorers", opts.scorer, assets))
    chunks, _ = normalize(req.chunks)
    s = packer.scorer(opts)
    if s is None:  # "given"
        raise InputError("scorer 'given' keeps the chunks' own scores; name a scorer to score with (bm25, dense ...)")
    scores = score_chunks(query, chunks, s)
    order = sorted(range(len(chunks)), key=lambda i: (-scores[i], i))
    rank = {i: r for r, i in enumerate(order, 1)}
    return [{**replace(chunks[i], score=scores[i]).to_dict(), "rank": rank[i]}
            for i in (order if req.sort else range(len(chunks)))]


def _sentence_args(threshold: Any, scorer: Any) -> None:
    from ...prune.steps import _check_threshold

    _check_threshold(threshold)
    PackOptions(prune_scorer=scorer)  # its choices, its message


def prune(packer: Packer, req: PruneRequest, assets: Assets | None) -> list[dict[str, Any]]:
    """``edgewise prune``: each chunk with only the sentences that help the query."""
    from ...chunk import normalize
    from ...prune.steps import prune as run

    query = _query(req.query)
    _sentence_args(req.threshold, req.scorer)
    chunks, _ = normalize(req.chunks)
    pruned = run(query, chunks, req.threshold, relative=req.relative, scorer=req.scorer)
    return [p.apply(c).to_dict() for c, p in zip(chunks, pruned)]


def highlight(packer: Packer, req: HighlightRequest, assets: Assets | None) -> list[dict[str, Any]]:
    """``edgewise highlight --format json``: ``[{"id", "spans": [...]}]`` per chunk (or the text)."""
    from ...chunk import Chunk, normalize
    from ...prune.steps import highlight as run

    query = _query(req.query)
    _sentence_args(req.threshold, req.scorer)
    if (req.text is None) == (req.chunks is None):
        raise InputError("highlight needs exactly one of text or chunks")
    chunks = [Chunk(id="text", text=req.text)] if req.text is not None else normalize(req.chunks or [])[0]
    return [{"id": c.id, "spans": [s.to_dict() for s in run(query, c.text, threshold=req.threshold, title=c.title,
                                                                scorer=req.scorer)]} for c in chunks]


def tokens(packer: Packer, req: TokensRequest, assets: Assets | None) -> dict[str, Any]:
    """Count ``text`` with a tokenizer, and cut it to ``max_tokens`` when asked."""
    from ...tokens.tokenizers import get_tokenizer

    opts = PackOptions(tokenizer=req.tokenizer)
    tok = get_tokenizer(resolve_spec("tokenizers", opts.tokenizer, assets))
    out: dict[str, Any] = {"tokenizer": req.tokenizer, "estimated": tok.estimated, "tokens": tok.count(req.text)}
    if req.max_tokens is not None:
        cut = tok.truncate(req.text, req.max_tokens)
        out.update(truncated=cut, truncated_tokens=tok.count(cut))
    return out


def summary(result: Any) -> dict[str, Any]:
    """What the access log and the metrics keep of a result: prompt tokens and chunks dropped."""
    packs = [result] if isinstance(result, dict) and "debug_info" in result else \
        list(result.values()) if isinstance(result, dict) and all(isinstance(v, dict) and "debug_info" in v
                                                                   for v in result.values()) else []
    if not packs:
        return {}
    return {"prompt_tokens": sum(p["debug_info"]["prompt_tokens"] for p in packs),
            "dropped": sum(len(p["debug_info"]["dropped"]) for p in packs)}
