"""How long ``edgewise.pack`` takes, next to a bare tokenizer pass and Haystack's LostInTheMiddleRanker.

For each number of chunks (default 20, 200, 2,000; each ~150 cl100k tokens) and each budget (4,000 and
32,000 tokens), on the same input in the same run, it times:

- ``pack``: ``edgewise.pack(query, chunks, budget=B, tokenizer="cl100k_base", order="edges",
  layout="sections")``. *Cold*: edgewise's per-tokenizer count cache is cleared and every repetition
  packs chunk texts never seen before in this process. *Warm*: the same call again right after, with
  the cache holding those texts (what a caller that re-packs the same chunks pays).
- ``encode``: one bare pass of tiktoken over all the input text (each chunk's ``title\\ntext``, and the
  query), one ``encode_ordinary`` call per text, with the very Encoding object edgewise uses.
  ``encode_batch`` does the same with one ``encode_ordinary_batch`` call (tiktoken's thread pool).
- ``haystack``: ``LostInTheMiddleRanker(word_count_threshold=int(B / 1.3)).run(documents=...)`` on
  the same chunks as Haystack ``Document`` objects (built outside the timer). Haystack's budget is in
  words, so the tokens the documents it selects really take (cl100k, content only, no prompt
  template around them) are counted and set against the budget.

Chunk texts are 110-word windows at random offsets of the stream of real Wikipedia passages in
``../shared/data/nq-open-oracle-dev.jsonl.gz`` (NaturalQuestions-Open, from the "Lost in the Middle"
repository), titled by the passage the window starts in; the query is one of its questions. Scores
are descending random floats. Times are medians over ``--reps`` repetitions, each on fresh texts;
``pack / encode`` is the median (and range) of the ratio taken within each repetition. By default times are the
process's CPU time (``--clock cpu``), which stays put on a shared machine where other work competes
for the cores; ``--clock wall`` gives elapsed time. Every packed prompt is re-encoded here and checked
against edgewise's own count and the budget (a warning goes to stderr if either fails).

    .venv/bin/python benchmarks/pack.py [--reps 9] [--sizes 20,200,2000] [--budgets 4000,32000] [--clock cpu]
        [--data FILE|DIR]
"""

from __future__ import annotations

import argparse
import gc
import gzip
import json
import os
import platform
import random
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")

import edgewise  # noqa: E402
from edgewise.tokens import get_tokenizer  # noqa: E402

DATA_FILE = "nq-open-oracle-dev.jsonl.gz"
TOKENIZER = "cl100k_base"
WORDS_PER_CHUNK = 110  # NQ passages run ~1.36 cl100k tokens a word: ~150 tokens
WORDS_PER_TOKEN = 1 / 1.3  # the rule of thumb that turns a token budget into Haystack's word threshold


# ---------------------------------------------------------------- input


@dataclass(frozen=True)
class Corpus:
    words: list[str]  # every passage's words, passage after passage
    titles: list[str]  # the title of the passage each word belongs to
    questions: list[str]


def load_corpus(path: Path) -> Corpus:
    words: list[str] = []
    titles: list[str] = []
    questions: list[str] = []
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            ctx = row["ctxs"][0]
            passage = ctx["text"].split()
            words += passage
            titles += [ctx["title"]] * len(passage)
            questions.append(row["question"])
    return Corpus(words, titles, questions)


class ChunkMaker:
    """Fresh chunks on every call: windows at random offsets, never the same text twice in a run."""

    def __init__(self, corpus: Corpus, seed: int) -> None:
        self.corpus = corpus
        self.rng = random.Random(seed)
        self.seen: set[str] = set()

    def chunks(self, n: int) -> list[dict[str, Any]]:
        words, titles = self.corpus.words, self.corpus.titles
        scores = sorted((self.rng.random() for _ in range(n)), reverse=True)
        out = []
        while len(out) < n:
            start = self.rng.randrange(len(words) - WORDS_PER_CHUNK)
            text = " ".join(words[start : start + WORDS_PER_CHUNK])
            if text in self.seen:
                continue
            self.seen.add(text)
            out.append({"id": f"c{len(self.seen)}", "title": titles[start], "text": text, "score": scores[len(out)]})
        return out

    def query(self) -> str:
        return self.rng.choice(self.corpus.questions)


