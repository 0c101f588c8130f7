"""pack() with the relevance steps: sentence pruning and automatic extractive summaries, on real NQ rows."""

import pytest

from edgewise import InputError, get_tokenizer, pack, parse
from edgewise.eval.nq import has_answer

MODELS = pytest.mark.models  # with the models extra installed, prune and summaries="auto" run the dense model


def nq_chunks(rows, n=6):
    """The gold passage of the first row and the passages of other rows as distractors."""
    row = rows[0]
    chunks = [{"id": "gold", "title": row["ctxs"][0]["title"], "text": row["ctxs"][0]["text"], "score": 0.9}]
    chunks += [{"id": f"d{i}", "title": r["ctxs"][0]["title"], "text": r["ctxs"][0]["text"], "score": 0.5 - i / 100}
               for i, r in enumerate(rows[1:n])]
    return row["question"], row["answers"], chunks


@MODELS
def test_pruning_keeps_the_answer_and_cuts_tokens(nq_rows):
    kept_answer = 0
    saved = []
    for start in range(0, 60, 6):
        question, answers, chunks = nq_chunks(nq_rows[start:], 6)
        full = pack(question, chunks, layout="layered")
        cut = pack(question, chunks, layout="layered", prune=0.2)
        assert cut.debug_info.placed == full.debug_info.placed  # pruning never empties a chunk
        assert {r["id"] for r in cut.debug_info.pruned} <= {c["id"] for c in chunks}
        for record in cut.debug_info.pruned:
            assert 0 < record["kept_chars"] < record["original_chars"]
        saved.append(1 - cut.debug_info.prompt_tokens / full.debug_info.prompt_tokens)
        kept_answer += has_answer(cut.prompt, answers)
    assert kept_answer >= 9  # of 10 questions, the answer string is still in the pruned prompt
    assert sum(saved) / len(saved) > 0.2


@MODELS
def test_automatic_summaries_are_extractive_within_their_cap_and_marked(nq_rows):
    question, _, chunks = nq_chunks(nq_rows, 8)
    tok = get_tokenizer("cl100k_base")
    out = pack(question, chunks, budget=900, high_importance_k=2, summaries="auto", summary_tokens=30)
    info = out.debug_info
    assert info.summarized, "the budget should force summaries past the two key facts"
    by_id = {c["id"]: c for c in chunks}
    summaries = {c.id: c.text for c in parse(out.prompt, "sections").chunks if c.form == "summary"}
    assert sorted(summaries) == sorted(info.summarized)
    for cid, text in summaries.items():
        assert tok.count(text) <= 30
        words = iter(by_id[cid]["text"].split())
        assert all(w in words for w in text.split()), "summary words must come from the chunk, in order"
        assert text != by_id[cid]["text"]
        record = next(r for r in info.chunks if r["id"] == cid)
        assert record["reason"] == "extractive summary fits where the whole chunk does not"
    assert info.prompt_tokens <= 900


def test_bad_relevance_options():
    with pytest.raises(InputError, match="prune must be a threshold in \\[0, 1\\], but got 1.5"):
        pack("q", ["a"], prune=1.5)
    with pytest.raises(InputError, match="summaries must be one of given, auto, llm, but got 'abstractive'"):
        pack("q", ["a"], summaries="abstractive")
