"""Evaluation tasks: examples whose answer sits in one known chunk, and where that chunk may go.

A task is a list of :class:`Example` (a question, its gold answers, the chunks in retrieval order
and the id of the chunk that holds the answer), the positions to test, the layout of the paper's
prompt, the metric and the answer length. Four tasks are registered:

- ``kv``: key-value retrieval. Records come from ``kv-retrieval-75_keys.jsonl.gz`` (the paper's
  data: the asked pair plus ``pairs - 1`` others of the same row) or, with ``generate=True`` or more
  than 75 pairs, from seeded random UUIDs.
- ``qa``: multi-document NaturalQuestions: the gold passage plus ``docs - 1`` distractors mined
  with BM25 from the other rows' passages, keeping only passages that contain no answer string.
- ``needle``: one fact (a number for a named project) hidden in filler passages, over a grid of
  context lengths (tokens) x depths (percent): the needle-in-a-haystack heatmap.
- ``custom``: a user JSONL of ``{question, answers, chunks, key_id}``.

>>> t = build_task("kv", examples=2, pairs=5, generate=True, seed=1)
>>> len(t.examples), len(t.examples[0].chunks), t.positions, t.layout, t.metric
(2, 5, [0, 1, 2, 3, 4], 'kv', 'kv_exact')
>>> [c["id"] for c in arrange(t.examples[0], 3)].index(t.examples[0].key_id)
3
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..checks import check_int
from ..errors import InputError
from ..registry import Registry
from .data import data_path
from .nq import read_jsonl

KV_FILE = "kv-retrieval-75_keys.jsonl.gz"
NQ_FILE = "nq-open-oracle-dev.jsonl.gz"
PAPER_QA_POSITIONS = (0, 4, 9, 14, 19, 24, 29)


@dataclass
class Example:
    """One question; ``chunks`` are in retrieval order and include the key chunk ``key_id``."""

    id: str
    question: str
    answers: list[str]
    chunks: list[dict[str, Any]]
    key_id: str
    meta: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Task:
    """Examples plus how to ask and score them.

    ``positions`` are indexes of the key chunk among the documents, except for ``needle``, whose
    positions are depths in percent (``position_unit == "depth %"``). ``params`` are the options
    that built the examples: they are part of every result key.
    """

    name: str
    examples: list[Example]
    positions: list[int]
    layout: str
    metric: str
    max_tokens: int
    params: dict[str, Any]
    position_unit: str = "index"

    def slot(self, example: Example, position: int) -> int:
        """The document index of the key chunk for ``position``."""
        n = len(example.chunks)
        if self.position_unit == "depth %":
            return round(position / 100 * (n - 1))
        return position


def arrange(example: Example, slot: int) -> list[dict[str, Any]]:
    """The example's chunks with the key chunk moved to index ``slot``, scored as a retriever would.

    The others keep their order; scores fall with the index, so the list reads as a ranking in
    which the key chunk is ranked ``slot + 1``-th.
    """
    n = len(example.chunks)
    if not 0 <= slot < n:
        raise InputError(f"position must be in 0..{n - 1} for {n} documents, but got {slot} (example {example.id!r})")
    key = next(c for c in example.chunks if c["id"] == example.key_id)
    rest = [c for c in example.chunks if c["id"] != example.key_id]
    ordered = rest[:slot] + [key] + rest[slot:]
    return [{**c, "score": round(1.0 - i / n, 6)} for i, c in enumerate(ordered)]


TaskBuilder = Callable[..., Task]
TASKS: Registry[TaskBuilder] = Registry("tasks")  # plugins: entry-point group "edgewise.tasks"


def task(name: str, builder: TaskBuilder | None = None) -> Any:
    """Register a task builder ``fn(**options) -> Task`` under ``name``; usable as a decorator."""
    return TASKS.register(name, builder)


def task_names() -> list[str]:
    """Registered tasks: the built-ins, then plugins."""
    return TASKS.names()


def build_task(name: str, *, positions: Sequence[int] | None = None, **options: Any) -> Task:
    """Build a task by name; ``positions`` (when given) are checked against the document count."""
    t = TASKS.get(name)(**{k: v for k, v in options.items() if v is not None})
    if not t.examples:
        raise InputError(f"task {name!r} built no examples; check --examples and the data file")
    if positions is not None:
        wanted = [int(p) for p in positions]
        if not wanted:
            raise InputError("positions must name at least one position")
        for p in wanted:
            _check_position(t, p)
        t.positions = wanted
    return t


def _check_position(t: Task, p: int) -> None:
    if t.position_unit == "depth %":
        if not 0 <= p <= 100:
            raise InputError(f"needle positions are depths in percent, so must be in 0..100, but got {p}")
        return
    n = min(len(e.chunks) for e in t.examples)
    if not 0 <= p < n:
        raise InputError(f"position must be in 0..{n - 1} for {n} documents, but got {p}")


def spread(n: int, k: int = 5) -> list[int]:
    """``k`` evenly spaced indexes over ``0..n-1`` (first and last included).

    >>> spread(20), spread(3)
    ([0, 5, 10, 14, 19], [0, 1, 2])
    """
    if n <= k:
        return list(range(n))
    return sorted({round(i * (n - 1) / (k - 1)) for i in range(k)})


def _check_count(name: str, value: Any, minimum: int = 1) -> int:
    return check_int(name, value, minimum=minimum)


# ---------------------------------------------------------------------------------------------- kv


@task("kv")
def kv_task(examples: int = 50, pairs: int = 20, *, generate: bool = False, seed: int = 0,
            data: str | Path | None = None, max_tokens: int = 40) -> Task:
    """Key-value retrieval with ``pairs`` records per example."""
    _check_count("examples", examples)
    _check_count("pairs", pairs)
    out: list[Example] = []
    use_file = not generate and pairs <= 75
    if use_file:
        rows = read_jsonl(data_path(KV_FILE, data))
        if examples > len(rows):
            raise InputError(f"examples must be <= {len(rows)} for the kv data file, but got {examples}; "
                             "pass --generate for more")
        for i, row in enumerate(rows[:examples]):
            rng = random.Random(f"kv-{seed}-{pairs}-{i}")  # one generator per example: more examples, same first ones
            others = [r for r in row["ordered_kv_records"] if r[0] != row["key"]]
            chosen = rng.sample(others, pairs - 1)
            records = [(row["key"], row["value"]), *map(tuple, chosen)]
            rng.shuffle(records)
            out.append(_kv_example(f"kv{pairs}-{i}", records, row["key"], row["value"]))
    else:
        for i in range(examples):
            rng = random.Random(f"kvg-{seed}-{pairs}-{i}")
            records = [(_uuid(rng), _uuid(rng)) for _ in range(pairs)]
            key, value = records[rng.randrange(pairs)]
            out.append(_kv_example(f"kv{pairs}g-{i}", records, key, value))
    params = {"examples": examples, "pairs": pairs, "generate": not use_file, "seed": seed}
    return Task("kv", out, spread(pairs), "kv", "kv_exact", max_tokens, params)


def _uuid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def _kv_example(eid: str, records: list[tuple[str, str]], key: str, value: str) -> Example:
    chunks = [{"id": f"r{j}", "text": v, "meta": {"key": k}} for j, (k, v) in enumerate(records)]
    key_id = next(c["id"] for c in chunks if c["meta"]["key"] == key)
    return Example(eid, key, [value], chunks, key_id)


# ---------------------------------------------------------------------------------------------- qa


@task("qa")
def qa_task(examples: int = 100, docs: int = 10, *, seed: int = 0, data: str | Path | None = None,
            max_tokens: int = 32, offset: int = 0) -> Task:
    """Multi-document NQ, built by :func:`edgewise.eval.nq.build`: the gold passage and ``docs - 1``
    BM25-mined distractors that contain no answer, in BM25 order (the retrieval order)."""
    from itertools import islice

    from .nq import build

    _check_count("examples", examples)
    _check_count("docs", docs, 2)
    check_int("offset", offset, minimum=0)
    rows = read_jsonl(data_path(NQ_FILE, data))
    if offset + examples > len(rows):
        raise InputError(f"examples must be <= {len(rows) - offset} for the NQ data file, but got {examples}")
    out = []
    skipped: list[dict[str, Any]] = []
    # build() mines from the pool of every row; take rows from ``offset`` on until enough are built
    built = build(rows, docs=docs, gold_at=0, seed=seed, skipped=skipped, progress=False)
    for row in islice(built, offset, None):
        ctxs = row["ctxs"]
        chunks = [{"id": "gold" if c["isgold"] else f"d{j}", "title": c["title"], "text": " ".join(c["text"].split())}
                  for j, c in enumerate(ctxs)]
        out.append(Example(ctxs[0]["id"].removesuffix("-gold"), row["question"], list(row["answers"]), chunks, "gold"))
        if len(out) == examples:
            break
    params = {"examples": examples, "docs": docs, "seed": seed, "offset": offset, "distractors": "nq.build"}
    return Task("qa", out, [p for p in PAPER_QA_POSITIONS if p < docs - 1] + [docs - 1], "paper",
                "best_subspan_em", max_tokens, params)


# ------------------------------------------------------------------------------------------ needle


@task("needle")
def needle_task(examples: int = 5, *, lengths: Sequence[int] = (250, 500, 1000), seed: int = 0,
                data: str | Path | None = None, max_tokens: int = 16) -> Task:
    """A numbered fact in NQ passages: ``examples`` needles for each context length (cl100k tokens).

    Positions are depths in percent; each example's chunks are filler passages up to its length
    plus the needle chunk.
    """
    from ..tokens.tokenizers import get_tokenizer

    _check_count("examples", examples)
    if not lengths:
        raise InputError(f"lengths must name at least one context length, but got {list(lengths)!r}")
    for n in lengths:
        check_int("each of lengths (tokens)", n, minimum=50)
    rows = read_jsonl(data_path(NQ_FILE, data))
    filler = [(r["ctxs"][0]["title"], " ".join(r["ctxs"][0]["text"].split())) for r in rows]
    tok = get_tokenizer("cl100k_base")
    out = []
    for length in lengths:
        for i in range(examples):
            rng = random.Random(f"needle-{seed}-{length}-{i}")
            name = f"{rng.choice(_PROJECTS)}-{rng.randrange(10, 99)}"
            code = str(rng.randrange(1_000_000, 9_999_999))
            needle = {"id": "needle", "title": f"Project {name}", "text": f"The access code for project {name} is {code}."}
            chunks, used = [], tok.count(needle["text"])
            start = rng.randrange(len(filler))
            j = 0
            while used < length:
                title, text = filler[(start + j) % len(filler)]
                chunks.append({"id": f"f{j}", "title": title, "text": text})
                used += tok.count(text)
                j += 1
            out.append(Example(f"needle-{length}-{i}", f"What is the access code for project {name}?", [code],
                               [needle, *chunks], "needle", {"length": length}))
    params = {"examples": examples, "lengths": list(lengths), "seed": seed}
    return Task("needle", out, [0, 25, 50, 75, 100], "paper", "best_subspan_em", max_tokens, params, "depth %")


_PROJECTS = ("aurora", "basalt", "cobalt", "delta", "ember", "falcon", "garnet", "harbor", "indigo", "juniper",
             "kestrel", "lumen", "meridian", "nimbus", "onyx", "pioneer", "quartz", "raven", "sierra", "tundra")


# ------------------------------------------------------------------------------------------ custom


@task("custom")
def custom_task(data: str | Path | None = None, examples: int | None = None, *, layout: str = "paper",
                max_tokens: int = 32, metric: str = "best_subspan_em", seed: int = 0) -> Task:
    """A user JSONL: one ``{"question", "answers", "chunks", "key_id"}`` object a line.

    ``chunks`` are chunk objects (``id``, ``text``, optional ``title``/``meta``) or strings
    (ids ``chunk-0``, ``chunk-1``...); ``key_id`` names the chunk that holds the answer.
    """
    from ..chunk import Chunk
    from .metrics import get_metric

    if data is None:
        raise InputError("task 'custom' needs a JSONL file: --data FILE")
    get_metric(metric)
    path = Path(data)
    if not path.is_file():
        raise InputError(f"custom data file {str(path)!r} does not exist")
    out = []
    for lineno, row in enumerate(read_jsonl(path), 1):
        where = f"{path} line {lineno}"
        if not isinstance(row, dict) or not isinstance(row.get("question"), str):
            raise InputError(f"{where}: must be an object with a string 'question'")
        answers = row.get("answers")
        if isinstance(answers, str):
            answers = [answers]
        if not isinstance(answers, list) or not answers or not all(isinstance(a, str) for a in answers):
            raise InputError(f"{where}: answers must be a non-empty list of strings, but got {answers!r}")
        raw = row.get("chunks")
        if not isinstance(raw, list) or not raw:
            raise InputError(f"{where}: chunks must be a non-empty list")
        chunks = [Chunk.from_dict(c, j).to_dict() for j, c in enumerate(raw)]
        for c in chunks:
            c.pop("score", None)
        key_id = row.get("key_id")
        if key_id not in {c["id"] for c in chunks}:
            raise InputError(f"{where}: key_id must name one of the chunks, but got {key_id!r}")
        out.append(Example(str(row.get("id", f"custom-{lineno}")), row["question"], answers, chunks, key_id))
        if examples is not None and len(out) >= examples:
            break
    n = min((len(e.chunks) for e in out), default=1)
    params = {"data": str(path), "examples": len(out), "metric": metric}
    return Task("custom", out, spread(n, 3), layout, metric, max_tokens, params)
