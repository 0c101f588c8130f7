"""``static``: cosine of static (model2vec-style) embeddings, extra ``models``.

The model is ``tokenlearn-static-model``: a 10k-token, 64-dimension int8 embedding table with a
Rust encoder, baked into its wheel. It embeds thousands of sentences a second on one core and is
much weaker than ``dense``: a cheap pre-filter, or a scorer for when no time is left.

>>> from edgewise.score import get_scorer
>>> a, b = get_scorer("static").score("capital of france",
...                                   ["Paris is the capital of France.", "Bananas are yellow."])
>>> a > b
True
"""

from __future__ import annotations

import threading
from typing import Any

from . import scorer
from .dense import CachedEmbedder, EmbeddingCache
from .onnx import need


class StaticScorer(CachedEmbedder):
    """Cosine between static embeddings of the query and each text, through a content-hash cache."""

    name = "static"

    def __init__(self, cache: EmbeddingCache | None = None) -> None:
        self.cache = cache if cache is not None else EmbeddingCache()
        self.embedded = 0

    def _embed_uncached(self, texts: list[str]) -> list[Any]:
        np = need("numpy", "the static scorer")
        model = need("static_model", "the static scorer (tokenlearn-static-model)")
        vecs = np.asarray(model.get_embeddings(list(texts)), dtype=np.float32)
        vecs /= np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)
        self.embedded += len(texts)
        return list(vecs)


_shared: list[StaticScorer] = []
_shared_lock = threading.Lock()


@scorer("static")
def _make_static(arg: str | None) -> StaticScorer:
    with _shared_lock:  # one process-wide scorer, so every user shares its cache
        if not _shared:
            _shared.append(StaticScorer())
        return _shared[0]
