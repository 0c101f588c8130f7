"""Multi-document QA from NaturalQuestions-Open, built as "Lost in the Middle" did, offline.

For each question: the gold passage plus ``docs - 1`` distractors mined with BM25 from the pool of
the *other* rows' passages (each row's ``ctxs[0]`` and its ``nq_annotated_gold.long_answer`` cut to
~100 words), skipping every passage whose title or text contains a normalised answer. A larger
``pool`` of rows (other files in the same format) can be added to mine from: a small pool gives easy
distractors (BM25 recall@1 0.86 on a 655-row file against 0.76 on 2,000 rows), so :func:`build`
warns (:class:`DataWarning`) when the pool holds fewer than 1,000 passages. The gold
passage goes to position ``gold_at``; distractors keep their BM25 order. Ties between equal BM25
scores, and the filler used when BM25 finds too few, are broken by a hash of the seed, so the same
source, ``docs``, ``gold_at`` and ``seed`` always give the same file.

Rows come out in the paper's JSONL format: ``question``, ``answers``, ``ctxs`` (each with ``id``,
``title``, ``text``, ``score``, ``hasanswer``, ``isgold``) and ``nq_annotated_gold``.

>>> rows = [{"question": "who wrote hamlet", "answers": ["Shakespeare"],
...          "ctxs": [{"title": "Hamlet", "text": "Hamlet is a tragedy by William Shakespeare."}]},
...         {"question": "capital of france", "answers": ["Paris"],
...          "ctxs": [{"title": "France", "text": "Paris is the capital of France."}]},
...         {"question": "where is hamlet set", "answers": ["Denmark"],
...          "ctxs": [{"title": "Elsinore", "text": "Hamlet is set in Denmark, at Elsinore castle."}]}]
>>> import warnings
>>> with warnings.catch_warnings(record=True) as seen:
...     warnings.simplefilter("always")
...     out = list(build(rows, docs=2, gold_at=1))
>>> [str(w.message).split(" (")[0] for w in seen]
['the distractor pool holds 3 passages']
>>> [(c["title"], c["isgold"], c["hasanswer"]) for c in out[0]["ctxs"]]
[('Elsinore', False, False), ('Hamlet', True, True)]
"""

from __future__ import annotations

import gzip
import hashlib
import json
import sys
import warnings
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..checks import check_int
from ..errors import InputError
from ..score.bm25 import BM25Index, terms
from .metrics import normalize_answer

__all__ = ["DEV_FILE", "SMALL_POOL", "DataWarning", "build", "has_answer", "normalize_answer", "passage_pool",
           "read_jsonl", "write_jsonl"]

DEV_FILE = "nq-open-oracle-dev.jsonl.gz"
SMALL_POOL = 1000  # passages; below this the mined distractors are noticeably easier


class DataWarning(UserWarning):
    """A data set was built, but in a way that weakens what it measures (e.g. a small distractor pool)."""


