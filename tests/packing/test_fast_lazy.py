"""Plain input dicts are validated and ranked without building a Chunk for each (``edgewise.packing.fast.lazy``),
and chunks left out together are recorded as runs (``select.Fit.runs``): neither may change a
prompt or a debug record. The general path (Chunk objects in, every chunk built and walked) is
the reference; hypothesis draws inputs where the budget runs out, stops in the band where no chunk
can be cut, or leaves room to cut one.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import edgewise.packing.fast.lazy
from edgewise import BudgetError, pack
from edgewise.chunk import Chunk, normalize, plain_fields
from edgewise.layout import get_layout
from edgewise.packing.fast.lazy import rank_plain
from edgewise.score.ranking import rank

from ..conftest import examples

WORDS = st.sampled_from(["alpha", "beta", "Paris", "é", "x", "long-word", "42", "\n", "  ", "\x1c", "👍", "/"])
TEXT = st.one_of(st.lists(WORDS, min_size=10, max_size=150).map(" ".join), st.text(max_size=120))


@st.composite
def requests(draw: Any) -> dict[str, Any]:
    n = draw(st.integers(min_value=0, max_value=30) | st.integers(min_value=10, max_value=30))
    scored = draw(st.booleans())
    chunks = []
    for i in range(n):
        c: dict[str, Any] = {"text": draw(TEXT)}
        if draw(st.booleans()):
            c["id"] = f"d{i}"
        if draw(st.booleans()):
            c["title"] = draw(st.sampled_from(["", "T", "A longer title", "Paris (city)"]))
        if scored:
            c["score"] = float(draw(st.integers(0, 4)))  # ties: input order must break them
        chunks.append(c)
    return dict(
        query=draw(st.sampled_from(["Where?", "What is the capital of France?"])),
        chunks=chunks,
        budget=draw(st.none() | st.integers(min_value=200, max_value=1200) | st.integers(min_value=300, max_value=500)),
        tokenizer=draw(st.sampled_from(["cl100k_base", "o200k_base", "words"])),
        order=draw(st.sampled_from(["edges", "relevance", "original"])),
        layout=draw(st.sampled_from(["sections", "layered", "paper", "kv"])),
        min_truncated_tokens=draw(st.integers(min_value=1, max_value=40)),
        high_importance_k=draw(st.integers(min_value=0, max_value=4)),
    )


def _result(req: dict[str, Any], chunks: list[Any]) -> Any:
    try:
        out = pack(**{**req, "chunks": chunks})
    except BudgetError as exc:
        return str(exc)
    dropped = out.debug_info.dropped  # read first: built without the per-chunk records
    debug = out.debug_info.to_dict()
    assert dropped == debug["dropped"] == [{k: r[k] for k in ("id", "input_index", "reason")}
                                           for r in debug["chunks"] if r["outcome"] == "dropped"]
    return out.prompt, out.messages("openai"), out.messages("anthropic"), debug


@settings(max_examples=examples(400), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(requests())
def test_plain_dicts_give_what_chunks_give(req: dict[str, Any]) -> None:
    dicts = req["chunks"]
    assert rank_plain(dicts) is not None or not dicts  # the lazy path is the one under test
    general = [Chunk.from_dict(c, i) for i, c in enumerate(dicts)]  # Chunk objects: the general path
    assert _result(req, dicts) == _result(req, general)


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """One entry for every Chunk the lazy path builds (``ranked.plain_chunk`` counted)."""
    calls: list[int] = []
    plain = edgewise.packing.fast.lazy.plain_chunk

    def counting(*fields: Any) -> Chunk:
        calls.append(1)
        return plain(*fields)

    monkeypatch.setattr(edgewise.packing.fast.lazy, "plain_chunk", counting)
    return calls


def test_chunks_left_out_are_not_built(built: list[int]) -> None:
    """2,000 plain dicts under a budget that holds a few: only the chunks the fit looks at are built
    (the placed ones and the first one that does not fit); the debug records of the others are read
    off the validated columns, still without building them."""
    chunks = [{"id": f"c{i}", "text": "word " * 100, "score": float(-i)} for i in range(2000)]
    out = pack("q", chunks, budget=1000, tokenizer="cl100k_base", layout="sections", min_truncated_tokens=1000)
    placed = len(out.debug_info.order)
    assert 0 < placed < 20 and len(built) <= 2 * (placed + 1)
    before = len(built)
    assert len(out.debug_info.chunks) == 2000 and len(out.debug_info.dropped) == 2000 - placed
    assert len(built) == before
    assert [(r["id"], r["rank"], r["score"]) for r in out.debug_info.chunks[-2:]] == [("c1998", 1998, -1998.0),
                                                                                  ("c1999", 1999, -1999.0)]
    reasons = {d["reason"] for d in out.debug_info.dropped}
    assert len(reasons) == 1 and next(iter(reasons)).startswith(("budget exhausted: ", "does not fit: needs more than"))


class _Unpriced:
    """A built-in layout without its ``tags_pricer``: a truncated block's tags are rendered and counted."""

    def __init__(self, name: str) -> None:
        self._inner = get_layout(name)
        self.name = self._inner.name

    def __getattr__(self, attr: str) -> Any:
        if attr == "tags_pricer":
            raise AttributeError(attr)
        return getattr(self._inner, attr)


