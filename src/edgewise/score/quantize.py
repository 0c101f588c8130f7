"""An int8 ONNX model that stays int8 when onnxruntime runs it, built once and cached on disk.

The shipped MiniLM stores int8 weights with a per-column scale, but as ``Cast`` + ``Mul`` in front
of fp32 ``MatMul`` nodes: onnxruntime folds them back to fp32 at load, and every MatMul runs in
fp32. :func:`int8_model` rewrites such a file once:

1. each weight that is ``int8 * scale`` and feeds a ``MatMul`` becomes the fp32 initializer it
   denotes (the embedding tables keep their int8 storage: they are gathered, not multiplied);
2. onnxruntime's ``quantize_dynamic`` quantises every MatMul with a constant weight: weights int8,
   symmetric, per output column (for the shipped model this gives back exactly its int8 values),
   activations uint8 with a scale computed at run time (``DynamicQuantizeLinear``). At load,
   onnxruntime fuses these into ``DynamicQuantizeMatMul`` / ``MatMulIntegerToFloat``: integer
   kernels. :func:`runtime_ops` counts the operators of the graph onnxruntime actually runs.

The activation scale covers the whole input of one run, so an int8 model must run **one text per
run** for a text's vector not to depend on the texts batched with it (``DenseScorer`` does so).

The result sits in the user's cache directory (:func:`edgewise.tokens.encodings.cache_dir`) under
``models/``, named by the SHA-256 of the source file and the recipe, with a JSON record of its own
SHA-256 that is checked on every load; a missing, foreign or corrupt file is rebuilt. Building
needs the ``onnx`` package; loading a built file does not.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import Counter
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..files.writing import write_atomic
from .onnx import need

RECIPE = "int8-dynamic-matmul-perchannel-v1"  # change it when the build changes: old files are then not used
_digests: dict[tuple[str, int, int], str] = {}  # (path, size, mtime_ns) -> SHA-256, for this process
_build_lock = threading.Lock()


def sha256_file(path: Path) -> str:
    """The SHA-256 of a file's bytes, remembered for this process while its size and mtime hold."""
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    digest = _digests.get(key)
    if digest is None:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        digest = _digests[key] = h.hexdigest()
    return digest


def int8_path(source: Path, directory: str | Path | None = None) -> Path:
    """Where the int8 build of ``source`` is cached: ``models/<source SHA-256>-<recipe>.onnx``."""
    from ..tokens.encodings import cache_dir

    base = Path(directory) if directory is not None else cache_dir()
    return base / "models" / f"{sha256_file(source)}-{RECIPE}.onnx"


def _record_path(model: Path) -> Path:
    return model.with_name(model.name + ".json")


def verified(model: Path, source_sha256: str) -> bool:
    """True if ``model`` is the file its record describes, built from ``source_sha256`` by RECIPE."""
    try:
        record = json.loads(_record_path(model).read_text())
        return (isinstance(record, dict) and record.get("source_sha256") == source_sha256
                and record.get("recipe") == RECIPE and record.get("sha256") == sha256_file(model))
    except (OSError, ValueError):
        return False


def int8_model(source: str | Path, directory: str | Path | None = None) -> Path:
    """The int8 build of the ONNX file ``source``: read from the cache when its SHA-256 checks out,
    else built (needs ``onnx``) and cached. Raises ``ConfigError`` if the cache cannot be written.

    >>> int8_model("/nonexistent.onnx")
    Traceback (most recent call last):
    ...
    edgewise.errors.ConfigError: the int8 model is built from an .onnx file, but '/nonexistent.onnx' does not exist
    """
    src = Path(source)
    if not src.is_file():
        raise ConfigError(f"the int8 model is built from an .onnx file, but {str(source)!r} does not exist")
    target = int8_path(src, directory)
    digest = sha256_file(src)
    if verified(target, digest):
        return target
    with _build_lock:  # one build per process; racing processes each write whole files
        if verified(target, digest):
            return target
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(target, build_int8(src))
            write_atomic(_record_path(target), json.dumps(
                {"source": str(src), "source_sha256": digest, "recipe": RECIPE,
                 "sha256": sha256_file(target)}, indent=1).encode())
        except OSError as exc:
            raise ConfigError(f"the int8 model could not be cached in {target.parent} ({exc.strerror or exc}): "
                              "set EDGEWISE_CACHE to a writable directory, or use precision='fp32'") from None
    return target


