"""ONNX plumbing for the model scorers (extra ``models``): imports, sessions, tokenizers, batching.

What ``dense`` and ``cross`` share, tuned for small CPUs:

- :func:`need` imports an optional library or raises the ``ImportError`` that names the extra;
- :func:`onnx_session`: an onnxruntime session with every core this process may use for intra-op
  work, one inter-op thread, full graph optimisation and no spin-waiting;
- :func:`hf_tokenizer`: a ``tokenizer.json`` with its fixed padding off and a deliberate
  truncation length;
- :func:`batches` and :class:`Encoder`: texts are tokenized once, **sorted by length and batched
  in buckets**, and each batch is padded to its own longest member, so short texts cost what they
  are;
- :class:`OnnxModel`: a model file and its tokenizer, loaded on first use, run bucket by bucket,
  with the work's deadline (:mod:`edgewise.score.deadline`) checked before each bucket.

Importing this module is free: onnxruntime, numpy and tokenizers load when a model is first run.

>>> batches([5, 100, 6], batch_size=2)
[[0, 2], [1]]
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from . import deadline

EXTRA_HINT = "pip install -e '.[models]' (in an edgewise checkout)"
ENCODE_SLICE = 1024  # texts tokenized per call (the deadline is checked between calls)


def need(module: str, what: str) -> Any:
    """Import ``module`` or raise the ImportError that names the extra to install.

    >>> need("edgewise_no_such_module", "the example")
    Traceback (most recent call last):
    ...
    ImportError: the example needs edgewise_no_such_module: pip install -e '.[models]' (in an edgewise checkout)
    """
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise ImportError(f"{what} needs {module.split('.')[0]}: {EXTRA_HINT}") from None


def cpu_threads() -> int:
    """Cores this process may run on (affinity-aware), for onnxruntime's intra-op pool."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - macOS, Windows
        return max(1, os.cpu_count() or 1)


def onnx_session(path: Path, threads: int | None = None, providers: Sequence[str] = ("CPUExecutionProvider",)) -> Any:
    """An onnxruntime session with the thread pools set for one process on this machine."""
    ort = need("onnxruntime", "running an ONNX model")
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads or cpu_threads()
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.log_severity_level = 3
    # no busy-waiting between ops: on a shared 2-core machine spinning threads fight other processes
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    try:
        return ort.InferenceSession(str(path), sess_options=opts, providers=list(providers))
    except Exception as exc:  # onnxruntime raises its own untyped errors
        raise ConfigError(f"ONNX model {str(path)!r} could not be loaded: {exc}") from None


def hf_tokenizer(path: Path, max_length: int) -> Any:
    """A ``tokenizer.json`` with padding off and truncation set to ``max_length`` on purpose."""
    tokenizers = need("tokenizers", "an ONNX model's tokenizer")
    try:
        tok = tokenizers.Tokenizer.from_file(str(path))
    except Exception as exc:  # tokenizers raises bare Exceptions
        raise ConfigError(f"tokenizer {str(path)!r} could not be loaded: {exc}") from None
    tok.no_padding()
    tok.enable_truncation(max_length)
    return tok


def batches(lengths: Sequence[int], batch_size: int, max_tokens: int = 8192) -> list[list[int]]:
    """Indexes grouped into length buckets: sorted by length, at most ``batch_size`` per batch and
    at most ``max_tokens`` padded tokens per batch.

    >>> batches([5, 100, 6, 99, 7], batch_size=2)
    [[0, 2], [4, 3], [1]]
    """
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
    out: list[list[int]] = []
    cur: list[int] = []
    for i in order:
        if cur and (len(cur) >= batch_size or lengths[i] * (len(cur) + 1) > max_tokens):
            out.append(cur)
            cur = []
        cur.append(i)
    if cur:
        out.append(cur)
    return out


