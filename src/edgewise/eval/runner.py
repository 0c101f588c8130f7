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
  with :func:`edgewise.prune.steps.prune` and that scorer before packing (``pack(prune=)`` uses ``auto``).
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

import hashlib
import json
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any, TextIO

from ..checks import check_number
from ..errors import ConfigError, EdgewiseError, InputError
from ..options import PackOptions
from .backends import Backend
from .metrics import get_metric
from .store import Store, plan_cells
from .tasks import Example, Task, arrange

STOP = ("\n",)
REFERENCE = ("closedbook", "oracle")


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
    if "cue" in options and options["cue"] not in CUES:
        raise ConfigError(f"cue must be one of {', '.join(CUES)}, but got {options['cue']!r} in {spec!r}")
    try:  # the other options are pack()'s: unknown names and bad values fail here, before any prompt is built
        PackOptions.from_strings(_pack_options(options))
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


#: What ``cue=NAME`` appends to an edgewise condition's prompt, for a completion model that needs to
#: be told where its answer goes: ``question`` closes the prompt as the paper's layout does, with the
#: question again and ``Answer:``. A layout that ends on its own instructions (``sections``,
#: ``layered``) leaves a small completion model nothing to continue but more of the prompt.
CUES = {"question": "\n\nQuestion: {question}\nAnswer:"}
EVAL_OPTIONS = ("cue",)  # options of a condition that are the evaluation's, not pack()'s


def _pack_options(options: dict[str, Any]) -> dict[str, str]:
    return {k: str(v) for k, v in options.items() if k not in EVAL_OPTIONS}


@dataclass
class Prompt:
    """A built prompt and where the key chunk ended up (``None`` when the packer left it out);
    ``packed_tokens`` counts what ``pack()`` built, without a condition's cue."""

    text: str
    prompt_position: int | None
    n_docs: int
    packed_tokens: int


def build_prompt(task: Task, example: Example, position: int | None, condition: Condition) -> Prompt:
    """The prompt for one example, position and condition (``position`` is ignored by reference conditions)."""
    from ..packing.front import pack

    if condition.name == "closedbook":
        packed = pack(example.question, [], layout=task.layout)  # paper: the paper's closed-book prompt
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
        opts = PackOptions.from_strings({"layout": task.layout, **_pack_options(condition.options)})
        if opts.prune is not None and "prune_scorer" in condition.options:
            # as recorded in the committed runs: sentence-prune before ranking, so re-scoring reads the pruned text
            chunks = _pruned(example.question, chunks, opts.prune, opts.prune_scorer)
            opts = opts.replace(prune=None)
            if opts.order == "auto":  # pruned here at the condition's threshold: not again at the profile's
                from ..order.profiles import choose

                opts = opts.replace(order=choose(opts.model, task.layout, len(chunks)).order)
        packed = pack(example.question, chunks, opts)
    order = packed.debug_info.order
    where = order.index(example.key_id) if example.key_id in order else None
    cue = CUES[condition.options["cue"]].format(question=example.question) if "cue" in condition.options else ""
    return Prompt(packed.prompt + cue, where, len(order), _cl100k(packed))


def _cl100k(packed: Any) -> int:
    """The packed prompt's cl100k count (what the reports' "prompt tokens (cl100k)" column holds),
    whatever tokenizer the condition packed with (a ``model=`` condition counts with the model's)."""
    info = packed.debug_info
    if info.tokenizer == "cl100k_base":
        return info.prompt_tokens
    from ..tokens.tokenizers import get_tokenizer

    return get_tokenizer("cl100k_base").count(packed.prompt)


def _pruned(query: str, chunks: list[dict[str, Any]], threshold: Any, scorer: str) -> list[dict[str, Any]]:
    """Sentence-prune every chunk with :func:`edgewise.prune.steps.prune` and the given sentence scorer."""
    from ..chunk import Chunk
    from ..prune.steps import prune

    check_number("prune", threshold, low=0, high=1, what="a threshold in [0, 1]", error=ConfigError)
    kept = prune(query, [Chunk.from_dict(c, i) for i, c in enumerate(chunks)], float(threshold), scorer=scorer)
    return [{**c, "text": k.text} for c, k in zip(chunks, kept)]


@dataclass
class Summary:
    """What a call to :func:`run` did: ``total`` results planned, ``skipped`` already stored, ``done`` now."""

    out_dir: str
    total: int
    skipped: int
    done: int
    seconds: float


class Interrupted(KeyboardInterrupt):
    """A run stopped by Ctrl-C: every answer received is stored and the run directory unlocked.

    It is a :class:`KeyboardInterrupt`, so code that does not know it still stops; the CLI prints its
    message as one line. ``summary`` says how far the run got.
    """

    def __init__(self, summary: Summary) -> None:
        left = summary.total - summary.skipped - summary.done
        super().__init__(f"stopped; run the same command to resume ({summary.done} answers stored now, {left} left)")
        self.summary = summary


