"""Each fast path gives exactly what the general path gives (hypothesis over hostile values).

The per-chunk shortcuts (plain-dict validation straight into the Chunk's slots, the
attribute quoting and line indentation that skip json/regex for printable text) must never change a
prompt or a debug record: the golden file checks fixed inputs, these check generated ones.
"""

from __future__ import annotations

import json
import math

from hypothesis import given, settings
from hypothesis import strategies as st

from edgewise.chunk import Chunk, _plain, normalize_indexed
from edgewise.errors import InputError
from edgewise.layout.base import _SEP_RE, INDENT, attr, quote_tail

from ..conftest import examples

HOSTILE = st.sampled_from(["", " ", '"', "\\", "\n", "\x85", "\u2028", "\u2029", "\x7f", "\u00a0", "\x1c", "é", "👍", "\t",
                          "\r", "\r\n", "\x0b", "\x0c", "\x1d", "\x1e", "\x1f", "a"])
TEXT = st.one_of(st.text(max_size=40), st.lists(HOSTILE, max_size=6).map("".join))


def _attr_general(value: str) -> str:
    out = json.dumps(value, ensure_ascii=False)
    return out.replace("\x85", "\\u0085").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


@settings(max_examples=examples(300))
@given(TEXT)
def test_attr_and_quote_fast_paths_match_the_general_ones(value: str) -> None:
    assert attr(value) == _attr_general(value)
    assert quote_tail(value) == _SEP_RE.sub(lambda m: m.group(1) + INDENT, value)


VALUES = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.floats(allow_nan=True, allow_infinity=True),
                   TEXT, st.just({}), st.just({"summary": "s"}), st.just([]))
ITEMS = st.dictionaries(st.sampled_from(["id", "text", "score", "title", "tokens", "meta", "content", "x"]), VALUES,
                        max_size=6)


def _general(item: object, index: int) -> Chunk | str:
    """What Chunk.from_dict gives with the fast path switched off (or the error's message)."""
    import edgewise.chunk as mod

    plain, mod._plain = mod._plain, lambda obj, i: None
    try:
        return Chunk.from_dict(item, index)
    except InputError as exc:
        return str(exc)
    finally:
        mod._plain = plain


@settings(max_examples=examples(500))
@given(ITEMS, st.integers(0, 5))
def test_plain_dict_validation_matches_the_field_by_field_one(item: dict, index: int) -> None:
    fast = _plain(item, index)
    if fast is not None:
        assert fast == _general(item, index)
        assert type(fast.meta) is dict and fast.meta == {} and fast.tokens is None
        assert fast.score is None or math.isfinite(fast.score)
    try:
        got: Chunk | str = Chunk.from_dict(item, index)
    except InputError as exc:
        got = str(exc)
    assert got == _general(item, index)


def test_a_fast_chunk_is_a_whole_chunk() -> None:
    chunk = _plain({"id": "a", "text": "t", "score": 0.5, "title": ""}, 0)
    assert chunk == Chunk("a", "t", 0.5) and repr(chunk) == repr(Chunk("a", "t", 0.5))
    chunks, index, merged = normalize_indexed([{"text": "x"}, {"id": "b", "text": "y", "score": 1.0}])
    assert [c.id for c in chunks] == ["chunk-0", "b"] and index == {"chunk-0": 0, "b": 1} and merged == []
