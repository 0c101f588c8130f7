"""The NQ multi-document QA builder, on the whole shared dev file."""

import hashlib
import json

import pytest

from edgewise.cli import main
from edgewise.errors import InputError
from edgewise.eval.nq import DEV_FILE, build, has_answer, normalize_answer, read_jsonl

from ..conftest import DATA

SOURCE = DATA / DEV_FILE
pytestmark = pytest.mark.slow  # BM25 over the whole 2,000-row file: seconds, kept out of make check


@pytest.fixture(scope="module")
def dev_rows():
    return read_jsonl(SOURCE)


@pytest.fixture(scope="module")
def built(dev_rows):
    skipped = []
    return list(build(dev_rows, docs=20, gold_at=9, seed=0, skipped=skipped)), skipped


def test_squad_normalisation_matches_the_reference_examples():
    assert normalize_answer("The Beatles") == "beatles"
    assert normalize_answer("  An apple, a day!  ") == "apple day"
    assert normalize_answer("Röntgen's theory") == "röntgens theory"
    assert has_answer("Won by the Beatles in 1964", ["beatles"]) is True


def test_no_answer_bearing_passage_among_the_distractors_of_the_whole_dev_file(dev_rows, built):
    rows, skipped = built
    # the one question whose answer ("S") is inside every passage cannot get distractors: it is reported
    assert [s["row"] for s in skipped] == [1390]
    assert len(rows) == len(dev_rows) - 1
    leaks = [
        (r["question"], c["id"])
        for r in rows
        for c in r["ctxs"]
        if not c["isgold"] and has_answer(f"{c['title']} {c['text']}", r["answers"])
    ]
    assert leaks == []


def test_shape_and_gold_position(dev_rows, built):
    rows, _ = built
    assert {len(r["ctxs"]) for r in rows} == {20}
    assert [[c["isgold"] for c in r["ctxs"]].index(True) for r in rows] == [9] * len(rows)
    assert all(sum(c["isgold"] for c in r["ctxs"]) == 1 for r in rows)
    assert [sum(c["hasanswer"] for c in r["ctxs"]) for r in rows] == [1] * len(rows)
    first = rows[0]
    assert first["question"] == dev_rows[0]["question"] and first["answers"] == dev_rows[0]["answers"]
    assert first["ctxs"][9]["text"] == dev_rows[0]["ctxs"][0]["text"]
    assert set(first["ctxs"][0]) == {"id", "title", "text", "score", "hasanswer", "isgold"}
    # distractors come from other rows, each once, in BM25 order
    for r in rows[:200]:
        ids = [c["id"] for c in r["ctxs"] if not c["isgold"]]
        assert len(set(ids)) == 19
        scores = [c["score"] for c in r["ctxs"] if not c["isgold"]]
        assert scores == sorted(scores, reverse=True)


def test_cli_is_deterministic_per_seed(tmp_path, dev_rows):
    source = tmp_path / "slice.jsonl"  # --source takes any file in the oracle format
    source.write_text("".join(json.dumps(r) + "\n" for r in dev_rows[:300]), encoding="utf-8")
    outs = []
    for name in ("a.jsonl", "b.jsonl"):
        path = tmp_path / name
        assert main(["data", "nq", "--source", str(source), "--docs", "10", "--gold-at", "-1", "--seed", "3",
                     "-o", str(path)]) == 0
        outs.append(hashlib.sha256(path.read_bytes()).hexdigest())
    assert outs[0] == outs[1]
    first = json.loads((tmp_path / "a.jsonl").read_text(encoding="utf-8").splitlines()[0])
    assert [c["isgold"] for c in first["ctxs"]] == [False] * 9 + [True]


def test_bad_parameters_are_rejected(dev_rows, tmp_path):
    with pytest.raises(InputError, match=r"gold_at must be in \[-5, 4\] for 5 documents, but got 5"):
        list(build(dev_rows[:10], docs=5, gold_at=5))
    with pytest.raises(InputError, match="docs must be > 0, but got 0"):
        list(build(dev_rows[:10], docs=0))
    with pytest.raises(InputError, match="row 0 must have 'answers'"):
        list(build([{"question": "q", "answers": [], "ctxs": [{"text": "t"}]}], docs=1))
    assert main(["data", "nq", "--source", str(tmp_path / "missing.jsonl"), "-o", str(tmp_path / "x")]) == 2


