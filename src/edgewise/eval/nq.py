"""Multi-document QA from NaturalQuestions-Open, built as "Lost in the Middle" did, offline.

For each question: the gold passage plus ``docs - 1`` distractors mined with BM25 from the pool of
the *other* rows' passages (each row's ``ctxs[0]`` and its ``nq_annotated_gold.long_answer`` cut to
~100 words), skipping every passage whose title or text contains a normalised answer. The gold
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
>>> out = list(build(rows, docs=2, gold_at=1))
>>> [(c["title"], c["isgold"], c["hasanswer"]) for c in out[0]["ctxs"]]
[('Elsinore', False, False), ('Hamlet', True, True)]
"""

from __future__ import annotations

import gzip
import hashlib
import json
import math
import re
import string
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..score.bm25 import terms

DEV_FILE = "nq-open-oracle-dev.jsonl.gz"
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans("", "", string.punctuation)


def normalize_answer(s: str) -> str:
    """SQuAD normalisation: lower-case, drop punctuation and the articles a/an/the, collapse spaces.

    >>> normalize_answer("Wilhelm Conrad Röntgen, of Germany")
    'wilhelm conrad röntgen of germany'
    """
    s = s.lower().translate(_PUNCT)
    return " ".join(_ARTICLES.sub(" ", s).split())


def has_answer(text: str, answers: Sequence[str]) -> bool:
    """Whether any normalised answer is a substring of the normalised text (best-subspan match).

    >>> has_answer("It opened in 1901.", ["1901"]), has_answer("It opened in 1902.", ["1901"])
    (True, False)
    """
    norm = normalize_answer(text)
    return any(a and a in norm for a in (normalize_answer(x) for x in answers))


def data_dir(repo_root: str | Path) -> Path:
    """The shared data folder beside the repository: ``<repo_root>/../shared/data``."""
    return Path(repo_root).resolve().parent / "shared" / "data"


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
    return rows


def _check_row(row: Any, i: int) -> None:
    if not isinstance(row, dict) or not isinstance(row.get("question"), str):
        raise InputError(f"row {i} must be an object with a 'question' string (the oracle format)")
    answers = row.get("answers")
    if not isinstance(answers, list) or not answers or not all(isinstance(a, str) for a in answers):
        raise InputError(f"row {i} must have 'answers', a non-empty list of strings, but got {answers!r}")
    ctxs = row.get("ctxs")
    if not isinstance(ctxs, list) or not ctxs or not isinstance(ctxs[0], dict) or "text" not in ctxs[0]:
        raise InputError(f"row {i} must have 'ctxs' whose first item has a 'text' (the gold passage)")


def cut_words(text: str, n: int = 100) -> str:
    """The first ``n`` whitespace-separated words of ``text``, joined by single spaces.

    >>> cut_words("a  b\\nc d", 3)
    'a b c'
    """
    return " ".join(text.split()[:n])


@dataclass(frozen=True)
class Passage:
    id: str
    row: int
    title: str
    text: str


def pool(rows: Sequence[dict[str, Any]], words: int = 100) -> list[Passage]:
    """Every row's ``ctxs[0]`` and its NQ-annotated long answer cut to ``words`` words; duplicates
    (same title and text) kept once, with the first row that has them.

    >>> [p.id for p in pool([{"ctxs": [{"title": "T", "text": "x y"}], "nq_annotated_gold": {"long_answer": "x  y"}}])]
    ['nq-0-ctx', 'nq-0-long']
    """
    seen: set[tuple[str, str]] = set()
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
            out.append(Passage(f"nq-{i}-{kind}", i, title, text))
    return out


