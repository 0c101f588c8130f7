"""Run a task under several conditions against a backend, storing one result per key.

A *condition* is how the prompt is built from an example whose key chunk sits at a given retrieval
position:

- ``baseline``: the paper's setup. The key chunk is placed at that position of the prompt and the
  other chunks keep their order (``order=position:K`` with the key known).
- ``closedbook`` and ``oracle``: reference points that do not depend on position (the question
  alone; the question with only the key chunk), asked once per example, stored with position ``None``.
- ``edgewise:order=edges,layout=paper,...``: :func:`edgewise.pack` with those options, given the
  chunks as a retriever would (key chunk ranked at that position, scores falling with rank) but
  *not* told which chunk holds the answer. Options are ``pack()`` keyword arguments, plus
  ``prune_scorer=lexical|dense|auto``, which with ``prune=THRESHOLD`` sentence-prunes every chunk
  with :func:`edgewise.prune.prune` and that scorer before packing (``pack(prune=)`` uses ``auto``).
  The chunks carry the retriever's scores, so ``scorer=NAME`` needs ``rescore=true`` (the packer then
  ranks them itself, ignoring the retrieval order); alone it is refused rather than silently ignored.

Results go to an append-only store keyed by (task, example, condition, position, model, decoding
parameters): running the same command again skips what is already there, so a run killed at any
moment resumes with nothing lost and nothing duplicated.

>>> parse_condition("edgewise:order=edges,budget=900").options
{'budget': 900, 'order': 'edges'}
>>> parse_condition("baseline").name
'baseline'
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any, TextIO

from ..errors import ConfigError, EdgewiseError, InputError
from ..options import PackOptions
from .backends import Backend
from .metrics import get_metric
from .store import Store, result_key
from .tasks import Example, Task, arrange

STOP = ("\n",)
REFERENCE = ("closedbook", "oracle")
CLOSEDBOOK_INSTRUCTION = "Write a high-quality answer for the given question."


@dataclass(frozen=True)
class Condition:
    """A way of building the prompt; ``name`` is canonical and part of the result key."""

    name: str
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def baseline(self) -> bool:
        return self.name == "baseline"

    @property
    def positional(self) -> bool:
        """Whether the condition is asked once per position (all but ``closedbook`` and ``oracle``)."""
        return self.name not in REFERENCE


def _value(text: str) -> Any:
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("none", "null"):
        return None
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def parse_condition(spec: str) -> Condition:
    """``baseline`` or ``edgewise[:key=value,...]`` into a :class:`Condition`."""
    spec = spec.strip()
    if spec in ("baseline", *REFERENCE):
        return Condition(spec)
    head, _, rest = spec.partition(":")
    if head != "edgewise":
        raise ConfigError(
            f"condition must be baseline, closedbook, oracle or 'edgewise:key=value,...', but got {spec!r}"
        )
    options: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in rest.split(","))):
        k, eq, v = part.partition("=")
        if not eq or not k.strip():
            raise ConfigError(f"condition options must be key=value, but got {part!r} in {spec!r}")
        options[k.strip().replace("-", "_")] = _value(v.strip())
    try:  # the options are pack()'s: unknown names and bad values fail here, before any prompt is built
        PackOptions.from_strings({k: str(v) for k, v in options.items()})
    except EdgewiseError as exc:
        raise ConfigError(f"condition {spec!r}: {exc}") from None
    if "key_id" in options or str(options.get("order", "")).startswith("position"):
        raise ConfigError(f"an edgewise condition must not be told the key chunk, but got {spec!r}; use 'baseline'")
    if "scorer" in options and options.get("rescore") is not True:
        raise ConfigError(
            f"scorer= has no effect on chunks that carry the retriever's scores unless rescore=true, but got {spec!r}; "
            "add rescore=true to have the packer score them itself"
        )
    options.setdefault("order", "edges")
    options = dict(sorted(options.items()))
    return Condition("edgewise:" + ",".join(f"{k}={v}" for k, v in options.items()), options)


@dataclass
class Prompt:
    """A built prompt and where the key chunk ended up (``None`` when the packer left it out)."""

    text: str
    prompt_position: int | None
    n_docs: int
    packed_tokens: int


def build_prompt(task: Task, example: Example, position: int | None, condition: Condition) -> Prompt:
    """The prompt for one example, position and condition (``position`` is ignored by reference conditions)."""
    from ..pack import pack

    if condition.name == "closedbook":
        packed = pack(example.question, [], layout=task.layout, system=CLOSEDBOOK_INSTRUCTION if task.layout == "paper" else None)
        return Prompt(packed.prompt, None, 0, packed.debug_info.prompt_tokens)
    if condition.name == "oracle":
        key = next(c for c in example.chunks if c["id"] == example.key_id)
        packed = pack(example.question, [key], layout=task.layout)
        return Prompt(packed.prompt, 0, 1, packed.debug_info.prompt_tokens)
    slot = task.slot(example, position)
    chunks = arrange(example, slot)
    if condition.baseline:
        packed = pack(example.question, chunks, order=f"position:{slot}", key_id=example.key_id, layout=task.layout)
    else:
        opts = PackOptions.from_strings({"layout": task.layout, **{k: str(v) for k, v in condition.options.items()}})
        if opts.prune is not None and "prune_scorer" in condition.options:
            # as recorded in the committed runs: sentence-prune before ranking, so re-scoring reads the pruned text
            chunks = _pruned(example.question, chunks, opts.prune, opts.prune_scorer)
            opts = opts.replace(prune=None)
        packed = pack(example.question, chunks, opts)
    order = packed.debug_info.order
    where = order.index(example.key_id) if example.key_id in order else None
    return Prompt(packed.prompt, where, len(order), packed.debug_info.prompt_tokens)


def _pruned(query: str, chunks: list[dict[str, Any]], threshold: Any, scorer: str) -> list[dict[str, Any]]:
    """Sentence-prune every chunk with :func:`edgewise.prune.prune` and the given sentence scorer."""
    from ..chunk import Chunk
    from ..prune import prune

    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)):
        raise ConfigError(f"prune must be a threshold between 0 and 1, but got {threshold!r}")
    kept = prune(query, [Chunk.from_dict(c, i) for i, c in enumerate(chunks)], float(threshold), scorer=scorer)
    return [{**c, "text": k.text} for c, k in zip(chunks, kept)]


@dataclass
class Summary:
    """What a call to :func:`run` did."""

    out_dir: str
    total: int
    skipped: int
    done: int
    seconds: float


class Progress:
    """A one-line progress bar with rate and ETA on stderr (plain lines when not a terminal)."""

    def __init__(self, total: int, label: str = "eval", stream: TextIO | None = None, enabled: bool = True) -> None:
        self.total, self.label, self.n = total, label, 0
        self.stream = stream or sys.stderr
        self.enabled = enabled and total > 0
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.start = time.monotonic()
        self._last_pct = -1

    def update(self, correct: float | None = None) -> None:
        self.n += 1
        if not self.enabled:
            return
        pct = 100 * self.n // self.total
        if not self.tty and pct // 10 == self._last_pct // 10 and self.n != self.total:
            return
        self._last_pct = pct
        elapsed = time.monotonic() - self.start
        eta = elapsed / self.n * (self.total - self.n)
        bar = "#" * (pct // 5) + "." * (20 - pct // 5)
        line = f"{self.label} [{bar}] {self.n}/{self.total} {pct}% {elapsed / self.n:.2f}s/it ETA {_clock(eta)}"
        self.stream.write(("\r" + line) if self.tty else line + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self.enabled and self.tty:
            self.stream.write("\n")
            self.stream.flush()


def _clock(seconds: float) -> str:
    m, s = divmod(int(seconds + 0.5), 60)
    h, m = divmod(m, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def run(task: Task, conditions: Sequence[str | Condition], backend: Backend, out_dir: str, *,
        progress: bool = True, stream: TextIO | None = None) -> Summary:
    """Ask ``backend`` every (example, position, condition) not yet in ``out_dir``'s store.

    A backend error (after its retries) stops the run and is raised; what was answered is kept.
    """
    conds = [c if isinstance(c, Condition) else parse_condition(c) for c in conditions]
    if not conds:
        raise InputError("conditions must name at least one condition, e.g. baseline")
    names = [c.name for c in conds]
    if len(set(names)) != len(names):
        raise InputError(f"conditions must be distinct, but got {names}")
    metric = get_metric(task.metric)
    store = Store(out_dir)
    decoding = {**backend.describe(), "max_tokens": task.max_tokens, "stop": list(STOP)}
    store.write_manifest({"task": task.name, "task_params": task.params, "positions": task.positions,
                          "position_unit": task.position_unit, "conditions": names, "backend": decoding,
                          "metric": task.metric, "layout": task.layout})
    # fail on a bad condition before any request
    for c in conds:
        build_prompt(task, task.examples[0], task.positions[0], c)

    # what identifies an example's content: not how many were asked for (a longer run reuses a shorter one)
    identity = {k: v for k, v in task.params.items() if k not in ("examples", "lengths", "offset")}
    done = store.keys()
    jobs = []
    for ex in task.examples:
        for pos in task.positions:
            for c in conds:
                if not c.positional and pos != task.positions[0]:
                    continue
                at = pos if c.positional else None
                key = result_key(task=task.name, task_params=identity, example=ex.id, condition=c.name,
                                 position=at, model=backend.model, decoding=decoding)
                if key not in done:
                    jobs.append((key, ex, at, c))
    positional = sum(c.positional for c in conds)
    total = len(task.examples) * (len(task.positions) * positional + len(conds) - positional)
    bar = Progress(len(jobs), f"{task.name} {backend.model}", stream, progress)
    start = time.monotonic()
    lock = threading.Lock()

    def one(job: tuple[str, Example, int, Condition]) -> None:
        key, ex, pos, c = job
        prompt = build_prompt(task, ex, pos, c)
        out = backend.complete(prompt.text, max_tokens=task.max_tokens, stop=STOP)
        correct = metric(out.text, ex.answers)
        store.append({
            "key": key, "task": task.name, "example": ex.id, "condition": c.name, "position": pos,
            "slot": None if pos is None else task.slot(ex, pos), "prompt_position": prompt.prompt_position, "n_docs": prompt.n_docs,
            "model": backend.model, "backend": backend.name, "prediction": out.text, "answers": ex.answers,
            "correct": correct, "prompt_tokens": out.prompt_tokens, "packed_tokens": prompt.packed_tokens,
            "completion_tokens": out.completion_tokens, "seconds": round(out.seconds, 4), "attempts": out.attempts,
            "meta": ex.meta, "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        })
        with lock:
            bar.update(correct)

    try:
        workers = max(1, int(getattr(backend, "concurrency", 1)))
        if workers == 1:
            for job in jobs:
                one(job)
        else:
            with ThreadPoolExecutor(max_workers=workers) as pool:
                futures = [pool.submit(one, j) for j in jobs]
                finished, _ = wait(futures, return_when=FIRST_EXCEPTION)
                failed = next((f for f in finished if f.exception() is not None), None)
                if failed is not None:
                    for f in futures:
                        f.cancel()
                    raise failed.exception()  # type: ignore[misc]
    finally:
        bar.close()
    return Summary(str(out_dir), total, total - len(jobs), len(jobs), time.monotonic() - start)
