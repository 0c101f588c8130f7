"""What a request will cost the models, estimated before any work starts: the texts it would send
through one (a MiniLM embedding of a chunk or of a sentence, a cross-encoder pair).

Admission (:mod:`edgewise.serve.api.admission`) decides by it: over ``--max-model-texts`` a request
is refused, and a request with little or no model work is served apart from the rest. The estimate
reads the request as it came (its options are checked later, in the work: one it cannot read
counts nothing, and the work refuses it) and is cheap: nothing is tokenized or split, the
sentences are counted by their end marks. It counts what the work may do, at most:

- **scoring the chunks** with a model scorer (any but ``bm25``, ``static`` and the given scores),
  when the chunks have no scores or ``rescore`` is set: one text per chunk, and the query;
- **the sentence model** (``prune``, ``summaries: auto``, ``order: auto`` for a ``model`` whose
  profile may prune; ``/v1/prune`` and ``/v1/highlight``), unless its scorer is ``lexical``: one
  text per sentence (two with ``dense2``) of the chunks it may read (the ``top_k`` with the most
  sentences), and the query, per pass.
- **the question of a retrieval** (``/v1/retrieve`` in the ``hybrid`` or ``dense`` mode): one text.

Texts the embedding cache already holds cost nothing when the work runs; the estimate counts them
all the same, so the answer to a request never depends on what came before it.

>>> estimate(PackRequest(query="q", chunks=["a", "b"], options={"scorer": "dense", "prune": 0.3}))
Cost(texts=6, parts=('3 to score the chunks with dense', '3 for the sentence model (prune)'))
>>> estimate(PackRequest(query="q", chunks=["a"])).texts
0
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .schemas import HighlightRequest, PackRequest, PruneRequest, RetrieveRequest, ScoreRequest, VariantsRequest

FREE_SCORERS = frozenset({"given", "bm25", "static"})  # no model (static: a table lookup, thousands a second)
_ENDS = re.compile(r"[.!?]+\s|\n")  # where a sentence may end: more than either splitter cuts at


@dataclass(frozen=True)
class Cost:
    """Model texts a request would send, and what for (one phrase per use of a model)."""

    texts: int = 0
    parts: tuple[str, ...] = ()

    def __add__(self, other: Cost) -> Cost:
        return Cost(self.texts + other.texts, self.parts + other.parts)

    def describe(self) -> str:
        return "; ".join(self.parts) if self.parts else "no model work"


FREE = Cost()


def _text(chunk: Any) -> str:
    if isinstance(chunk, str):
        return chunk
    if isinstance(chunk, Mapping) and isinstance(chunk.get("text"), str):
        return chunk["text"]
    return ""


def sentences(text: str) -> int:
    """An upper estimate of the sentences of ``text`` (0 for a blank one).

    >>> sentences("Paris is the capital. It is in France!  Lyon is not."), sentences("  ")
    (3, 0)
    """
    if not text or text.isspace():
        return 0
    return 1 + len(_ENDS.findall(text.rstrip()))


def scorer_cost(scorer: Any, chunks: Sequence[Any], rescore: bool = True) -> Cost:
    """The chunks and the query, when ``scorer`` is a model and the chunks get scored by it."""
    if not isinstance(scorer, str) or scorer.split(":", 1)[0] in FREE_SCORERS or not chunks:
        return FREE
    scored = rescore is True or any(not isinstance(c, Mapping) or c.get("score") is None for c in chunks)
    if not scored:
        return FREE
    return Cost(len(chunks) + 1, (f"{len(chunks) + 1} to score the chunks with {scorer}",))


def sentence_cost(head: Any, chunks: Sequence[Any], passes: Sequence[str], top_k: Any = None) -> Cost:
    """The sentence model's texts for ``passes`` (what reads the sentences) over ``chunks``."""
    per = {"lexical": 0, "dense2": 2}.get(head, 1) if isinstance(head, str) else 0
    if not per or not passes or not chunks:
        return FREE
    counts = [sentences(_text(c)) for c in chunks]
    if isinstance(top_k, int) and not isinstance(top_k, bool) and 0 < top_k < len(counts):
        counts = sorted(counts, reverse=True)[:top_k]
    n = (per * sum(counts) + 1) * len(passes)
    return Cost(n, (f"{n} for the sentence model ({', '.join(passes)})",))


def pack_cost(chunks: Sequence[Any], options: Any, order: str | None) -> Cost:
    """A pack's model texts under ``options`` (``order``: the server's, when they name none)."""
    opts = options if isinstance(options, Mapping) else {}
    order = opts.get("order", order)
    passes = [name for name, on in (("prune", opts.get("prune") is not None),
                                    ("order auto, which may prune",
                                     order == "auto" and opts.get("model") is not None and opts.get("prune") is None),
                                    ("summaries", opts.get("summaries") == "auto")) if on]
    return (scorer_cost(opts.get("scorer"), chunks, opts.get("rescore", False))
            + sentence_cost(opts.get("prune_scorer", "auto"), chunks, passes, opts.get("top_k")))


def estimate(body: Any, *, order: str | None = None) -> Cost:
    """The model texts of a ``/v1`` request body (``order``: the server's ``--order``)."""
    if isinstance(body, (PackRequest, VariantsRequest)):  # variants: each position packs the same texts (cached)
        return pack_cost(body.chunks, body.options, order if isinstance(body, PackRequest) else None)
    if isinstance(body, ScoreRequest):
        return scorer_cost(body.scorer, body.chunks)
    if isinstance(body, PruneRequest):
        return sentence_cost(body.scorer, body.chunks, ["prune"])
    if isinstance(body, HighlightRequest):
        chunks = [body.text] if body.text is not None else body.chunks or []
        return sentence_cost(body.scorer, chunks, ["highlight"])
    if isinstance(body, RetrieveRequest) and body.mode in ("hybrid", "dense"):
        return Cost(1, ("1 to embed the question",))
    return FREE

