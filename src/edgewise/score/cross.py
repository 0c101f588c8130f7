"""``cross:PATH``: a local cross-encoder reranker, as an ONNX file or a Hugging Face folder.

No cross-encoder ships in a PyPI package (flashrank and rerankers download at run time), so this
scorer loads one the user already has:

- ``cross:model.onnx`` or ``cross:DIR`` holding ``*.onnx`` (or ``onnx/*.onnx``) and
  ``tokenizer.json``: runs with onnxruntime + tokenizers (extra ``models``);
- ``cross:DIR`` holding only PyTorch weights (``model.safetensors``...): runs with
  ``transformers`` and ``torch``, which the user installs.

Query and text go in as a sentence pair; the score is the single logit (or, for a two-class head,
``logit[1] - logit[0]``). Pairs are batched by length and padded to each batch's own length, and
scores are cached by a hash of (query, text). The work's deadline (:mod:`edgewise.score.deadline`)
is checked before each batch.

>>> get_scorer("cross:/nonexistent")
Traceback (most recent call last):
...
edgewise.errors.ConfigError: cross:PATH needs an .onnx file or a model folder, but '/nonexistent' does not exist
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from . import deadline, get_scorer, scorer  # noqa: F401  (get_scorer: for the doctest)
from .dense import EmbeddingCache
from .onnx import EXTRA_HINT, Encoder, batches, need, onnx_session


def find_model(path: str | Path) -> tuple[str, Path, Path]:
    """``("onnx", model, tokenizer.json)`` or ``("hf", folder, folder)`` for a user's path."""
    p = Path(path)
    if not p.exists():
        raise ConfigError(f"cross:PATH needs an .onnx file or a model folder, but {str(path)!r} does not exist")
    if p.is_file():
        if p.suffix != ".onnx":
            raise ConfigError(f"cross:PATH must be an .onnx file or a folder, but got {str(path)!r}")
        tok = next((d / "tokenizer.json" for d in (p.parent, p.parent.parent) if (d / "tokenizer.json").is_file()), None)
        if tok is None:
            raise ConfigError(f"cross:{path} needs a tokenizer.json beside the .onnx file")
        return "onnx", p, tok
    onnx = sorted(p.glob("*.onnx")) or sorted(p.glob("onnx/*.onnx"))
    if onnx:
        if not (p / "tokenizer.json").is_file():
            raise ConfigError(f"cross:{path} holds {onnx[0].name} but no tokenizer.json")
        return "onnx", onnx[0], p / "tokenizer.json"
    if any((p / f).is_file() for f in ("model.safetensors", "pytorch_model.bin")):
        return "hf", p, p
    raise ConfigError(
        f"cross:{path} must hold an .onnx model and tokenizer.json, or a Hugging Face model "
        "(config.json + model.safetensors), but it holds neither"
    )


def _logit(row: Any) -> float:
    values = [float(x) for x in (row.reshape(-1) if hasattr(row, "reshape") else [row])]
    return values[0] if len(values) == 1 else values[-1] - values[0]


class CrossEncoderScorer:
    """Scores (query, text) pairs with a local cross-encoder; see the module docstring."""

    def __init__(self, path: str | Path, *, max_length: int = 512, batch_size: int = 16, threads: int | None = None) -> None:
        self.kind, self.model_path, self.tokenizer_path = find_model(path)
        self.name = f"cross:{path}"
        self.max_length = max_length
        self.batch_size = batch_size
        self.threads = threads
        self.cache = EmbeddingCache()
        self.scored = 0
        self._model: Any = None
        self._lock = threading.Lock()

    def _load(self) -> None:
        with self._lock:
            if self._model is not None:
                return
            if self.kind == "onnx":
                self._encoder = Encoder(self.tokenizer_path, self.max_length)
                self._model = onnx_session(self.model_path, self.threads)
                self._inputs = [i.name for i in self._model.get_inputs()]
                self._output = self._model.get_outputs()[0].name
            else:
                transformers = need("transformers", "cross:PATH for a PyTorch folder (also needs torch)")
                need("torch", "cross:PATH for a PyTorch folder")
                self._hf_tok = transformers.AutoTokenizer.from_pretrained(str(self.model_path), local_files_only=True)
                self._model = transformers.AutoModelForSequenceClassification.from_pretrained(
                    str(self.model_path), local_files_only=True
                ).eval()

    def _score_pairs(self, pairs: list[str]) -> list[float]:
        self._load()
        split = [tuple(p.split("\x00", 1)) for p in pairs]
        out: list[float] = [0.0] * len(split)
        if self.kind == "onnx":
            encs = self._encoder.encode(split)
            for batch in batches([len(e.ids) for e in encs], self.batch_size):
                deadline.check()  # past the work's deadline: stop between batches
                feed = Encoder.pad([encs[i] for i in batch], self._inputs)
                logits = self._model.run([self._output], feed)[0]
                for row, i in enumerate(batch):
                    out[i] = _logit(logits[row])
        else:
            import torch

            for start in range(0, len(split), self.batch_size):
                deadline.check()
                part = split[start : start + self.batch_size]
                enc = self._hf_tok([q for q, _ in part], [t for _, t in part], padding=True, truncation=True,
                                   max_length=self.max_length, return_tensors="pt")
                with torch.no_grad():
                    logits = self._model(**enc).logits.numpy()
                for row in range(len(part)):
                    out[start + row] = _logit(logits[row])
        self.scored += len(pairs)
        return out

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        if not texts:
            return []
        return [float(x) for x in self.cache.get_many([f"{query}\x00{t}" for t in texts], self._score_pairs)]

    def stats(self) -> dict[str, int]:
        """Cache hits and misses, and pairs scored by the model."""
        return {**self.cache.stats(), "scored": self.scored}


_loaded: dict[str, CrossEncoderScorer] = {}  # one scorer (model session and cache) per path
_loaded_lock = threading.Lock()


@scorer("cross")
def _make_cross(arg: str | None) -> CrossEncoderScorer:
    if not arg:
        raise ConfigError(f"the cross scorer needs a model path: cross:PATH (an .onnx file or a folder); {EXTRA_HINT}")
    with _loaded_lock:  # building one only checks the path (the model loads on first use)
        s = _loaded.get(arg)
        if s is None:
            s = _loaded[arg] = CrossEncoderScorer(arg)
        return s