# ---------------------------------------------------------------- the things timed


CLOCKS = {
    "cpu": time.process_time,  # CPU time of this process (all its threads): steady on a shared, busy machine
    "wall": time.perf_counter,  # elapsed time: what a caller waits on an otherwise idle machine
}
clock = CLOCKS["cpu"]


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """Milliseconds one call of ``fn`` takes on ``clock``, and what it returned."""
    gc.collect()
    start = clock()
    result = fn()
    return (clock() - start) * 1000, result


def input_texts(query: str, chunks: list[dict[str, Any]]) -> list[str]:
    return [query] + [f"{c['title']}\n{c['text']}" for c in chunks]


def encode_each(encoding: Any, texts: list[str]) -> int:
    return sum(len(encoding.encode_ordinary(t)) for t in texts)


def encode_batch(encoding: Any, texts: list[str]) -> int:
    return sum(len(ids) for ids in encoding.encode_ordinary_batch(texts))


def load_haystack() -> tuple[Any, Any] | None:
    try:
        from haystack import Document
        from haystack.components.rankers import LostInTheMiddleRanker
    except ImportError:
        return None
    return Document, LostInTheMiddleRanker


# ---------------------------------------------------------------- one row of the table


@dataclass
class Rep:
    pack_cold: float
    pack_warm: float
    encode: float
    encode_batch: float
    haystack: float | None
    prompt_tokens: int  # edgewise's own count
    prompt_tokens_check: int  # the prompt re-encoded here, independently
    placed: int
    haystack_docs: int | None
    haystack_tokens: int | None


def one_rep(maker: ChunkMaker, n: int, budget: int, haystack: tuple[Any, Any] | None) -> Rep:
    tok = get_tokenizer(TOKENIZER)
    encoding = tok.encoding
    query, chunks = maker.query(), maker.chunks(n)
    texts = input_texts(query, chunks)

    enc_ms, _ = timed(lambda: encode_each(encoding, texts))
    batch_ms, _ = timed(lambda: encode_batch(encoding, texts))

    def run_pack() -> edgewise.Packed:
        return edgewise.pack(query, chunks, budget=budget, tokenizer=TOKENIZER, order="edges", layout="sections")

    tok._cache.clear()
    cold_ms, packed = timed(run_pack)
    warm_ms, _ = timed(run_pack)
    info = packed.debug_info

    hay_ms = hay_docs = hay_tokens = None
    if haystack is not None:
        document, ranker_cls = haystack
        docs = [document(content=c["text"], meta={"title": c["title"]}, score=c["score"]) for c in chunks]
        ranker = ranker_cls(word_count_threshold=int(budget * WORDS_PER_TOKEN))
        hay_ms, result = timed(lambda: ranker.run(documents=docs))
        selected = result["documents"]
        hay_docs = len(selected)
        hay_tokens = sum(len(encoding.encode_ordinary(d.content)) for d in selected)

    return Rep(
        pack_cold=cold_ms, pack_warm=warm_ms, encode=enc_ms, encode_batch=batch_ms, haystack=hay_ms,
        prompt_tokens=info.prompt_tokens, prompt_tokens_check=len(encoding.encode_ordinary(packed.prompt)),
        placed=len(info.order), haystack_docs=hay_docs, haystack_tokens=hay_tokens,
    )


def median(reps: list[Rep], field: str) -> float | None:
    values = [getattr(r, field) for r in reps]
    return None if values[0] is None else statistics.median(values)