def run(task: Task, conditions: Sequence[str | Condition], backend: Backend, out_dir: str, *,
        progress: bool | None = None, stream: TextIO | None = None, ray_address: str | None = None,
        ray_task_cpus: float | None = None, reuse: bool = True) -> Summary:
    """Ask ``backend`` every (example, position, condition) not yet in ``out_dir``'s store.

    The run directory is locked for the whole run (a second runner on it stops with
    :class:`~edgewise.eval.store.RunLocked`); ``run.json`` records the plan (every result the run
    asks for), so a report can tell an incomplete grid. A backend error (after its retries) stops the
    run and is raised; Ctrl-C raises :class:`Interrupted`; in both cases what was answered is kept.
    ``progress``: a bar on ``stream`` (stderr), ``None`` only when it is a terminal.
    ``ray_address``: build the prompts and ask the endpoint in Ray tasks on that cluster (``auto``,
    ``HOST:PORT``, ``ray://HOST:PORT``, or ``local`` for a Ray instance started for the run), at most
    ``backend.concurrency`` at once, each taking ``ray_task_cpus`` CPUs (see :mod:`edgewise.eval.ray_fanout`);
    the answers come back to this process, the store's one writer.
    ``reuse``: a cell whose prompt is identical to one already answered in the run (by this model) takes
    that answer instead of asking again (see :func:`answer`); not with ``ray_address``.
    """
    if ray_address is not None and backend.name == "local":
        raise ConfigError("ray_address fans the requests out to an endpoint, which the local backend (a model in this "
                          "process) is not; use the openai backend against a server, e.g. llama.cpp's or vLLM's")
    conds = [c if isinstance(c, Condition) else parse_condition(c) for c in conditions]
    if not conds:
        raise InputError("conditions must name at least one condition, e.g. baseline")
    names = [c.name for c in conds]
    if len(set(names)) != len(names):
        raise InputError(f"conditions must be distinct, but got {names}")
    metric = get_metric(task.metric)
    for c in conds:  # fail on a bad condition before any request
        build_prompt(task, task.examples[0], task.positions[0], c)
    decoding = {**backend.describe(), "max_tokens": task.max_tokens, "stop": list(STOP)}
    # what identifies an example's content: not how many were asked for (a longer run reuses a shorter one)
    identity = {k: v for k, v in task.params.items() if k not in ("examples", "lengths", "offset")}
    plan = json.loads(json.dumps({  # as run.json will hold it, so a report finds the same keys
        "examples": [ex.id for ex in task.examples], "positions": list(task.positions),
        "grid": [[c.name, list(task.positions) if c.positional else [None]] for c in conds],
        "key": {"task": task.name, "task_params": identity, "model": backend.model, "decoding": decoding},
    }))
    examples = {ex.id: ex for ex in task.examples}
    by_name = {c.name: c for c in conds}
    store = Store(out_dir)
    with store.lock():
        store.write_manifest({"task": task.name, "task_params": task.params, "positions": task.positions,
                              "position_unit": task.position_unit, "conditions": names, "backend": decoding,
                              "model": backend.model, "metric": task.metric, "layout": task.layout, "plan": plan})
        stored = store.load()  # read once: a torn tail is reported once
        done = {r["key"] for r in stored}
        cells = list(plan_cells(plan))
        jobs = [(key, examples[e], pos, by_name[c]) for key, e, pos, c in cells if key not in done]
        summary = Summary(str(out_dir), len(cells), len(cells) - len(jobs), 0, 0.0)
        if ray_address is None:
            memo = Reuse(backend.model, stored) if reuse else None
            return _ask(task, jobs, backend, metric, store, summary, progress, stream, reuse=memo)
        from .ray_fanout import fan_out

        def over_ray(write: Callable[[dict[str, Any]], None]) -> None:
            fan_out(task, jobs, backend, _cell, write, address=ray_address, task_cpus=ray_task_cpus)

        return _ask(task, jobs, backend, metric, store, summary, progress, stream, over_ray)


