"""Sentence pruning on NaturalQuestions passages: labelled examples (a sentence is gold when it holds
a normalised answer), precision/recall/F1 per passage, the threshold search, and the fit of the
logistic sentence heads of ``edgewise.prune.scores``. A library module with no command of its own:
``benchmarks/relevance.py tune`` fits the heads with it, ``relevance.py run --only prune`` reports them."""

from __future__ import annotations

import math
import statistics
import sys

import numpy as np
from tqdm import tqdm

from edgewise.eval.nq import has_answer
from edgewise.prune.scores import (
    ALONE,
    COSINE,
    HEAD_FEATURES,
    HEADS,
    apply_head,
    sentence_cosine_pairs,
    sentence_features,
)
from edgewise.prune.sentences import split_sentences
from edgewise.score.bm25 import BM25

GRID = [round(x * 0.05, 2) for x in range(1, 20)]


def progress(items, desc, total=None):
    """A progress bar on stderr, quiet when stderr is not a terminal."""
    return tqdm(items, desc=desc, total=total, file=sys.stderr, disable=None, leave=False)


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
# (a negative one, collinear with the others, made sentences far from the query score higher).
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