def test_one_answer_normaliser():
    from edgewise.eval import metrics, nq

    assert nq.normalize_answer is metrics.normalize_answer


def test_a_larger_pool_gives_harder_distractors_and_a_small_one_warns(dev_rows):
    import warnings

    from edgewise.eval.nq import DataWarning

    source = dev_rows[:300]
    with pytest.warns(DataWarning) as seen:
        alone = list(build(source, docs=5, seed=1))
    # the pool: each row's gold passage and its long answer's first 100 words, each (title, text) once
    n = len({(r["ctxs"][0]["title"], " ".join(r["ctxs"][0]["text"].split())) for r in source} | {
        (r["nq_annotated_gold"].get("title") or "", " ".join(r["nq_annotated_gold"]["long_answer"].split()[:100]))
        for r in source if (r.get("nq_annotated_gold") or {}).get("long_answer", "").strip()})
    assert [str(w.message) for w in seen] == [
        f"the distractor pool holds {n} passages (fewer than 1,000), so the mined distractors are easier than the "
        "paper's; add rows to mine from (pool=, CLI: --pool FILE)"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a pool of the whole file is large enough: no warning
        pooled = list(build(source, docs=5, seed=1, pool=dev_rows))
    assert [r["question"] for r in pooled] == [r["question"] for r in alone]
    from_pool = [c["id"] for r in pooled for c in r["ctxs"] if c["id"].startswith("pool-")]
    assert from_pool and all(int(i.split("-")[1]) >= 300 for i in from_pool)  # the source's own rows keep their ids
    leaks = [c["id"] for r in pooled for c in r["ctxs"] if not c["isgold"] and has_answer(f"{c['title']} {c['text']}", r["answers"])]
    assert leaks == []

    def best(rows):
        return sum(max(c["score"] for c in r["ctxs"] if not c["isgold"]) for r in rows) / len(rows)

    assert best(pooled) > best(alone)  # more passages to mine: closer matches to each question


def test_a_pool_row_asking_the_same_question_gives_it_no_distractor():
    rows = [{"question": "who wrote hamlet", "answers": ["Shakespeare"],
             "ctxs": [{"title": "Hamlet", "text": "Hamlet is a tragedy by William Shakespeare."}]},
            {"question": "capital of france", "answers": ["Paris"],
             "ctxs": [{"title": "France", "text": "Paris is the capital of France."}]}]
    pool = [{"question": "Who wrote Hamlet?", "ctxs": [{"title": "Hamlet (play)", "text": "Who wrote hamlet: the play hamlet."}]},
            {"question": "largest ocean", "ctxs": [{"title": "Pacific", "text": "The Pacific is the largest ocean."}]}]
    with pytest.warns(Warning, match="the distractor pool holds 4 passages"):
        out = list(build(rows, docs=3, pool=pool, seed=0))
    # row 0: the pool's passage for the same question matches best, and is not taken
    assert [[c["id"] for c in r["ctxs"]] for r in out] == [["nq-0-gold", "pool-1-ctx", "nq-1-ctx"],
                                                           ["nq-1-gold", "pool-1-ctx", "pool-0-ctx"]]
    with pytest.raises(InputError, match="pool row 0 must be an object with 'ctxs' whose first item has a 'text'"):
        build(rows, docs=2, pool=[{"question": "q"}])  # checked when build is called, before any row is read


def test_progress_bar_on_request(dev_rows, capsys):
    list(build(dev_rows[:10], docs=3, pool=dev_rows, progress=True))
    final = capsys.readouterr().err.rstrip("\n").split("\r")[-1]
    assert final.startswith("nq 3 docs: 100%|") and " 10/10 [" in final
    list(build(dev_rows[:10], docs=3, pool=dev_rows))  # by default only on a terminal
    assert capsys.readouterr().err == ""