class _Index:
    """A small inverted BM25 index (k1 1.5, b 0.75) over the pool."""

    def __init__(self, docs: Sequence[Passage], k1: float = 1.5, b: float = 0.75) -> None:
        self.postings: dict[str, list[tuple[int, float]]] = defaultdict(list)
        counts = [Counter(terms(f"{d.title} {d.text}")) for d in docs]
        lengths = [sum(c.values()) for c in counts]
        avg = sum(lengths) / max(1, len(lengths))
        n = len(docs)
        for j, (c, length) in enumerate(zip(counts, lengths)):
            norm = k1 * (1 - b + b * length / avg)
            for t, tf in c.items():
                self.postings[t].append((j, tf * (k1 + 1) / (tf + norm)))
        self.idf = {t: math.log(1 + (n - len(p) + 0.5) / (len(p) + 0.5)) for t, p in self.postings.items()}

    def scores(self, query: str) -> dict[int, float]:
        acc: dict[int, float] = defaultdict(float)
        for t in set(terms(query)):
            idf = self.idf.get(t)
            if idf is None:
                continue
            for j, w in self.postings[t]:
                acc[j] += idf * w
        return acc


def _usable(p: Passage, norm: str, row: int, gold_key: tuple[str, str], answers: list[str]) -> bool:
    """A distractor for ``row``: from another row, not the gold passage, holding no answer."""
    if p.row == row or (p.title, " ".join(p.text.split())) == gold_key:
        return False
    return not any(a in norm for a in answers)


def _tiebreak(seed: int, pid: str) -> int:
    return int.from_bytes(hashlib.blake2b(f"{seed}:{pid}".encode(), digest_size=8).digest(), "big")


def build(
    rows: Sequence[dict[str, Any]], *, docs: int = 20, gold_at: int = 0, seed: int = 0, words: int = 100,
    skipped: list[dict[str, Any]] | None = None,
) -> Iterator[dict[str, Any]]:
    """Multi-document QA rows, one per input row (see the module docstring).

    ``gold_at`` may be negative (``-1`` is the last position). A row for which the pool holds fewer
    than ``docs - 1`` answer-free passages (an answer like ``"S"`` is in every passage) is not
    emitted: it is appended to ``skipped`` as ``{"row", "question", "reason"}``, if given.
    """
    if isinstance(docs, bool) or not isinstance(docs, int) or docs < 1:
        raise InputError(f"docs must be an integer >= 1, but got {docs!r}")
    if isinstance(gold_at, bool) or not isinstance(gold_at, int) or not -docs <= gold_at < docs:
        raise InputError(f"gold_at must be in [-{docs}, {docs - 1}] for {docs} documents, but got {gold_at!r}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise InputError(f"seed must be an integer, but got {seed!r}")
    for i, row in enumerate(rows):
        _check_row(row, i)
    gold_at %= docs
    passages = pool(rows, words)
    if docs > 1 and len(passages) < docs:
        raise InputError(f"docs={docs} needs a pool of at least {docs} passages, but the source gives {len(passages)}")
    index = _Index(passages)
    norm_passages = [normalize_answer(f"{p.title} {p.text}") for p in passages]
    # Filler order for questions whose BM25 candidates run out: one seeded permutation.
    filler = sorted(range(len(passages)), key=lambda j: _tiebreak(seed, passages[j].id))
    for i, row in enumerate(rows):
        gold = row["ctxs"][0]
        answers = [normalize_answer(a) for a in row["answers"]]
        answers = [a for a in answers if a]
        gold_key = (gold.get("title") or "", " ".join(gold["text"].split()))

        scores = index.scores(row["question"])
        ranked = sorted(scores, key=lambda j: (-scores[j], _tiebreak(seed, passages[j].id)))
        picked: list[int] = []
        chosen: set[int] = set()
        for j in [*ranked, *filler]:
            if len(picked) == docs - 1:
                break
            if j not in chosen and _usable(passages[j], norm_passages[j], i, gold_key, answers):
                picked.append(j)
                chosen.add(j)
        if len(picked) < docs - 1:
            if skipped is not None:
                skipped.append({"row": i, "question": row["question"],
                                "reason": f"only {len(picked)} of {docs - 1} pool passages are free of the answers {row['answers']!r}"})
            continue
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
        yield out


def write_jsonl(rows: Iterable[dict[str, Any]], out: Any) -> int:
    """Write rows as JSONL (UTF-8, one object a line) to a text stream; returns the row count."""
    n = 0
    for row in rows:
        out.write(json.dumps(row, ensure_ascii=False) + "\n")
        n += 1
    return n