def answer(task: Task, job: tuple[str, Example, int | None, Condition], backend: Backend,
           metric: Callable[[str, Sequence[str]], float], reuse: Reuse | None = None) -> dict[str, Any]:
    """The stored record of one cell ``(key, example, position, condition)``: build its prompt, ask, score.

    With ``reuse``, a prompt identical to one already answered in this run is not asked again: its
    answer is taken (the decoding is greedy and the local backend starts every prompt from a fresh
    state, so asking again gives the same answer) and the record names the cell it came from.
    """
    key, ex, pos, c = job
    started = time.perf_counter()
    prompt = build_prompt(task, ex, pos, c)
    built = time.perf_counter() - started  # packing, and the summaries an LLM writes for it (none when cached)
    digest = hashlib.sha256(prompt.text.encode("utf-8")).hexdigest()
    earlier = reuse.get(digest) if reuse is not None else None
    if earlier is not None:
        fields = {k: earlier[k] for k in ("prediction", "prompt_tokens", "completion_tokens", "seconds", "attempts")}
        fields["reused"] = earlier["key"]
    else:
        out = backend.complete(prompt.text, max_tokens=task.max_tokens, stop=STOP)
        fields = {"prediction": out.text, "prompt_tokens": out.prompt_tokens, "completion_tokens": out.completion_tokens,
                  "seconds": round(out.seconds, 4), "attempts": out.attempts}
    record = {
        "key": key, "task": task.name, "example": ex.id, "condition": c.name, "position": pos,
        "slot": None if pos is None else task.slot(ex, pos), "prompt_position": prompt.prompt_position, "n_docs": prompt.n_docs,
        "model": backend.model, "backend": backend.name, "answers": ex.answers, "correct": metric(fields["prediction"], ex.answers),
        "packed_tokens": prompt.packed_tokens, "prompt_sha256": digest, "build_seconds": round(built, 4), **fields,
        "meta": ex.meta, "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    if reuse is not None and earlier is None:
        reuse.add(digest, record)
    return record


class Reuse:
    """The answered prompts of a run, by SHA-256 of the prompt text (thread-safe): what :func:`answer`
    reuses. Seeded from the stored records of the same model that carry a ``prompt_sha256``."""

    def __init__(self, model: str, records: Sequence[dict[str, Any]] = ()) -> None:
        self._lock = threading.Lock()
        self._by_digest: dict[str, dict[str, Any]] = {}
        for r in records:
            if r.get("model") == model and "prompt_sha256" in r and "reused" not in r:
                self._by_digest.setdefault(r["prompt_sha256"], r)

    def get(self, digest: str) -> dict[str, Any] | None:
        with self._lock:
            return self._by_digest.get(digest)

    def add(self, digest: str, record: dict[str, Any]) -> None:
        with self._lock:
            self._by_digest.setdefault(digest, record)


def _cell(task: Task, job: tuple[str, Example, int | None, Condition], backend: Backend) -> dict[str, Any]:
    """:func:`answer` with the task's metric: what one Ray task runs."""
    return answer(task, job, backend, get_metric(task.metric))


def _ask(task: Task, jobs: list[tuple[str, Example, int | None, Condition]], backend: Backend,
         metric: Callable[[str, Sequence[str]], float], store: Store, summary: Summary, progress: bool | None,
         stream: TextIO | None, elsewhere: Callable[[Callable[[dict[str, Any]], None]], None] | None = None,
         reuse: Reuse | None = None) -> Summary:
    """Answer ``jobs`` (serially, ``backend.concurrency`` at a time, or by ``elsewhere(write)``, which hands
    every record it gets back to ``write``) into the store; fills ``summary``."""
    from tqdm import tqdm

    bar = tqdm(total=len(jobs), desc=f"{task.name} {backend.model}", unit="answer", file=stream or sys.stderr,
               dynamic_ncols=True, disable=True if not jobs else (None if progress is None else not progress))
    start = time.monotonic()
    lock = threading.Lock()
    closed = threading.Event()  # set when the run ends: a late answer from a worker is not stored
    score = [0.0]

    def write(record: dict[str, Any]) -> None:  # the store's one writer
        with lock:
            if closed.is_set():
                return
            store.append(record)
            summary.done += 1
            score[0] += record["correct"]
            bar.set_postfix_str(f"accuracy {score[0] / summary.done:.2f}", refresh=False)
            bar.update(1)

    def one(job: tuple[str, Example, int | None, Condition]) -> None:
        write(answer(task, job, backend, metric, reuse))

    try:
        workers = max(1, int(getattr(backend, "concurrency", 1)))
        if elsewhere is not None:
            elsewhere(write)
        elif workers == 1:
            for job in jobs:
                one(job)
        else:
            pool = ThreadPoolExecutor(max_workers=workers)
            try:
                futures = [pool.submit(one, j) for j in jobs]
                finished, _ = wait(futures, return_when=FIRST_EXCEPTION)
                failed = next((f for f in finished if f.exception() is not None), None)
                if failed is not None:
                    raise failed.exception()  # type: ignore[misc]
            finally:  # drop what has not started; let the requests in flight finish and be stored
                pool.shutdown(wait=True, cancel_futures=True)
    except KeyboardInterrupt:
        closed.set()
        summary.seconds = time.monotonic() - start
        raise Interrupted(summary) from None
    finally:
        with lock:
            closed.set()
        bar.close()
    summary.seconds = time.monotonic() - start
    return summary
