"""edgewise as a drop-in for Haystack's LostInTheMiddleRanker: its published test expectations."""

import pytest

from edgewise import InputError, pack


def run(docs, **kw):
    """Pack plain-text documents (input order = rank) with the flat layout; return texts in prompt order."""
    out = pack("", docs, layout="layered", tokenizer="words", **kw)
    by_id = {f"chunk-{i}": d for i, d in enumerate(docs)}
    return [by_id[i] for i in out.debug_info.order]


def test_order_odd_and_even():
    assert run([str(i) for i in range(1, 10)]) == "1 3 5 7 9 8 6 4 2".split()
    assert run([str(i) for i in range(1, 11)]) == "1 3 5 7 9 10 8 6 4 2".split()


def test_word_count_threshold():
    words = [f"word{i}" for i in range(1, 10)]
    assert run(words, word_count_threshold=6) == "word1 word3 word5 word6 word4 word2".split()
    assert run(words, word_count_threshold=9) == "word1 word3 word5 word7 word9 word8 word6 word4 word2".split()
    assert run(words, word_count_threshold=100) == "word1 word3 word5 word7 word9 word8 word6 word4 word2".split()


def test_word_count_threshold_keeps_the_document_that_reaches_it():
    docs = ["a b c", "d e f", "g h i", "j k l"]
    assert run(docs, word_count_threshold=5) == ["a b c", "d e f"]
    assert run(docs, word_count_threshold=4) == ["a b c", "d e f"]
    assert run(docs, word_count_threshold=3) == ["a b c"]


def test_dropped_documents_are_reported_with_the_rule():
    out = pack("", ["a b c", "d e f", "g h i"], layout="layered", tokenizer="words", word_count_threshold=4)
    assert out.debug_info.dropped == [
        {"id": "chunk-2", "input_index": 2, "reason": "word_count_threshold=4 reached by the chunk ranked 2"}
    ]


def test_empty_and_single():
    assert run([]) == []
    assert run(["only"]) == ["only"]


@pytest.mark.parametrize("value", [0, -5])
def test_bad_threshold_and_top_k_are_rejected_with_the_value(value):
    with pytest.raises(InputError, match=f"word_count_threshold must be > 0, but got {value}"):
        run(["a"], word_count_threshold=value)
    with pytest.raises(InputError, match=f"top_k must be > 0, but got {value}"):
        run(["a"], top_k=value)


def test_top_k_equals_running_on_the_first_k():
    docs = [str(i) for i in range(1, 11)]
    for k in range(1, 11):
        assert run(docs, top_k=k) == run(docs[:k])


def test_duplicates_keep_the_highest_score_and_are_reported():
    docs = [
        {"id": "a", "text": "LOWTEXT", "score": 0.1},
        {"id": "b", "text": "other", "score": 0.5},
        {"id": "a", "text": "HIGHTEXT", "score": 0.9},
    ]
    out = pack("", docs, layout="layered", tokenizer="words")
    assert out.debug_info.order == ["a", "b"]
    # placed first (the first "a"'s place, as Haystack keeps it), with the text of input #2
    assert [(r["input_index"], r["position"]) for r in out.debug_info.chunks if r["id"] == "a" and r["outcome"] == "placed"] == [(2, 0)]
    assert "HIGHTEXT" in out.prompt and "LOWTEXT" not in out.prompt
    assert out.debug_info.dropped == [
        {"id": "a", "input_index": 0, "reason": "duplicate id with another text: input #2 kept instead (it has the higher score); this text is in no prompt"}
    ]


def test_a_duplicate_says_why_it_lost_and_whether_its_text_is_gone():
    docs = [
        {"id": "a", "text": "same", "score": 0.2},
        {"id": "a", "text": "same", "score": 0.2},  # a tie: the first one seen stays
        {"id": "b", "text": "kept b", "score": 0.5},
        {"id": "b", "text": "another b", "score": 0.5},  # a tie too, and its text is lost
        {"id": "a", "text": "same", "score": 0.1},
        {"id": "a", "text": "other", "score": 0.05},
    ]
    out = pack("q", docs, layout="layered", tokenizer="words")
    assert out.debug_info.dropped == [
        {"id": "a", "input_index": 1, "reason": "duplicate id: merged into input #0, which has the same score and comes first"},
        {"id": "b", "input_index": 3, "reason": "duplicate id with another text: input #2 kept instead "
                                               "(it has the same score and comes first); this text is in no prompt"},
        {"id": "a", "input_index": 4, "reason": "duplicate id: merged into input #0, which has the higher score"},
        {"id": "a", "input_index": 5, "reason": "duplicate id with another text: input #0 kept instead (it has the higher score); this text is in no prompt"},
    ]
    assert [r["merged_into"] for r in out.debug_info.chunks] == [None, 0, None, 2, 0, 0]
    assert "other" not in out.prompt and "another b" not in out.prompt