def fold_matmul_weights(model: Any) -> int:
    """Replace every ``Mul(Cast(int8 initializer), scale initializer)`` that feeds a MatMul's weight
    input by the fp32 initializer it computes, in place; returns how many were folded."""
    numpy_helper = need("onnx.numpy_helper", "building the int8 model")
    graph = model.graph
    inits = {t.name: t for t in graph.initializer}
    producer = {o: n for n in graph.node for o in n.output}
    users = Counter(i for n in graph.node for i in n.input)
    drop_nodes, drop_inits, new = set(), set(), []
    for node in graph.node:
        if node.op_type != "MatMul" or len(node.input) < 2:
            continue
        mul = producer.get(node.input[1])
        if mul is None or mul.op_type != "Mul" or users[mul.output[0]] != 1:
            continue
        cast = producer.get(mul.input[0])
        scale = mul.input[1]
        if cast is None or cast.op_type != "Cast" or scale not in inits or cast.input[0] not in inits:
            continue
        q = numpy_helper.to_array(inits[cast.input[0]])
        if q.dtype.kind not in "iu" or users[cast.output[0]] != 1:
            continue
        w = q.astype("float32") * numpy_helper.to_array(inits[scale]).astype("float32")
        new.append(numpy_helper.from_array(w, name=mul.output[0]))
        drop_nodes.update((id(mul), id(cast)))
        drop_inits.update((cast.input[0], scale))
    if not new:
        return 0
    keep = [n for n in graph.node if id(n) not in drop_nodes]
    still_used = {i for n in keep for i in n.input}
    kept_inits = [t for t in graph.initializer if t.name not in drop_inits or t.name in still_used]
    del graph.node[:]
    graph.node.extend(keep)
    del graph.initializer[:]
    graph.initializer.extend([*kept_inits, *new])
    return len(new)


def build_int8(source: Path) -> bytes:
    """The bytes of the int8 model built from ``source`` (see the module docstring)."""
    import logging
    import tempfile

    onnx = need("onnx", "building the int8 model")
    quantization = need("onnxruntime.quantization", "building the int8 model")
    try:
        model = onnx.load(str(source))
    except Exception as exc:  # onnx raises DecodeError and friends
        raise ConfigError(f"ONNX model {str(source)!r} could not be read: {exc}") from None
    fold_matmul_weights(model)
    root = logging.getLogger()
    level = root.level
    with tempfile.TemporaryDirectory(prefix="edgewise-int8-") as tmp:
        out = Path(tmp) / "model.onnx"
        root.setLevel(logging.ERROR)  # quantize_dynamic logs a pre-processing hint on the root logger
        try:
            quantization.quantize_dynamic(
                model, out, op_types_to_quantize=["MatMul"], per_channel=True,
                weight_type=quantization.QuantType.QInt8, extra_options={"MatMulConstBOnly": True},
            )
        except Exception as exc:  # the quantiser raises bare Exceptions on graphs it cannot handle
            raise ConfigError(f"ONNX model {str(source)!r} could not be quantised to int8: {exc}") from None
        finally:
            root.setLevel(level)
        return out.read_bytes()


def runtime_ops(model: str | Path) -> Counter[str]:
    """Operator counts of the graph onnxruntime runs for ``model`` after all its optimisations
    (the optimised graph is saved through ``SessionOptions.optimized_model_filepath`` and read back;
    needs ``onnx``)."""
    import tempfile

    ort = need("onnxruntime", "counting an ONNX model's run-time operators")
    onnx = need("onnx", "counting an ONNX model's run-time operators")
    with tempfile.TemporaryDirectory(prefix="edgewise-ops-") as tmp:
        opts = ort.SessionOptions()
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        opts.optimized_model_filepath = str(Path(tmp) / "optimized.onnx")
        opts.log_severity_level = 3
        ort.InferenceSession(str(model), sess_options=opts, providers=["CPUExecutionProvider"])
        return Counter(n.op_type for n in onnx.load(opts.optimized_model_filepath).graph.node)
