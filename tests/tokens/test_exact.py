"""rs-bpe, which counts and cuts for cl100k/o200k, gives tiktoken's ids; and tiktoken's split
patterns are the ones the word bound's proof reads.

The fast path is adopted only because it is the same function: every id over the bundled corpus
and over generated text equals ``tiktoken``'s ``encode_ordinary``, and ``truncate`` and
``count_prefix`` agree with the tiktoken-only tokenizer (``fast=False``).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edgewise.tokens.tokenizers import TiktokenTokenizer, get_tokenizer
from edgewise.tokens.wordbound import BRIDGES_BY_NAME, CL100K_PATTERN, O200K_PATTERN

from ..conftest import examples
from ..corpus import bundled_texts

EXACT = ("cl100k_base", "o200k_base")


TEXTS = bundled_texts()


@pytest.fixture(scope="module", params=EXACT)
def pair(request: pytest.FixtureRequest) -> tuple[TiktokenTokenizer, TiktokenTokenizer]:
    fast = TiktokenTokenizer(request.param)
    assert fast._fast is not None, "rs-bpe is a core dependency: the fast path must be on"
    return fast, TiktokenTokenizer(request.param, fast=False)


def test_same_ids_and_counts_over_the_bundled_corpus(pair: tuple[TiktokenTokenizer, TiktokenTokenizer]) -> None:
    fast, slow = pair
    want = slow.encoding.encode_ordinary_batch(TEXTS)
    assert [fast.encode(t) for t in TEXTS] == want
    assert [fast.count(t) for t in TEXTS] == [len(ids) for ids in want]


def test_same_cuts_and_prefix_counts(pair: tuple[TiktokenTokenizer, TiktokenTokenizer]) -> None:
    fast, slow = pair
    for i, text in enumerate(TEXTS[:3000:7]):
        n = 1 + i % 40
        assert fast.truncate(text, n) == slow.truncate(text, n)
        at = (i * 13) % (len(text) + 1)
        assert fast.count_prefix(text, at) == slow.count_prefix(text, at)


GENERATED = st.one_of(
    st.text(max_size=300),
    st.text(st.sampled_from(list(" \t\n\r\x0b\x0c\x85\u00a0\u2028'sdtmlvre0123456789aZé\u0301👍/.!<|>endoftext")), max_size=80),
)


@settings(max_examples=examples(300), deadline=None)
@given(text=GENERATED, n=st.integers(min_value=0, max_value=50))
def test_same_on_generated_text(text: str, n: int) -> None:
    for name in EXACT:
        fast = get_tokenizer(name)
        if name not in _SLOW:
            _SLOW[name] = TiktokenTokenizer(name, fast=False)
        slow = _SLOW[name]
        assert fast.encode(text) == slow.encoding.encode_ordinary(text)
        assert fast.count(text) == len(slow.encoding.encode_ordinary(text))
        assert fast.truncate(text, n) == slow.truncate(text, n)


_SLOW: dict[str, TiktokenTokenizer] = {}


def test_lone_surrogates_are_replaced_as_tiktoken_does() -> None:
    tok = get_tokenizer("cl100k_base")
    assert tok.encode("a\ud800b") == tok.encoding.encode_ordinary("a\ud800b")
    assert tok.count("x\udfffy") == len(tok.encoding.encode_ordinary("x\udfffy"))


def test_the_bound_reads_tiktokens_own_patterns() -> None:
    # a tiktoken that changed a split pattern would invalidate the word bound's proof: fail here
    assert get_tokenizer("cl100k_base").encoding._pat_str == CL100K_PATTERN
    assert get_tokenizer("o200k_base").encoding._pat_str == O200K_PATTERN
    assert BRIDGES_BY_NAME == {"cl100k_base": (), "o200k_base": ("\n/", "\r/")}


def test_without_rs_bpe_everything_runs_on_tiktoken() -> None:
    slow = TiktokenTokenizer("cl100k_base", fast=False)
    assert slow._fast is None and slow.count("hello world") == 2 and slow.truncate("hello world", 1) == "hello"


# ---------------------------------------------------------------- a cut encodes a prefix


def _cut_from_all_ids(tok: TiktokenTokenizer, text: str, n: int) -> str:
    """``truncate`` as it reads when it encodes the whole text: the reference for the prefix path."""
    return "" if n <= 0 else tok.cut_from_ids(text, tok.encode(text), n)


LONG = st.one_of(
    st.text(max_size=1500),
    st.lists(st.sampled_from(["word", " ", "  ", ".", "\n", "\x1c", "\u00a0", "\u2028", "'s", "12345", "é\u0301", "/",
                              "👍", "<|endoftext|>", "\t", "x" * 40]), max_size=400).map("".join),
)


@pytest.mark.parametrize("name", EXACT)
def test_a_head_encodes_to_the_texts_first_tokens_over_the_corpus(name: str) -> None:
    from edgewise.tokens.cache import token_head

    enc = get_tokenizer(name).encoding
    cut = 0
    passages = [t for t in TEXTS if len(t) > 500]  # 1,108 of them
    for i, text in enumerate(passages + TEXTS[:1000]):
        n = 1 + i % 30
        head = token_head(text, n)
        if head is not text:
            cut += 1
            ids = enc.encode_ordinary(head)
            assert enc.encode_ordinary(text)[:len(ids)] == ids, (i, n)
    assert cut > 600  # most passages are long enough for the prefix path


@settings(max_examples=examples(300), deadline=None)
@given(text=LONG, n=st.integers(min_value=0, max_value=60))
def test_a_cut_from_a_head_is_the_cut_from_all_ids(text: str, n: int) -> None:
    from edgewise.tokens.cache import token_head

    for name in EXACT:
        tok = get_tokenizer(name)
        head = token_head(text, n, chars_per_token=2)  # short heads: most fall short and fall back
        ids = tok.encoding.encode_ordinary(head)
        assert tok.encoding.encode_ordinary(text)[:len(ids)] == ids
        assert tok.truncate(text, n) == _cut_from_all_ids(tok, text, n)


@pytest.mark.parametrize("name", EXACT)
def test_cuts_of_passages_are_the_cuts_from_all_ids(name: str) -> None:
    tok = get_tokenizer(name)
    for i, text in enumerate(TEXTS[1:3000:5]):
        n = 1 + i % 50
        assert tok.truncate(text, n) == _cut_from_all_ids(tok, text, n), (i, n)