def ratio(reps: list[Rep]) -> str:
    """pack (cold) / encode, paired within each repetition: the median, and the range over repetitions."""
    ratios = [r.pack_cold / r.encode for r in reps]
    return f"{statistics.median(ratios):.2f}× ({min(ratios):.2f}–{max(ratios):.2f})"


def row(n: int, budget: int, reps: list[Rep]) -> list[str]:
    m = {f: median(reps, f) for f in Rep.__dataclass_fields__}
    check = {r.prompt_tokens_check for r in reps} | {r.prompt_tokens for r in reps}
    if any(r.prompt_tokens != r.prompt_tokens_check or r.prompt_tokens > budget for r in reps):
        print(f"WARNING n={n} budget={budget}: prompt token counts {sorted(check)} disagree or exceed the budget",
              file=sys.stderr)

    def ms(v: float | None) -> str:
        return "n/a" if v is None else f"{v:,.1f}" if v < 100 else f"{v:,.0f}"

    def count(v: float | None) -> str:
        return "n/a" if v is None else f"{v:,.0f}"

    over = "n/a" if m["haystack_tokens"] is None else f"{m['haystack_tokens'] / budget - 1:+.0%}"
    return [
        f"{n:,}", f"{budget:,}", ms(m["pack_cold"]), ms(m["pack_warm"]), ms(m["encode"]), ms(m["encode_batch"]),
        ratio(reps), ms(m["haystack"]), count(m["prompt_tokens"]), count(m["placed"]),
        count(m["haystack_docs"]), f"{count(m['haystack_tokens'])} ({over})",
    ]


HEADER = [
    "chunks", "budget", "pack ms (cold)", "pack ms (warm)", "encode ms", "encode_batch ms", "pack / encode (range)",
    "haystack ms", "pack prompt tokens", "pack chunks placed", "haystack docs", "haystack doc tokens (vs budget)",
]


def markdown(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---:" for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


# ---------------------------------------------------------------- machine


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def load() -> str:
    try:
        return "load average " + " / ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "load average unknown"


def machine() -> str:
    return (
        f"CPU: {cpu_model()}, {os.cpu_count()} cores; Python {platform.python_version()}; "
        f"tiktoken {version('tiktoken')}; haystack-ai {version('haystack-ai')}; edgewise {version('edgewise')}"
    )


# ---------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=9, help="repetitions per row, each on fresh texts (median)")
    parser.add_argument("--sizes", default="20,200,2000", help="numbers of chunks, comma-separated")
    parser.add_argument("--budgets", default="4000,32000", help="token budgets, comma-separated")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="cpu",
                        help="cpu: process CPU time (default; robust to other load); wall: elapsed time")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data", help=f"{DATA_FILE} or its folder (default: $EDGEWISE_DATA, else ../shared/data)")
    args = parser.parse_args(argv)
    global clock
    clock = CLOCKS[args.clock]
    sizes = [int(s) for s in args.sizes.split(",")]
    budgets = [int(b) for b in args.budgets.split(",")]

    started, load_before = time.perf_counter(), load()
    from edgewise.eval.data import data_path

    maker = ChunkMaker(load_corpus(data_path(DATA_FILE, args.data)), args.seed)
    haystack = load_haystack()
    if haystack is None:
        print("haystack-ai is not installed (pip install -e '.[bench]'): its columns read n/a", file=sys.stderr)
    one_rep(maker, 20, budgets[0], haystack)  # warm-up: load the encoding, import everything, untimed

    rows = []
    for n in sizes:
        for budget in budgets:
            rows.append(row(n, budget, [one_rep(maker, n, budget, haystack) for _ in range(args.reps)]))

    print(machine())
    print(f"Median of {args.reps} repetitions; {args.clock} time; {TOKENIZER}; order edges; layout sections; "
          f"~{WORDS_PER_CHUNK} words (~150 tokens) a chunk.\n")
    print(markdown(HEADER, rows))
    print(f"\nRun took {time.perf_counter() - started:.1f} s; {load_before} (1/5/15 min) before, {load()} after.")


if __name__ == "__main__":
    main()