def has_answer(text: str, answers: Sequence[str]) -> bool:
    """Whether any normalised answer is a substring of the normalised text (best-subspan match).

    >>> has_answer("It opened in 1901.", ["1901"]), has_answer("It opened in 1902.", ["1901"])
    (True, False)
    """
    norm = normalize_answer(text)
    return any(a and a in norm for a in (normalize_answer(x) for x in answers))


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """Rows of a JSONL file, gzip-compressed or not, with errors that name the line."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    rows = []
    try:
        with opener(path, "rt", encoding="utf-8") as f:
            for lineno, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise InputError(f"{path} line {lineno}: invalid JSON ({exc.msg})") from None
    except OSError as exc:
        raise InputError(f"source file {str(path)!r} could not be read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"source file {str(path)!r} is not UTF-8 (byte {exc.start} of a line: {exc.reason})") from None
    except EOFError:
        raise InputError(f"source file {str(path)!r} is a truncated gzip file") from None
    return rows


def _check_row(row: Any, i: int) -> None:
    if not isinstance(row, dict) or not isinstance(row.get("question"), str):
        raise InputError(f"row {i} must be an object with a 'question' string (the oracle format)")
    answers = row.get("answers")
    if not isinstance(answers, list) or not answers or not all(isinstance(a, str) for a in answers):
        raise InputError(f"row {i} must have 'answers', a non-empty list of strings, but got {answers!r}")
    ctxs = row.get("ctxs")
    if not isinstance(ctxs, list) or not ctxs or not isinstance(ctxs[0], dict) or not isinstance(ctxs[0].get("text"), str):
        raise InputError(f"row {i} must have 'ctxs' whose first item has a 'text' (the gold passage)")


def _check_pool_row(row: Any, i: int) -> None:
    ctxs = row.get("ctxs") if isinstance(row, dict) else None
    if not isinstance(ctxs, list) or not ctxs or not isinstance(ctxs[0], dict) or not isinstance(ctxs[0].get("text"), str):
        raise InputError(f"pool row {i} must be an object with 'ctxs' whose first item has a 'text', but got {str(row)[:80]}")


def cut_words(text: str, n: int = 100) -> str:
    """The first ``n`` whitespace-separated words of ``text``, joined by single spaces.

    >>> cut_words("a  b\\nc d", 3)
    'a b c'
    """
    return " ".join(text.split()[:n])


@dataclass(frozen=True)
class Passage:
    """A candidate distractor: ``row`` is the index of the source row it came from (``None`` for a
    pool row), ``question`` the normalised question of that row."""

    id: str
    row: int | None
    title: str
    text: str
    question: str = ""


def passage_pool(rows: Sequence[dict[str, Any]], words: int = 100, *, extra: Sequence[dict[str, Any]] = ()) -> list[Passage]:
    """Every row's ``ctxs[0]`` and its NQ-annotated long answer cut to ``words`` words, then the same
    from the ``extra`` (pool) rows; duplicates (same title and text) kept once, with the first row
    that has them.

    >>> [p.id for p in passage_pool([{"ctxs": [{"title": "T", "text": "x y"}], "nq_annotated_gold": {"long_answer": "x  y"}}])]
    ['nq-0-ctx', 'nq-0-long']
    """
    seen: set[tuple[str, str]] = set()
    out = _passages(rows, words, seen, "nq", source=True)
    return out + _passages(extra, words, seen, "pool", source=False)


def _passages(rows: Sequence[dict[str, Any]], words: int, seen: set[tuple[str, str]], prefix: str, *,
              source: bool) -> list[Passage]:
    out = []
    for i, row in enumerate(rows):
        cands = [("ctx", row["ctxs"][0].get("title") or "", row["ctxs"][0]["text"])]
        gold = row.get("nq_annotated_gold") or {}
        if isinstance(gold.get("long_answer"), str) and gold["long_answer"].strip():
            cands.append(("long", gold.get("title") or "", cut_words(gold["long_answer"], words)))
        for kind, title, text in cands:
            key = (title, " ".join(text.split()))
            if key in seen or not key[1]:
                continue
            seen.add(key)
            question = "" if source else normalize_answer(str(row.get("question") or ""))
            out.append(Passage(f"{prefix}-{i}-{kind}", i if source else None, title, text, question))
    return out


def _usable(p: Passage, norm: str, row: int, question: str, gold_key: tuple[str, str], answers: list[str]) -> bool:
    """A distractor for ``row``: from another row (a pool row asking another question), not the gold
    passage, holding no answer."""
    if p.row == row or (p.row is None and p.question == question) or (p.title, " ".join(p.text.split())) == gold_key:
        return False
    return not any(a in norm for a in answers)


def _tiebreak(seed: int, pid: str) -> int:
    return int.from_bytes(hashlib.blake2b(f"{seed}:{pid}".encode(), digest_size=8).digest(), "big")


def build(
    rows: Sequence[dict[str, Any]], *, docs: int = 20, gold_at: int = 0, seed: int = 0, words: int = 100,
    skipped: list[dict[str, Any]] | None = None, pool: Sequence[dict[str, Any]] | None = None,
    progress: bool | None = None,
) -> Iterator[dict[str, Any]]:
    """Multi-document QA rows, one per input row (see the module docstring).

    ``gold_at`` may be negative (``-1`` is the last position). Distractors are mined from the
    passages of ``rows`` plus those of ``pool`` (more rows in the same format, e.g. read from other
    files; a pool row asking the same question as a source row gives that row no distractor). A
    pool of fewer than :data:`SMALL_POOL` passages is built all the same, with a
    :class:`DataWarning` that states its size. A row for which the pool holds fewer than
    ``docs - 1`` answer-free passages (an answer like ``"S"`` is in every passage) is not emitted:
    it is appended to ``skipped`` as ``{"row", "question", "reason"}``, if given.

    Parameters are checked, and the pool indexed, when ``build`` is called; rows are made as they are
    read, with a progress bar on stderr (``progress=None``: only when stderr is a terminal).
    """
    check_int("docs", docs, minimum=1)
    if not -docs <= check_int("gold_at", gold_at) < docs:
        raise InputError(f"gold_at must be in [-{docs}, {docs - 1}] for {docs} documents, but got {gold_at!r}")
    check_int("seed", seed)
    for i, row in enumerate(rows):
        _check_row(row, i)
    for i, row in enumerate(pool or ()):
        _check_pool_row(row, i)
    passages = passage_pool(rows, words, extra=pool or ())
    if docs > 1 and len(passages) < docs:
        raise InputError(f"docs={docs} needs a pool of at least {docs} passages, but the source gives {len(passages)}")
    if docs > 1 and len(passages) < SMALL_POOL:
        warnings.warn(f"the distractor pool holds {len(passages)} passages (fewer than {SMALL_POOL:,}), so the mined "
                      "distractors are easier than the paper's; add rows to mine from (pool=, CLI: --pool FILE)",
                      DataWarning, stacklevel=2)
    return _rows(rows, passages, docs, gold_at % docs, seed, skipped, progress)


def _rows(rows: Sequence[dict[str, Any]], passages: list[Passage], docs: int, gold_at: int, seed: int,
          skipped: list[dict[str, Any]] | None, progress: bool | None) -> Iterator[dict[str, Any]]:
    from tqdm import tqdm

    index = BM25Index([f"{p.title} {p.text}" for p in passages])
    norm_passages = [normalize_answer(f"{p.title} {p.text}") for p in passages]
    # Filler order for questions whose BM25 candidates run out: one seeded permutation.
    filler = sorted(range(len(passages)), key=lambda j: _tiebreak(seed, passages[j].id))
    with tqdm(rows, desc=f"nq {docs} docs", unit="q", file=sys.stderr, disable=None if progress is None else not progress,
              dynamic_ncols=True) as bar:
        for i, row in enumerate(bar):
            out = _row(i, row, passages, index, norm_passages, filler, docs, gold_at, seed, skipped)
            if out is not None:
                yield out


def _row(i: int, row: dict[str, Any], passages: list[Passage], index: BM25Index, norm_passages: list[str],
         filler: list[int], docs: int, gold_at: int, seed: int, skipped: list[dict[str, Any]] | None) -> dict[str, Any] | None:
    gold = row["ctxs"][0]
    answers = [a for a in (normalize_answer(a) for a in row["answers"]) if a]
    gold_key = (gold.get("title") or "", " ".join(gold["text"].split()))
    question = normalize_answer(row["question"])
    scores = index.matches(list(dict.fromkeys(terms(row["question"]))))  # each distinct term once
    ranked = sorted(scores, key=lambda j: (-scores[j], _tiebreak(seed, passages[j].id)))
    picked: list[int] = []
    chosen: set[int] = set()
    for j in [*ranked, *filler]:
        if len(picked) == docs - 1:
            break
        if j not in chosen and _usable(passages[j], norm_passages[j], i, question, gold_key, answers):
            picked.append(j)
            chosen.add(j)
    if len(picked) < docs - 1:
        if skipped is not None:
            skipped.append({"row": i, "question": row["question"],
                            "reason": f"only {len(picked)} of {docs - 1} pool passages are free of the answers {row['answers']!r}"})
        return None
    ctxs = [
        {"id": passages[j].id, "title": passages[j].title, "text": passages[j].text,
         "score": round(scores.get(j, 0.0), 4), "hasanswer": False, "isgold": False}
        for j in picked
    ]
    gold_ctx = {"id": f"nq-{i}-gold", "title": gold.get("title") or "", "text": gold["text"],
                "score": None, "hasanswer": has_answer(f"{gold.get('title') or ''} {gold['text']}", row["answers"]),
                "isgold": True}
    ctxs.insert(gold_at, gold_ctx)
    out = {"question": row["question"], "answers": row["answers"], "ctxs": ctxs}
    if "nq_annotated_gold" in row:
        out["nq_annotated_gold"] = row["nq_annotated_gold"]
    return out


def write_jsonl(rows: Iterable[dict[str, Any]], out: Any) -> int:
    """Write rows as JSONL (UTF-8, one object a line) to a text stream; returns the row count."""
    n = 0
    for row in rows:
        out.write(json.dumps(row, ensure_ascii=False) + "\n")
        n += 1
    return n