class Encoder:
    """Token ids for a list of texts (or text pairs), padded per batch to the batch's true length."""

    def __init__(self, tokenizer_path: Path, max_length: int) -> None:
        self.tok = hf_tokenizer(tokenizer_path, max_length)
        self.max_length = max_length

    def encode(self, texts: Sequence[str] | Sequence[tuple[str, str]]) -> list[Any]:
        return self.tok.encode_batch(list(texts))

    @staticmethod
    def pad(encs: Sequence[Any], input_names: Sequence[str]) -> dict[str, Any]:
        np = need("numpy", "running an ONNX model")
        width = max(len(e.ids) for e in encs)
        ids = np.zeros((len(encs), width), dtype=np.int64)
        mask = np.zeros_like(ids)
        types = np.zeros_like(ids)
        for row, e in enumerate(encs):
            n = len(e.ids)
            ids[row, :n] = e.ids
            mask[row, :n] = 1
            types[row, :n] = e.type_ids
        feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        return {name: feed[name] for name in input_names if name in feed}


class OnnxModel:
    """An ONNX model file and its ``tokenizer.json``, loaded once on first use (under a lock, so
    threads share one session), run in length buckets of at most ``batch_size`` texts.

    With ``batch_size=1`` (one text per run, as the int8 model needs) a run is too small to keep
    several cores busy: the session then runs single-threaded and the texts are spread over
    ``threads`` concurrent runs instead (onnxruntime releases the GIL while it runs).
    """

    def __init__(self, model: Path, tokenizer: Path, *, max_length: int, batch_size: int,
                 threads: int | None = None) -> None:
        if max_length <= 0 or batch_size <= 0:
            raise ConfigError(f"max_length and batch_size must be > 0, but got {max_length} and {batch_size}")
        self.model_path = model
        self.tokenizer_path = tokenizer
        self.max_length = max_length
        self.batch_size = batch_size
        self.threads = threads
        self._session: Any = None
        self._encoder: Encoder | None = None
        self._lock = threading.Lock()

    @property
    def encoder(self) -> Encoder:
        """The tokenizer, loading the model first if needed."""
        self.load()
        assert self._encoder is not None
        return self._encoder

    def load(self) -> None:
        """Create the session and the tokenizer (once)."""
        if self._session is not None:
            return
        with self._lock:
            if self._session is not None:
                return
            encoder = Encoder(self.tokenizer_path, self.max_length)
            self._workers = (self.threads or cpu_threads()) if self.batch_size == 1 else 1
            session = onnx_session(self.model_path, 1 if self._workers > 1 else self.threads)
            self._inputs = [i.name for i in session.get_inputs()]
            self._output = session.get_outputs()[0].name
            self._encoder = encoder
            self._session = session  # last: it is what tells other threads the model is ready

    def run(self, texts: Sequence[str] | Sequence[tuple[str, str]]) -> Iterator[tuple[list[int], dict[str, Any], Any]]:
        """For each length bucket: the indexes of its texts, the padded inputs fed to the model
        and the model's first output (one row per index). The work's deadline
        (:mod:`edgewise.score.deadline`) is checked between slices of tokenizing and before each
        bucket is started: past it, :class:`~edgewise.score.deadline.Cancelled` within one bucket."""
        at = deadline.current()
        encs: list[Any] = []
        for start in range(0, len(texts), ENCODE_SLICE):
            deadline.check(at)
            encs.extend(self.encoder.encode(texts[start:start + ENCODE_SLICE]))
        todo = batches([len(e.ids) for e in encs], self.batch_size)
        feeds = (Encoder.pad([encs[i] for i in batch], self._inputs) for batch in todo)
        if self._workers == 1 or len(todo) == 1:
            for batch, feed in zip(todo, feeds):
                deadline.check(at)
                yield batch, feed, self._session.run([self._output], feed)[0]
            return
        from collections import deque
        from concurrent.futures import Future, ThreadPoolExecutor

        def one(feed: dict[str, Any]) -> Any:
            deadline.check(at)  # runs queued past the deadline end at once
            return self._session.run([self._output], feed)[0]

        # runs are queued as they are padded, a window of them per thread (enough to keep the threads
        # busy), not all at once: past the deadline no more are queued and the queued ones end at once
        with ThreadPoolExecutor(self._workers, thread_name_prefix="edgewise-onnx") as pool:
            window: deque[tuple[list[int], dict[str, Any], Future[Any]]] = deque()
            for batch, feed in zip(todo, feeds):
                deadline.check(at)
                window.append((batch, feed, pool.submit(one, feed)))
                if len(window) > 16 * self._workers:
                    done, fed, future = window.popleft()
                    yield done, fed, future.result()
            for done, fed, future in window:
                yield done, fed, future.result()