@pytest.mark.parametrize("layout", ["sections", "layered"])
@pytest.mark.parametrize("tokenizer", ["cl100k_base", "o200k_base"])
def test_tags_priced_unrendered_change_no_pack(layout: str, tokenizer: str, built: list[int]) -> None:
    """Where a chunk could be cut but for its tags (short titles, ids of every length), the chunks left
    out are priced by parts in a scan that builds none of them: for every budget across that band, the
    pack is the one the rendered blocks give, and chunks are left out for exactly-priced tags."""
    lead = [{"id": "lead", "text": "The lead passage. " * 40, "score": 2.0}]
    rest = [{"id": f"c{i}" + "7" * (i % 9), "title": ["T", "Paris", "A longer title of a page"][i % 3],
             "text": "word " * 90 + str(i), "score": 1.0 - i / 1000} for i in range(300)]
    priced = 0
    for budget in range(395, 445, 2):
        req = dict(query="Where?", budget=budget, tokenizer=tokenizer, min_truncated_tokens=32)
        built.clear()
        fast = pack(chunks=lead + rest, layout=layout, **req)
        placed = len(fast.debug_info.order)
        tags = [(int(m[1]), int(m[2])) for d in fast.debug_info.dropped
                if (m := re.search(r"(\d+) left: .* plus (\d+) for its tags$", d["reason"]))]
        cut_tried = sum(left - cost >= 32 for left, cost in tags)  # room to cut, but the cut came out short
        # the others never built, not even to read their records
        assert len(built) <= 2 * (placed + 1) + 3 + cut_tried, budget
        slow = pack(chunks=lead + rest, layout=_Unpriced(layout), **req)
        assert (fast.prompt, fast.debug_info.to_dict()) == (slow.prompt, slow.debug_info.to_dict()), budget
        priced += len(tags) - cut_tried > 100
    assert priced >= 2  # budgets where over 100 chunks were left out on their tags' exact cost


def test_what_the_lazy_path_leaves_to_the_general_one() -> None:
    ok = [{"id": "a", "text": "x", "score": 0.5}]
    assert rank_plain(ok) is not None and rank_plain(tuple(ok)) is not None
    for items in (iter(ok), [Chunk("a", "x")], [{"id": "a", "text": "x"}, {"id": "a", "text": "y"}],
                  [{"text": "x", "score": 1}], [{"text": "x", "score": 0.5}, {"text": "y"}],
                  [{"text": "x", "meta": {"summary": "s"}}], [{"text": "x", "score": float("nan")}], "text"):
        assert rank_plain(items) is None


HOSTILE = st.one_of(st.none(), st.booleans(), st.integers(-2, 2), st.floats(allow_nan=True, allow_infinity=True),
                    st.text(max_size=3), st.just({}), st.just({"summary": "s"}))
PLAIN = st.fixed_dictionaries({"text": st.text(max_size=5)}, optional={
    "id": st.sampled_from(["a", "b", "", "chunk-1"]), "score": st.floats(-1, 1), "title": st.sampled_from(["", "T"])})
ANY_ITEM = st.one_of(PLAIN, PLAIN.flatmap(lambda d: st.dictionaries(
    st.sampled_from(["id", "text", "score", "title", "tokens", "meta", "x"]), HOSTILE, max_size=3).map(lambda e: {**d, **e})))


@settings(max_examples=examples(500))
@given(st.lists(ANY_ITEM, max_size=5))
def test_the_column_checks_accept_what_the_one_by_one_checks_accept(items: list[dict[str, Any]]) -> None:
    """rank_plain takes a list exactly when plain_fields takes every item, the ids are distinct and
    every item or none has a score; and it ranks the chunks the general path ranks."""
    fields = [plain_fields(d) for d in items]
    ids = [f[1] if f[1] is not None else f"chunk-{i}" for i, f in enumerate(fields) if f is not None]
    scored = {f[2] is not None for f in fields if f is not None}
    expected = bool(items) and None not in fields and len(set(ids)) == len(ids) and len(scored) == 1
    got = rank_plain(items)
    assert (got is not None) == expected
    if got is not None:
        ranked, input_index, by = got
        general, _ = rank("q", normalize(items)[0])
        assert list(ranked) == general and ranked.ids() == [c.id for c in general]
        assert input_index == {c: i for i, c in enumerate(ids)} and by == ("given" if True in scored else "input order")
