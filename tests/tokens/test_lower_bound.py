"""The word bound on cl100k/o200k token counts never exceeds the exact count; and a count derived
from the same text with another number of trailing line breaks is the exact count.

``select.fit`` drops a chunk without encoding it when this bound already exceeds the tokens left,
so a bound that overshoots would drop a chunk that fits. Checked over the whole bundled corpus (every
NQ question, title and passage; every key-value record), over every built-in block that promises to
keep its text's words, and over generated text aimed at the pattern's edges.
"""

from __future__ import annotations

import gzip
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edgewise.chunk import Chunk
from edgewise.layout import Item, get_layout, hooks
from edgewise.layout.base import doc_block, doc_tags_bound, doc_tags_pricer
from edgewise.tokens.tokenizers import get_tokenizer
from edgewise.tokens.wordbound import words_bound

from ..conftest import DATA, examples

EXACT = ("cl100k_base", "o200k_base")
BIG = 10**9


def _corpus() -> list[str]:
    texts: list[str] = []
    with gzip.open(DATA / "nq-open-oracle-dev.jsonl.gz", "rt", encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            texts.append(row["question"])
            for ctx in row["ctxs"]:
                texts += [ctx["title"], ctx["text"]]
    with gzip.open(DATA / "kv-retrieval-75_keys.jsonl.gz", "rt", encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            texts.append(json.dumps(row["ordered_kv_records"]))
            texts += [k + " " + v for k, v in row["ordered_kv_records"]]
    return texts


CORPUS = _corpus()


@pytest.mark.parametrize("name", EXACT)
def test_bound_holds_over_the_whole_bundled_corpus(name: str) -> None:
    tok = get_tokenizer(name)
    enc = tok.encoding
    counts = [len(ids) for ids in enc.encode_ordinary_batch(CORPUS)]
    over = [(t[:60], b, n) for t, n in zip(CORPUS, counts) if (b := tok.lower_bound(t, BIG)) > n]
    assert over == []
    assert len(CORPUS) > 4000
    # and a useful bound on prose (English has a word for every ~1.3 tokens; UUIDs do not)
    prose = [(t, n) for t, n in zip(CORPUS, counts) if " " in t and "-" not in t[:40]]
    assert sum(tok.lower_bound(t, BIG) for t, _ in prose) > 0.6 * sum(n for _, n in prose)


@pytest.mark.parametrize("name", EXACT)
@pytest.mark.parametrize("layout", ["sections", "layered", "paper"])
def test_bound_holds_for_every_block_that_keeps_its_words(name: str, layout: str) -> None:
    tok, lay = get_tokenizer(name), get_layout(layout)
    assert hooks.keeps_text_words(lay)
    texts = CORPUS[::7] + HOSTILE
    for form in ("whole", "summary", "truncated"):
        blocks = [lay.block(Item(Chunk(f"id-{i}", t, title=t[:20] or None), form, t, i)) + "\n" for i, t in enumerate(texts)]
        counts = [len(ids) for ids in tok.encoding.encode_ordinary_batch(blocks)]
        assert [i for i, (t, n) in enumerate(zip(texts, counts)) if tok.lower_bound(t, BIG) > n] == []


def test_kv_blocks_join_words_so_the_kv_layout_makes_no_promise() -> None:
    lay = get_layout("kv")
    assert not hooks.keeps_text_words(lay)
    block = lay.block(Item(Chunk("k", "a\nb\nc\nd"), "whole", "a\nb\nc\nd", 0))
    assert len(block.split()) < len("a\nb\nc\nd".split())  # JSON escapes the line breaks: words join


@pytest.mark.parametrize("name", EXACT)
def test_tags_bound_holds_for_every_title_and_id_shape(name: str) -> None:
    tok = get_tokenizer(name)
    titles = [None, "", "T", "Some Title", "a\nb", '"quoted"', "x)(", "ünï cödé 👩‍👩‍👧", " lead", "trail ", "-dash", "<doc>"]
    ids = ["", "c1", "doc-12#3", '"', "-", "a b", "\u2028", "👍", "x" * 200]
    for title in titles + [t for t in CORPUS[1:400:3]]:
        for cid in ids:
            chunk = Chunk(cid, "text", title=title or None)
            exact = tok.count(doc_block(Item(chunk, "truncated", "", 0)) + "\n")
            assert doc_tags_bound(chunk, tok) <= exact, (cid, title)


@pytest.mark.parametrize("name", EXACT)
def test_tags_priced_by_parts_are_what_the_rendered_block_costs(name: str) -> None:
    """The exact price of a truncated block's tags, summed from its parts without rendering it, is
    the rendered block's count: for every title and id shape, through a pack's counts and without."""
    from edgewise.packing.fast import PackCounts

    tok = get_tokenizer(name)
    titles = [None, "", "T", "Some Title", "a\nb", '"quoted"', "x)(", "ünï cödé 👩‍👩‍👧", " lead", "trail ", "-dash", "<doc>"]
    ids = ["", "c1", "c12345", "doc-12#3", '"', "-", "a b", "\u2028", "👍", "x" * 200, "1" * 7, "<doc id>", "é\u0301"]
    for counts in (tok, PackCounts(tok)):
        price = doc_tags_pricer(counts)
        for title in titles + CORPUS[1:400:3]:
            for cid in ids:
                exact = tok.count(doc_block(Item(Chunk(cid, "text", title=title or None), "truncated", "", 0)) + "\n")
                assert price(cid, title) == exact, (cid, title)
                assert doc_tags_bound(Chunk("", "", title=title or None), tok) <= exact


def test_estimators_and_other_tokenizers() -> None:
    assert get_tokenizer("words").lower_bound("one two three", 0) == get_tokenizer("words").count("one two three")
    assert get_tokenizer("chars").lower_bound("abcdefgh", 0) == 2
    assert doc_tags_bound(Chunk("a", "b", title="T"), get_tokenizer("words")) == 0  # no proof: no bound


def test_the_corrections_are_needed() -> None:
    o200k = get_tokenizer("o200k_base")
    # o200k's punctuation pre-token runs on past a line break into "/": three words, two tokens
    assert len(".\n/\n/".split()) == 3 and o200k.count(".\n/\n/") == 2
    assert o200k.lower_bound(".\n/\n/", BIG) == 1
    assert get_tokenizer("cl100k_base").lower_bound(".\n/\n/", BIG) == 3 == get_tokenizer("cl100k_base").count(".\n/\n/")
    # str.split splits on \x1c-\x1f, which the patterns' \s does not: each is taken off
    assert len("a\x1cb".split()) == 2 and words_bound("a\x1cb", BIG) == 1


def test_counting_stops_past_stop() -> None:
    text = "w " * 1000
    assert [words_bound(text, s) for s in (0, 5, 999, 1000, BIG)] == [1, 6, 1000, 1000, 1000]
    assert words_bound("", 3) == 0 and words_bound(" \t\n ", 3) == 0 and words_bound("x", -5) == 1


HOSTILE = [
    "", " ", "\n", "\r\n", "a\x1cb\x1dc", ".\n/\n/", "!\r/x", "x\u00a0 \u00a0y", "\u2028/", "word\u3000word",
    "'s 're 'LL", "123456789", "<|endoftext|>", "  \n\n  ", "tab\there", "🤖🤖 🤖", "é\u0301", "/" * 50, "\x85/",
]
EDGE_CHARS = st.sampled_from(list(" \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f\x85\u00a0\u1680\u2000\u2028\u2029\u202f\u3000/.!'\"sdtmlvre0123aZé\u0301👍"))
TEXTS = st.one_of(st.text(max_size=200), st.text(EDGE_CHARS, max_size=60), st.sampled_from(HOSTILE))


@settings(max_examples=examples(400), deadline=None)
@given(text=TEXTS, stop=st.integers(min_value=-3, max_value=80))
def test_bound_never_exceeds_the_count_of_generated_text(text: str, stop: int) -> None:
    for name in EXACT:
        tok = get_tokenizer(name)
        n = len(tok.encoding.encode_ordinary(text))
        full = tok.lower_bound(text, BIG)
        assert full <= n
        assert tok.lower_bound(text, stop) == min(full, max(stop, 0) + 1)


@settings(max_examples=examples(300), deadline=None)
@given(cid=TEXTS, title=st.none() | TEXTS)
def test_tags_priced_by_parts_for_generated_ids_and_titles(cid: str, title: str | None) -> None:
    """The parts of a truncated block's tags add up to its count for generated ids and titles
    (separators, quotes, digits, marks: the characters where pre-tokens could run across a join)."""
    for name in EXACT:
        tok = get_tokenizer(name)
        exact = len(tok.encoding.encode_ordinary(doc_block(Item(Chunk(cid, "x", title=title or None), "truncated", "", 0)) + "\n"))
        assert doc_tags_pricer(tok)(cid, title) == exact


# ---------------------------------------------------------------- counts from other line breaks

PUNCT = sorted("!\"#$%&()*+,-.:;<=>?@[\\]^_`{|}~")


def _check_line_breaks(tok, stem: str) -> None:
    """count(stem + k breaks) from count(stem + j breaks), by the identity, equals the exact count."""
    from edgewise.tokens.cache import line_break_tail

    enc = tok.encoding
    exact = [len(enc.encode_ordinary(stem + "\n" * k)) for k in range(4)]
    for k in range(4):
        found = line_break_tail(stem + "\n" * k)
        assert found is not None and found[0] == stem
        mark = found[1]
        for j in range(4):
            derived = exact[j] - len(enc.encode_ordinary(mark + "\n" * j)) + len(enc.encode_ordinary(mark + "\n" * k))
            assert derived == exact[k], (stem[-40:], j, k)


@pytest.mark.parametrize("name", EXACT)
def test_line_break_identity_holds_over_the_corpus_and_every_block(name: str) -> None:
    tok = get_tokenizer(name)
    checked = 0
    for i, text in enumerate(CORPUS[:6000]):
        for stem in (text.rstrip("\n") + PUNCT[i % len(PUNCT)], f'<doc id="c{i}">\n  {text}\n</doc>'):
            if stem[-2:-1].isascii() and stem[-2:-1].isalnum():
                _check_line_breaks(tok, stem)
                checked += 1
    assert checked > 6000
    # the texts a pack derives this way: each layout's blocks
    from edgewise.tokens.cache import line_break_tail

    for layout in ("sections", "layered", "paper", "kv"):
        lay = get_layout(layout)
        for i, text in enumerate(CORPUS[:300]):
            block = lay.block(Item(Chunk(f"c{i}", text, title=CORPUS[i + 1][:30]), "whole", text, i))
            if (found := line_break_tail(block)) is not None:
                _check_line_breaks(tok, found[0])


@pytest.mark.parametrize("name", EXACT)
@settings(max_examples=examples(300), deadline=None)
@given(head=st.text(max_size=30), letter=st.sampled_from(list("aZ09")), mark=st.sampled_from(PUNCT))
def test_line_break_identity_holds_for_generated_text(name: str, head: str, letter: str, mark: str) -> None:
    _check_line_breaks(get_tokenizer(name), head + letter + mark)


def test_line_break_identity_refuses_what_it_does_not_cover() -> None:
    from edgewise.tokens.cache import line_break_tail

    assert line_break_tail("word.\n\n") == ("word.", ".")
    # a space, a letter or a second punctuation before the mark; an apostrophe; no mark at all
    assert [line_break_tail(t) for t in ("word .\n", "wordé.\n", "word..\n", "word'\n", "word\n", ".\n")] == [None] * 6
