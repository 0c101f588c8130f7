"""quicktok, the counter of a long-lived process (``TiktokenTokenizer.speed_up``), counts what
tiktoken counts; counting switches to it once, when asked, and stays where it was, saying why, when
quicktok is missing or disagrees; a pack is the same byte for byte whichever counter counted it.
When the switch happens (never by itself, never inside a pack): ``test_counter_switch.py``.

quicktok comes with the ``fast`` extra, which ``make test`` installs: without it (a core-only
install) these tests are skipped.
"""

from __future__ import annotations

import gzip
import json
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import edgewise
import edgewise.tokens.tokenizers as tokens
from edgewise.tokens.tokenizers import TiktokenTokenizer

from ..conftest import DATA, ROOT, examples
from ..corpus import bundled_texts

pytest.importorskip("quicktok", reason="needs quicktok: pip install -e '.[fast]'")

EXACT = ("cl100k_base", "o200k_base")
EXAMPLES = ROOT / "examples"


TEXTS = bundled_texts()
_QUICK: dict[str, TiktokenTokenizer] = {}
_REFERENCE: dict[str, TiktokenTokenizer] = {}


def quick(name: str) -> TiktokenTokenizer:
    """A tokenizer of ``name`` switched to quicktok (its cache off: every count is quicktok's own)."""
    if name not in _QUICK:
        tok = TiktokenTokenizer(name, cache_chars=0)
        assert (tok.speed_up(), tok.counter) == (True, "quicktok"), tok.counter
        _QUICK[name] = tok
    return _QUICK[name]


def reference(name: str) -> TiktokenTokenizer:
    """tiktoken alone (no rs-bpe, never switched)."""
    if name not in _REFERENCE:
        _REFERENCE[name] = TiktokenTokenizer(name, fast=False)
    return _REFERENCE[name]


@pytest.mark.parametrize("name", EXACT)
def test_counts_over_the_bundled_corpus_are_tiktokens(name: str) -> None:
    want = [len(ids) for ids in reference(name).encoding.encode_ordinary_batch(TEXTS)]
    assert [quick(name).count(t) for t in TEXTS] == want
    assert [quick(name).count_once(t) for t in TEXTS[::5]] == want[::5]


GENERATED = st.one_of(
    st.text(max_size=400),
    st.lists(st.sampled_from([" ", "  ", "\t", "\n", "\r\n", "\x0b", "\x0c", "\x85", "\u00a0", "\u2028", "\x1c", "'s", "'LL",
                              "0123", "4", "a", "Zé", "e\u0301", "東京", "👍🏽", "/", ".", "<|endoftext|>", "<|fim_prefix|>",
                              "<doc id=\"x\">", "x" * 40, " " * 40]), max_size=120).map("".join),
)


@settings(max_examples=examples(400), deadline=None)
@given(text=GENERATED)
def test_counts_of_generated_text_are_tiktokens(text: str) -> None:
    for name in EXACT:
        assert quick(name).count(text) == len(reference(name).encoding.encode_ordinary(text)), name


def test_lone_surrogates_are_replaced_as_tiktoken_does() -> None:
    for text in ("a\ud800b", "x\udfffy", "\udc00" * 3):
        assert quick("cl100k_base").count(text) == len(reference("cl100k_base").encoding.encode_ordinary(text))


def test_counting_switches_when_asked_and_only_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    real = tokens._load_quick
    monkeypatch.setattr(tokens, "_load_quick", lambda name: calls.append(name) or real(name))
    tok = TiktokenTokenizer("cl100k_base")
    text = "word " * 150
    assert (tok.count(text + "a"), tok.counter, calls) == (151, "rs-bpe", [])
    assert tok.speed_up() is True and (tok.counter, calls) == ("quicktok", ["cl100k_base"])
    assert [tok.count(text + c) for c in "bcdefg"] == [151] * 6
    assert tok.speed_up() is True and calls == ["cl100k_base"]


def test_without_quicktok_counting_stays_and_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "quicktok", None)  # import quicktok raises ImportError
    tok = TiktokenTokenizer("cl100k_base")
    assert tok.speed_up() is False and tok.count("hello world, hello") == 4
    assert tok.counter == "rs-bpe (quicktok is not installed: pip install -e '.[fast]' (in an edgewise checkout))"
    assert tok.speed_up() is False and tok.count("hello there world") == 3
    monkeypatch.delitem(sys.modules, "quicktok")
    assert tok.speed_up() is False, "tried once: a later install does not switch a loaded tokenizer"


class _OffByOne:
    """A counter that miscounts the texts with a line break."""

    def __init__(self, real: object) -> None:
        self.real = real

    def count(self, text: str) -> int:
        return self.real.count(text) + ("\n" in text)  # type: ignore[attr-defined]


