"""EVALUATION.md's retrieval section is what the committed raw results in docs/eval/runs/rag say, under today's code.

``benchmarks/retrieval.py`` indexed the NQ passages with ``edgewise index``'s code, recorded the
rank of each question's gold passage under dense, BM25 and hybrid retrieval (``retrieval.jsonl``),
and answered qa10's questions from the retrieved passages with the local model (``answers.jsonl``).
These tests recompute the document's tables from those files, re-score every stored prediction with
today's metric, check the questions are qa10's and the gold passages the data's, and rebuild every
end-to-end prompt from its recorded documents with today's ``pack()``: no model, no store.
"""

from __future__ import annotations

import importlib.util
import json
import sys

import pytest

from edgewise import pack
from edgewise.eval.metrics import get_metric
from edgewise.eval.nq import DEV_FILE, has_answer, read_jsonl
from edgewise.order import place

from ..conftest import DATA, ROOT

RUN = ROOT / "docs" / "eval" / "runs" / "rag"
QA10 = ROOT / "docs" / "eval" / "runs" / "qa10"
DOC = (ROOT / "EVALUATION.md").read_text(encoding="utf-8")


def _bench():
    spec = importlib.util.spec_from_file_location("bench_retrieval", ROOT / "benchmarks" / "retrieval.py")
    bench = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = bench
    spec.loader.exec_module(bench)
    return bench


@pytest.fixture(scope="module")
def bench():
    return _bench()


@pytest.fixture(scope="module")
def rows():
    return read_jsonl(DATA / DEV_FILE)


@pytest.fixture(scope="module")
def corpus(bench, rows):
    passages, gold = bench.corpus(rows)
    return {p.id: p for p in passages}, gold


@pytest.fixture(scope="module")
def retrieval(bench):
    return bench.load_jsonl(RUN / "retrieval.jsonl")


@pytest.fixture(scope="module")
def answers(bench):
    return bench.load_jsonl(RUN / "answers.jsonl")


def test_the_document_tables_are_the_tables_of_the_committed_results(bench, answers):
    lines = bench.tables(RUN).splitlines()
    conds = len({r["condition"] for r in answers})
    # 3 retrieval modes; qa10's 5 rows (closed-book, oracle, baseline at 0/4/9) and one per condition;
    # each condition paired with qa10's 5 rows
    assert len(lines) == (2 + 3) + 1 + (2 + 5 + conds) + 1 + (2 + 5 * conds)
    missing = [line for line in lines if line not in DOC.splitlines()]
    assert not missing, f"rows not in EVALUATION.md (regenerate them: benchmarks/retrieval.py --tables-only): {missing}"


def test_every_question_is_in_the_retrieval_results_with_its_gold_passage(retrieval, rows, corpus):
    by_id, gold = corpus
    assert [r["id"] for r in retrieval] == [f"nq-{i}" for i in range(len(rows))]
    assert [(r["question"], r["answers"], r["gold"]) for r in retrieval] == [
        (row["question"], row["answers"], g) for row, g in zip(rows, gold)]
    runs = json.loads((RUN / "meta.json").read_text(encoding="utf-8"))["runs"]
    assert {run["corpus"]["passages"] for run in runs} == {len(by_id)}
    for r in retrieval:
        for mode in ("dense", "bm25", "hybrid"):
            for rank in (r["gold_rank"][mode], r["answer_rank"][mode]):
                assert rank is None or 1 <= rank <= 20, r["id"]


def test_an_answer_bearing_gold_passage_bounds_the_first_answer_rank(retrieval, corpus):
    by_id, _ = corpus
    checked = 0
    for r in retrieval:
        p = by_id[r["gold"]]
        if not has_answer(f"{p.title} {p.text}", r["answers"]):
            continue
        for mode in ("dense", "bm25", "hybrid"):
            if r["gold_rank"][mode] is not None:
                assert r["answer_rank"][mode] is not None and r["answer_rank"][mode] <= r["gold_rank"][mode], r["id"]
                checked += 1
    assert checked > 3000


def test_recall_in_the_document_counts_the_recorded_ranks(retrieval):
    n = len(retrieval)
    for mode in ("dense", "bm25", "hybrid"):
        at5 = sum(1 for r in retrieval if r["gold_rank"][mode] is not None and r["gold_rank"][mode] <= 5)
        at20 = sum(1 for r in retrieval if r["gold_rank"][mode] is not None)
        row = next(line for line in DOC.splitlines() if line.startswith(f"| {mode} | {n} |"))
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert (cells[3], cells[5]) == (f"{at5 / n:.3f}", f"{at20 / n:.3f}")


def test_the_end_to_end_questions_are_qa10s_with_its_answers(answers, bench):
    plan = json.loads((QA10 / "run.json").read_text(encoding="utf-8"))["plan"]["examples"]
    qa10 = {r["example"]: r["answers"] for r in bench.load_jsonl(QA10 / "results.jsonl")}
    conds = list(dict.fromkeys(r["condition"] for r in answers))
    assert conds[0] == "hybrid" and set(conds) <= set(bench.CONDITIONS)
    for cond in conds:
        mine = [r for r in answers if r["condition"] == cond]
        asked = plan[:len(mine)]  # qa10's questions, in its order (a run cut short has its first ones)
        assert mine and [r["id"] for r in mine] == asked, cond
        assert [r["answers"] for r in mine] == [qa10[q] for q in asked], cond


def test_stored_correctness_is_the_metric_of_the_stored_prediction(answers):
    metric = get_metric("best_subspan_em")
    assert [r["correct"] for r in answers] == [metric(r["prediction"], r["answers"]) for r in answers]


def test_every_prompt_is_what_pack_builds_today_from_the_recorded_documents(answers, corpus, rows, bench):
    by_id, _ = corpus
    for r in answers:
        docs = [{"id": i, "title": by_id[i].title, "text": " ".join(by_id[i].text.split())} for i in r["docs"]]
        order = "original"
        if r["condition"] == "hybrid-edges":  # recorded in prompt order: put them back in retrieval order
            slots = place("edges", len(docs))
            docs = [docs[slots.index(k)] for k in range(len(docs))]
            order = "edges"
        packed = pack(rows[int(r["id"].removeprefix("nq-"))]["question"], docs, layout="paper", order=order)
        assert packed.debug_info.order == r["docs"], r["id"]
        assert (packed.debug_info.prompt_tokens, bench._sha(packed.prompt)) == (r["packed_tokens"], r["prompt_sha"]), r["id"]
        assert r["gold_at"] == (r["docs"].index(r["gold"]) if r["gold"] in r["docs"] else None)
        assert r["answer_docs"] == sum(has_answer(f"{by_id[i].title} {by_id[i].text}", r["answers"]) for i in r["docs"])


def test_the_conditions_relate_as_described(answers):
    by = {(r["id"], r["condition"]): r for r in answers}
    asked = {r["prompt_sha"]: r for r in answers if not r["reused"]}
    assert len(asked) == sum(1 for r in answers if not r["reused"])  # no prompt was asked twice
    for (q, cond), r in by.items():
        hybrid = by[(q, "hybrid")]
        assert len(r["docs"]) == len(set(r["docs"])) == 10
        if cond == "hybrid-edges":
            assert sorted(r["docs"]) == sorted(hybrid["docs"])
        if cond == "hybrid-no-gold":
            assert r["gold"] not in r["docs"]
        if r["reused"]:  # the same prompt as an answered one: its answer
            first = asked[r["prompt_sha"]]
            assert (r["docs"], r["prediction"], r["prompt_tokens"]) == (first["docs"], first["prediction"], first["prompt_tokens"])
