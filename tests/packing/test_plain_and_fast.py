"""The fast paths of a pack (``edgewise.packing.fast``) give exactly what the plain path gives.

Each input is packed twice: as a user packs it (lazy input, skip-ahead, count memos, the compiled
scan), and inside ``plain_path()`` (a list of chunks walked one by one, every count fresh). The
whole ``Packed.to_dict()`` must be equal: prompt, messages and debug record, reasons included. The
inputs are generated (hypothesis: texts long and short, titles, summaries, ties, budgets where the
tokens left fall between an empty block's cost and that plus ``min_truncated_tokens``) and held out
(windows of the bundled NQ passages under a sweep of budgets).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edgewise import pack
from edgewise.errors import EdgewiseError
from edgewise.packing import fast

from ..conftest import examples
from ..tokens.test_scan import BUDGETS, _band, _band_inputs

WORDS = st.sampled_from(["river", "bridge", "a", "the", "Paris", "1984", "naïve", "x" * 30, "//", "\n/", "!", "é"])
TEXTS = st.lists(WORDS, min_size=0, max_size=120).map(" ".join)


@st.composite
def chunk_lists(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Plain dicts (the lazy path's input) or, now and then, dicts with a summary (the general path)."""
    n = draw(st.integers(min_value=1, max_value=40))
    scored = draw(st.booleans())
    titles = draw(st.sampled_from([[None], ["T"], ["A title", None, "Another one, longer than the rest"]]))
    out = []
    for i in range(n):
        d: dict[str, Any] = {"id": f"c{i}" if draw(st.integers(0, 9)) else f"chunk id number {i} " * 3,
                             "text": draw(TEXTS)}
        if scored:
            d["score"] = float(draw(st.integers(0, 5)))  # ties keep input order
        if (title := titles[i % len(titles)]) is not None:
            d["title"] = title
        if draw(st.integers(0, 7)) == 0:
            d["meta"] = {"summary": draw(TEXTS)}
        out.append(d)
    return out


def _both(query: str, chunks: list[dict[str, Any]], **options: Any) -> tuple[Any, Any]:
    def one() -> Any:
        try:
            return pack(query, chunks, **options).to_dict()
        except EdgewiseError as exc:
            return f"{type(exc).__name__}: {exc}"

    fast_result = one()
    with fast.plain_path():
        plain_result = one()
    return fast_result, plain_result


@settings(max_examples=examples(250), deadline=None)
@given(chunks=chunk_lists(), budget=st.integers(min_value=60, max_value=900),
       layout=st.sampled_from(["sections", "layered", "paper", "kv"]),
       tokenizer=st.sampled_from(["cl100k_base", "o200k_base", "words"]),
       min_truncated_tokens=st.sampled_from([1, 8, 32]))
def test_generated_packs_are_the_same_on_both_paths(chunks, budget, layout, tokenizer, min_truncated_tokens):
    fast_result, plain_result = _both("Which river does the bridge cross?", chunks, budget=budget, layout=layout,
                                      tokenizer=tokenizer, min_truncated_tokens=min_truncated_tokens)
    assert fast_result == plain_result


@pytest.mark.parametrize("tokenizer", ["cl100k_base", "o200k_base"])
def test_held_out_passages_pack_the_same_on_both_paths_at_every_budget_of_a_band(tokenizer):
    """400 real passages with long ids and repeating titles, the budget swept one token at a time
    through the band where runs are skipped on words alone, on a title's bound, and on tags priced
    by id (the sweep reaches all of them), and past it."""
    query, chunks = _band_inputs()
    bands = set()
    for budget in [*BUDGETS, 600, 16000]:
        fast_result, plain_result = _both(query, chunks, budget=budget, tokenizer=tokenizer, order="edges",
                                          layout="sections")
        assert fast_result == plain_result, budget
        bands.add(_band(fast_result["debug_info"]))
    assert bands == {"exhausted", "no cut", "tags", "tags priced"}