def test_a_counter_that_disagrees_on_the_probes_is_not_adopted(monkeypatch: pytest.MonkeyPatch) -> None:
    real, _ = tokens._load_quick("cl100k_base")
    monkeypatch.setattr(tokens, "_load_quick", lambda name: (_OffByOne(real), None))
    tok = TiktokenTokenizer("cl100k_base")
    assert tok.speed_up() is False
    assert tok.counter == "rs-bpe (quicktok disagrees on '  \\r\\n\\t \\n\\n  x  ')"
    assert tok.count("a\nb") == 3


def test_an_encoding_quicktok_cannot_load_stays(monkeypatch: pytest.MonkeyPatch) -> None:
    import quicktok

    def refuse(name: str) -> None:
        raise ValueError(f"unknown encoding {name}")

    monkeypatch.setattr(quicktok, "get_encoding", refuse)
    tok = TiktokenTokenizer("o200k_base")
    assert tok.speed_up() is False
    assert tok.counter == "rs-bpe (quicktok could not load o200k_base: ValueError: unknown encoding o200k_base)"


def test_a_pack_is_the_same_whichever_counter_counts_it() -> None:
    """The bundled example and NQ chunks, several budgets, layouts and orders: prompt and whole
    debug record equal with rs-bpe and with quicktok counting (fresh tokenizers, fresh caches)."""
    query = (EXAMPLES / "query.txt").read_text(encoding="utf-8").strip()
    example = json.loads((EXAMPLES / "chunks.json").read_text(encoding="utf-8"))
    with gzip.open(DATA / "nq-open-oracle-dev.jsonl.gz", "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line, _ in zip(f, range(3))]
    nq = [(r["question"], [{"id": f"d{i}", "title": c["title"], "text": c["text"], "score": 1.0 / (i + 1)}
                           for i, c in enumerate(r["ctxs"])]) for r in rows]
    cases = [(query, example, dict(budget=b)) for b in (300, 700, 2000)] + [
        (q, chunks, dict(budget=b, layout=lay, order=order))
        for q, chunks in nq for b in (500, 1500) for lay, order in (("sections", "edges"), ("layered", "relevance"))]
    for name in EXACT:
        slow, fast = TiktokenTokenizer(name), quick(name)
        for q, chunks, opts in cases:
            a = edgewise.pack(q, chunks, tokenizer=slow, **opts)
            b = edgewise.pack(q, chunks, tokenizer=fast, **opts)
            assert (a.prompt, a.debug_info.to_dict()) == (b.prompt, b.debug_info.to_dict()), (name, opts)
        assert slow.counter == "rs-bpe" and fast.counter == "quicktok"


# a character beside punctuation, digits, letters and space, where the pre-token split reads the
# character's class (letter or mark for quicktok, nothing for tiktoken on the UNEQUAL ones)
def _probes(c: str) -> tuple[str, ...]:
    return (c + "\\x", "\\" + c + "x", c + "123", "x" + c + "!x", "!" + c + "!", " " + c + "x", c + "\n")


def test_the_characters_quicktok_classes_apart_are_counted_as_tiktoken_does() -> None:
    from edgewise.tokens.counters import UNEQUAL, load_quick

    for name in EXACT:
        raw, _ = load_quick(name)
        want = reference(name).encoding
        edges = [chr(c) for a, b in UNEQUAL for c in (a, b)]
        assert any(raw.count(p) != len(want.encode_ordinary(p)) for c in edges for p in _probes(c))  # raw quicktok misses
        texts = [p for c in edges for p in _probes(c)] + ['<doc id="\U000323b0\\u001f"', "ok \U000323b0\\x and plain text"]
        assert [quick(name).count(t) for t in texts] == [len(want.encode_ordinary(t)) for t in texts], name


@pytest.mark.slow
def test_the_unequal_ranges_are_every_code_point_quicktok_and_tiktoken_count_apart() -> None:
    """Every code point in the probes, raw quicktok against rs-bpe (held to tiktoken by test_exact):
    the code points where they differ, over both encodings, are exactly the UNEQUAL ranges. Fails
    when a new quicktok or rs-bpe moves its Unicode tables."""
    from edgewise.tokens.counters import UNEQUAL, load_fast, load_quick

    apart: set[int] = set()
    for name in EXACT:
        raw, _ = load_quick(name)
        rs = load_fast(name)
        apart |= {cp for cp in range(0x80, 0x110000) if not 0xD800 <= cp <= 0xDFFF
                  and any(raw.count(p) != rs.count(p) for p in _probes(chr(cp)))}
    assert apart == {cp for a, b in UNEQUAL for cp in range(a, b + 1)}
