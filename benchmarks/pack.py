"""How long ``edgewise.pack`` takes, next to a bare tokenizer pass, a hand-written loop and Haystack.

For each number of chunks (default 20, 200, 2,000, 20,000; each ~150 cl100k tokens) and each budget
(default 4,000, 32,000 and 128,000 tokens), every repetition draws fresh chunks and, on that same
input, times (each call alone, ``gc.collect()`` before it):

- ``pack``: ``edgewise.pack(query, chunks, budget=B, tokenizer="cl100k_base", order="edges",
  layout="sections")``. *Cold*: edgewise's count cache is cleared first and the chunk texts were
  never seen before in this process. *Warm*: the same call again right after, with the cache holding
  what the cold call left in it (all of it, unless the input outgrows the cache's cap).
- ``encode``: one bare tiktoken pass over all the input text (the query, and each chunk's
  ``title\\ntext``), one ``encode_ordinary`` call per text, with the very Encoding object edgewise
  uses (``get_tokenizer("cl100k_base").encoding``). ``encode_batch``: the same texts in one
  ``encode_ordinary_batch`` call (tiktoken's thread pool).
- ``loop``: the count-and-cut loop a user would write: sort the chunk dicts by score, descending;
  count each chunk's ``text`` (no title) with ``encode_ordinary`` of that same Encoding, adding it
  while the running sum stays within B and stopping at the first that does not fit; join the kept
  texts with blank lines. It counts neither the query nor the joins nor any template.
- ``haystack``: ``LostInTheMiddleRanker(word_count_threshold=int(B / 1.3)).run(documents=...)``
  on the same chunks as Haystack ``Document`` objects (built outside the timer).
- ``pack again``: the cold pack once more, last (the count cache cleared again): the same work
  timed twice, to show how far two timings of it drift apart on this machine.

Columns of the times table ("median (worst)" is the median and the largest value over the row's
repetitions; times in ms of ``--clock``, CPU time of the process by default):

- ``pack cold ms``, ``pack warm ms``: median (worst) of the cold and the warm pack.
- ``cold µs / chunk``, ``warm µs / chunk``: median pack time divided by the number of input chunks,
  in µs (1 µs = 0.001 CPU-ms): the per-chunk cost, whatever the budget.
- ``encode ms``, ``encode_batch ms``, ``loop ms``, ``haystack ms``: medians.
- ``pack / encode``, ``pack / loop``: cold pack time over encode (over loop) time, taken within each
  repetition (paired, same input, same moment), then the median (worst) of those ratios.

The noise table gives, per row, ``cold pack again / cold pack`` (paired, median and the lowest and
highest over the repetitions) and the spread, the larger of that ratio and its inverse: how far apart
two timings of the same cold pack on the same input were, median (worst). A worst-repetition target
tighter than a row's worst spread cannot be told apart from the machine's noise in that row.

Columns of the budget-fidelity table (token counts are cl100k, medians over repetitions unless said):

- ``input tokens``: tokens of the bare input, as counted by the ``encode`` pass; ``binds`` is
  "yes" when that exceeds B (not every chunk can fit), "no" when the input would fit.
- ``pack prompt tokens``: edgewise's count of its whole rendered prompt (system text, instructions,
  section headers, ``<doc>`` blocks, question), median (max). ``pack exact``: in how many
  repetitions that count equals the prompt re-encoded here and is ≤ B (a warning goes to stderr
  for any that is not). ``pack placed``: chunks in the prompt (whole, truncated or summarised).
- ``loop kept``: chunks the loop kept. ``loop prompt tokens``: its real prompt (the joined texts,
  a blank line, the query) re-encoded; median, then the median and the worst (largest) excess
  over B as a signed share of B (positive = over the budget).
- ``haystack docs``: documents the ranker returned. ``haystack doc tokens``: their contents'
  tokens (no template, no query), median and its signed share of B.

The summary table maps each measurable packing target (BENCHMARKS.md) to this run's rows. A target covers rows by
chunks, budget and ``binds``: "≥ 200 chunks, budget binds" is every row of ≥ 200 chunks whose
``binds`` is yes; "200 chunks, everything fits" every row of 200 chunks whose ``binds`` is no (32k
and 128k: 200 bare chunks fit in 32k, edgewise's template then leaves a few out); "20 chunks" and
"20 and 200 chunks" every budget; "20,000 chunks, 4k budget" that one row, once for the cold pack
(the issue's figure) and once for the warm. ``largest median`` is the largest of the covered rows'
medians of the measure (``pack / encode``, ``pack / loop`` or pack ms), and the row it comes from;
``largest worst`` the same over the rows' worst repetitions; ``same pack twice, largest worst spread``
the largest worst spread of the noise table over the same rows. ``met``: a target that names "worst"
is judged on ``largest worst`` alone ("met" / "not met"); the others are "met" when ``largest worst``
is within the target, "met by median, not by worst" when only ``largest median`` is, else "not
met"; "not measured" when the run has no row the target covers.

edgewise counts on quicktok (``--counter``, default), as a long-lived process does (a ``Packer`` or
``edgewise serve`` switches to it at start); the run switches it before the warm-up so that no timed
call pays the ~0.2 s load; ``--counter rs-bpe`` times the counter a process starts with. The loop and the
encode pass use tiktoken, as a user's code would.

Chunk texts are windows of 100-120 words (uniform; ~150 tokens) at random offsets of the stream of
real Wikipedia passages in ``nq-open-oracle-dev.jsonl.gz`` (NaturalQuestions-Open, from the "Lost
in the Middle" repository; 156,581 words), titled by the passage the window starts in; no text is
drawn twice in a run (fixed 110-word windows would run out: a full run draws ~360,000). The query is
one of its questions; scores are descending random floats (seeded), and the chunks are passed in
that order. Rows of ``--large`` (10,000) chunks or more run ``--reps-large`` (5) repetitions, since
each costs seconds; the others ``--reps`` (9). ``--quick``: 20, 200, 2,000 chunks at 4,000 and 32,000,
3 repetitions. The data file is ``--data``, else ``$EDGEWISE_DATA``, else ``../shared/data``
(``tests/data`` holds it too).

    .venv/bin/python benchmarks/pack.py [--quick] [--reps 9] [--reps-large 5] [--sizes 20,200,2000,20000]
        [--budgets 4000,32000,128000] [--clock cpu|wall] [--data FILE|DIR]
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
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")

import edgewise  # noqa: E402
from edgewise.tokens.tokenizers import get_tokenizer  # noqa: E402

DATA_FILE = "nq-open-oracle-dev.jsonl.gz"
TOKENIZER = "cl100k_base"
WORDS_PER_CHUNK = (100, 120)  # NQ passages run ~1.36 cl100k tokens a word: ~150 tokens
WORDS_PER_TOKEN = 1 / 1.3  # the rule of thumb that turns a token budget into Haystack's word threshold
FULL = {"sizes": "20,200,2000,20000", "budgets": "4000,32000,128000", "reps": 9}
QUICK = {"sizes": "20,200,2000", "budgets": "4000,32000", "reps": 3}


# ---------------------------------------------------------------- input


class ChunkMaker:
    """Fresh chunks on every call: windows at random offsets, never the same text twice in a run."""

    def __init__(self, path: Path, seed: int) -> None:
        self.words: list[str] = []  # every passage's words, passage after passage
        self.titles: list[str] = []  # the title of the passage each word belongs to
        self.questions: list[str] = []
        with gzip.open(path, "rt", encoding="utf-8") as f:
            for line in f:
                row = json.loads(line)
                passage = row["ctxs"][0]["text"].split()
                self.words += passage
                self.titles += [row["ctxs"][0]["title"]] * len(passage)
                self.questions.append(row["question"])
        self.rng = random.Random(seed)
        self.seen: set[int] = set()  # hashes of the texts drawn (the texts of a full run take ~300 MB)
        self.drawn = 0

    def chunks(self, n: int) -> list[dict[str, Any]]:
        words, titles = self.words, self.titles
        lo, hi = WORDS_PER_CHUNK
        scores = sorted((self.rng.random() for _ in range(n)), reverse=True)
        out = []
        while len(out) < n:
            start = self.rng.randrange(len(words) - hi)
            text = " ".join(words[start : start + self.rng.randint(lo, hi)])
            if hash(text) in self.seen:
                continue
            self.seen.add(hash(text))
            self.drawn += 1
            out.append({"id": f"c{self.drawn}", "title": titles[start], "text": text, "score": scores[len(out)]})
        return out

    def query(self) -> str:
        return self.rng.choice(self.questions)


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


def count_and_cut(encoding: Any, chunks: list[dict[str, Any]], budget: int) -> tuple[str, int]:
    """The loop a user writes: best first, count each text, stop at the first that does not fit."""
    kept: list[str] = []
    used = 0
    for chunk in sorted(chunks, key=lambda c: c["score"], reverse=True):
        cost = len(encoding.encode_ordinary(chunk["text"]))
        if used + cost > budget:
            break
        used += cost
        kept.append(chunk["text"])
    return "\n\n".join(kept), len(kept)


def load_haystack() -> tuple[Any, Any] | None:
    try:
        from haystack import Document
        from haystack.components.rankers import LostInTheMiddleRanker
    except ImportError:
        return None
    return Document, LostInTheMiddleRanker


def set_counter(counter: str) -> str:
    """Make edgewise's cl100k tokenizer count on ``counter`` for the whole run: ``quicktok`` (switched
    now, as a long-lived process is: ``TiktokenTokenizer.speed_up``) or ``rs-bpe`` (what it starts with:
    counting never switches by itself). Returns what counts; stops the run when that is not ``counter``."""
    tok = get_tokenizer(TOKENIZER)
    if counter == "quicktok":
        tok.speed_up()
    if tok.counter != counter:
        raise SystemExit(f"asked to count on {counter}, but {TOKENIZER} counts on {tok.counter}")
    return tok.counter


def clear_count_cache(tok: Any) -> None:
    """Empty edgewise's count cache for ``tok`` (belt and braces: the texts are fresh anyway)."""
    cache = getattr(tok, "_cache", None)
    if cache is not None and hasattr(cache, "clear"):
        cache.clear()
    elif not getattr(clear_count_cache, "warned", False):
        clear_count_cache.warned = True  # type: ignore[attr-defined]
        print(f"WARNING {type(tok).__name__} has no _cache.clear(): cold packs rely on fresh texts alone",
              file=sys.stderr)


# ---------------------------------------------------------------- one repetition, one row


@dataclass
class Rep:
    pack_cold: float
    pack_warm: float
    encode: float
    encode_batch: float
    loop: float
    haystack: float | None
    pack_again: float  # the cold pack timed once more, last: the same work twice
    input_tokens: int
    prompt_tokens: int  # edgewise's own count
    prompt_tokens_check: int  # the prompt re-encoded here, independently
    placed: int
    loop_kept: int
    loop_tokens: int  # the loop's joined text + the query, re-encoded
    haystack_docs: int | None
    haystack_tokens: int | None


def one_rep(maker: ChunkMaker, n: int, budget: int, haystack: tuple[Any, Any] | None) -> Rep:
    tok = get_tokenizer(TOKENIZER)
    encoding = tok.encoding
    query, chunks = maker.query(), maker.chunks(n)
    texts = input_texts(query, chunks)

    enc_ms, input_tokens = timed(lambda: encode_each(encoding, texts))
    batch_ms, _ = timed(lambda: encode_batch(encoding, texts))

    def run_pack() -> edgewise.Packed:
        return edgewise.pack(query, chunks, budget=budget, tokenizer=TOKENIZER, order="edges", layout="sections")

    clear_count_cache(tok)
    cold_ms, packed = timed(run_pack)
    warm_ms, _ = timed(run_pack)
    info = packed.debug_info
    loop_ms, (context, kept) = timed(lambda: count_and_cut(encoding, chunks, budget))

    hay_ms = hay_docs = hay_tokens = None
    if haystack is not None:
        document, ranker_cls = haystack
        docs = [document(content=c["text"], meta={"title": c["title"]}, score=c["score"]) for c in chunks]
        ranker = ranker_cls(word_count_threshold=int(budget * WORDS_PER_TOKEN))
        hay_ms, result = timed(lambda: ranker.run(documents=docs))
        selected = result["documents"]
        hay_docs = len(selected)
        hay_tokens = sum(len(encoding.encode_ordinary(d.content)) for d in selected)

    clear_count_cache(tok)
    again_ms, _ = timed(run_pack)

    return Rep(
        pack_cold=cold_ms, pack_again=again_ms, pack_warm=warm_ms, encode=enc_ms, encode_batch=batch_ms, loop=loop_ms, haystack=hay_ms,
        input_tokens=input_tokens, prompt_tokens=info.prompt_tokens,
        prompt_tokens_check=len(encoding.encode_ordinary(packed.prompt)), placed=len(info.order),
        loop_kept=kept, loop_tokens=len(encoding.encode_ordinary(f"{context}\n\n{query}")),
        haystack_docs=hay_docs, haystack_tokens=hay_tokens,
    )


@dataclass
class Row:
    n: int
    budget: int
    reps: list[Rep] = field(default_factory=list)

    def values(self, name: str) -> list[float]:
        """One value per repetition: a Rep field, a paired ratio ``pack/encode``, ``pack/loop``,
        ``again/cold`` (the cold pack timed twice), or ``spread`` (the larger of that and its inverse)."""
        if name.startswith("pack/"):
            return [r.pack_cold / max(getattr(r, name[5:]), 1e-9) for r in self.reps]
        if name in ("again/cold", "spread"):
            ratios = [r.pack_again / max(r.pack_cold, 1e-9) for r in self.reps]
            return ratios if name == "again/cold" else [max(x, 1 / max(x, 1e-9)) for x in ratios]
        return [getattr(r, name) for r in self.reps]

    def median(self, name: str) -> float | None:
        values = self.values(name)
        return None if None in values else statistics.median(values)

    def worst(self, name: str) -> float:
        return max(self.values(name))

    @property
    def binds(self) -> bool:
        return self.median("input_tokens") > self.budget

    @property
    def exact(self) -> int:
        return sum(r.prompt_tokens == r.prompt_tokens_check and r.prompt_tokens <= self.budget for r in self.reps)

    @property
    def label(self) -> str:
        return f"{self.n:,} / {self.budget:,}"


# ---------------------------------------------------------------- tables


def ms(v: float | None) -> str:
    return "n/a" if v is None else f"{v:,.2f}" if v < 10 else f"{v:,.1f}" if v < 100 else f"{v:,.0f}"


def count(v: float | None) -> str:
    return "n/a" if v is None else f"{v:,.0f}"


def share(tokens: float, budget: int) -> str:
    return f"{tokens / budget - 1:+.1%}"


def times_row(r: Row) -> list[str]:
    def mw(name: str, fmt: Callable[[float], str]) -> str:
        return f"{fmt(r.median(name))} ({fmt(r.worst(name))})"

    def times(v: float) -> str:
        return f"{v:.2f}×"

    return [
        f"{r.n:,}", f"{r.budget:,}", str(len(r.reps)), mw("pack_cold", ms), mw("pack_warm", ms),
        f"{r.median('pack_cold') * 1000 / r.n:.1f}", f"{r.median('pack_warm') * 1000 / r.n:.1f}",
        ms(r.median("encode")), ms(r.median("encode_batch")), ms(r.median("loop")), ms(r.median("haystack")),
        mw("pack/encode", times), mw("pack/loop", times),
    ]


TIMES_HEADER = [
    "chunks", "budget", "reps", "pack cold ms (worst)", "pack warm ms (worst)", "cold µs / chunk", "warm µs / chunk",
    "encode ms", "encode_batch ms", "loop ms", "haystack ms", "pack / encode (worst)", "pack / loop (worst)",
]


def noise_row(r: Row) -> list[str]:
    ratios = r.values("again/cold")
    return [f"{r.n:,}", f"{r.budget:,}", str(len(r.reps)),
            f"{r.median('again/cold'):.2f}× ({min(ratios):.2f}×–{max(ratios):.2f}×)",
            f"{r.median('spread'):.2f}× ({r.worst('spread'):.2f}×)"]


NOISE_HEADER = ["chunks", "budget", "reps", "cold pack again / cold pack: median (lowest–highest)",
                "spread: median (worst)"]


def fidelity_row(r: Row) -> list[str]:
    if r.exact < len(r.reps):
        print(f"WARNING {r.label}: edgewise's prompt count disagrees with a re-encoding or exceeds the budget "
              f"in {len(r.reps) - r.exact} of {len(r.reps)} repetitions", file=sys.stderr)
    loop = f"{count(r.median('loop_tokens'))} ({share(r.median('loop_tokens'), r.budget)}; " \
           f"worst {share(r.worst('loop_tokens'), r.budget)})"
    hay = r.median("haystack_tokens")
    return [
        f"{r.n:,}", f"{r.budget:,}", count(r.median("input_tokens")), "yes" if r.binds else "no",
        f"{count(r.median('prompt_tokens'))} ({count(r.worst('prompt_tokens'))})", f"{r.exact}/{len(r.reps)}",
        count(r.median("placed")), count(r.median("loop_kept")), loop, count(r.median("haystack_docs")),
        "n/a" if hay is None else f"{count(hay)} ({share(hay, r.budget)})",
    ]


FIDELITY_HEADER = [
    "chunks", "budget", "input tokens", "binds", "pack prompt tokens (max)", "pack exact", "pack placed",
    "loop kept", "loop prompt tokens (vs budget; worst)", "haystack docs", "haystack doc tokens (vs budget)",
]


@dataclass(frozen=True)
class Target:
    what: str  # the wording
    measure: str  # a Row.values name
    covers: Callable[[Row], bool]
    limit: float
    worst_only: bool  # judged on the worst repetition alone (else on the median and the worst)
    unit: str = "×"


TARGETS = [
    Target("cold pack / one encode pass, ≥ 200 chunks, budget binds", "pack/encode",
           lambda r: r.n >= 200 and r.binds, 1.0, True),
    Target("cold pack / one encode pass, 200 chunks, everything fits", "pack/encode",
           lambda r: r.n == 200 and not r.binds, 1.2, True),
    Target("cold pack / one encode pass, 20 chunks", "pack/encode", lambda r: r.n == 20, 1.5, False),
    Target("cold pack / hand-written loop, 20 and 200 chunks", "pack/loop", lambda r: r.n in (20, 200), 1.3, False),
    Target("pack at 20,000 chunks, 4k budget: cold", "pack_cold", lambda r: (r.n, r.budget) == (20_000, 4_000), 50,
           False, " ms"),
    Target("pack at 20,000 chunks, 4k budget: warm", "pack_warm", lambda r: (r.n, r.budget) == (20_000, 4_000), 50,
           False, " ms"),
]


def summary_row(t: Target, rows: list[Row]) -> list[str]:
    covered = [r for r in rows if t.covers(r)]
    limit = (f"≤ {t.limit:.1f}×" if t.unit == "×" else f"≤ {t.limit:g}{t.unit}") + (" worst" if t.worst_only else "")
    if not covered:
        return [t.what, "none in this run", "n/a", "n/a", "n/a", limit, "not measured"]

    def top(stat: Callable[[Row], float]) -> tuple[float, str]:
        worst_row = max(covered, key=stat)
        return stat(worst_row), worst_row.label

    median, median_at = top(lambda r: r.median(t.measure))
    worst, worst_at = top(lambda r: r.worst(t.measure))
    if t.worst_only:
        met = "met" if worst <= t.limit else "not met"
    else:
        met = "met" if worst <= t.limit else "met by median, not by worst" if median <= t.limit else "not met"
    fmt = (lambda v: f"{v:.2f}×") if t.unit == "×" else (lambda v: f"{ms(v)} ms")
    spread, spread_at = top(lambda r: r.worst("spread"))
    return [t.what, "; ".join(r.label for r in covered), f"{fmt(median)} at {median_at}",
            f"{fmt(worst)} at {worst_at}", f"{spread:.2f}× at {spread_at}", limit, met]


SUMMARY_HEADER = ["packing target", "rows (chunks / budget)", "largest median", "largest worst",
                  "same pack twice, largest worst spread", "target", "met"]


def markdown(header: list[str], rows: list[list[str]], align: str = "---:") -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(align for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


# ---------------------------------------------------------------- machine


def load() -> str:
    return "load average " + " / ".join(f"{x:.2f}" for x in os.getloadavg())


def machine() -> str:
    info = Path("/proc/cpuinfo").read_text().splitlines() if Path("/proc/cpuinfo").exists() else []
    cpu = next((line.split(":", 1)[1].strip() for line in info if line.startswith("model name")),
               platform.processor() or "unknown")

    def version(dist: str) -> str:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            return "not installed"

    src = Path(edgewise.__file__).resolve().parents[2]
    git = subprocess.run(["git", "-C", str(src), "describe", "--always", "--dirty"], capture_output=True, text=True)
    commit = f"commit {git.stdout.strip()}" if git.returncode == 0 else "not a git checkout"
    return (f"CPU: {cpu}, {os.cpu_count()} cores; Python {platform.python_version()}; tiktoken {version('tiktoken')}; "
            f"haystack-ai {version('haystack-ai')}; edgewise {version('edgewise')} ({commit})")


# ---------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> list[Row]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help=f"a short dev run: sizes {QUICK['sizes']}, budgets {QUICK['budgets']}, {QUICK['reps']} reps")
    parser.add_argument("--reps", type=int, help=f"repetitions per row, each on fresh texts (default {FULL['reps']})")
    parser.add_argument("--reps-large", type=int, default=5, help="repetitions for rows of --large chunks or more")
    parser.add_argument("--large", type=int, default=10_000, help="from how many chunks a row is large (default 10000)")
    parser.add_argument("--sizes", help=f"numbers of chunks, comma-separated (default {FULL['sizes']})")
    parser.add_argument("--budgets", help=f"token budgets, comma-separated (default {FULL['budgets']})")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="cpu",
                        help="cpu: process CPU time (default; robust to other load); wall: elapsed time")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data", help=f"{DATA_FILE} or its folder (default: $EDGEWISE_DATA, else ../shared/data)")
    parser.add_argument("--counter", choices=["quicktok", "rs-bpe"], default="quicktok",
                        help="what edgewise counts on: quicktok (default: a long-lived process's counter, the fast "
                             "extra) or rs-bpe (a process that has not switched)")
    args = parser.parse_args(argv)
    defaults = QUICK if args.quick else FULL
    global clock
    clock = CLOCKS[args.clock]
    sizes = [int(s) for s in (args.sizes or defaults["sizes"]).split(",")]
    budgets = [int(b) for b in (args.budgets or defaults["budgets"]).split(",")]
    reps = defaults["reps"] if args.reps is None else args.reps
    if min([reps, args.reps_large, *sizes, *budgets]) < 1:
        parser.error(f"repetitions, sizes and budgets must be ≥ 1, but got reps {reps}, reps-large "
                     f"{args.reps_large}, sizes {sizes}, budgets {budgets}")

    counter = set_counter(args.counter)
    started, load_before = time.perf_counter(), load()
    from edgewise.eval.data import data_path

    maker = ChunkMaker(data_path(DATA_FILE, args.data), args.seed)
    haystack = load_haystack()
    if haystack is None:
        print("haystack-ai is not installed (pip install -e '.[bench]'): its columns read n/a", file=sys.stderr)
    one_rep(maker, 20, budgets[0], haystack)  # warm-up: load the encoding, import everything, untimed

    rows = []
    for n in sizes:
        for budget in budgets:
            row = Row(n, budget)
            for _ in range(args.reps_large if n >= args.large else reps):
                row.reps.append(one_rep(maker, n, budget, haystack))
            rows.append(row)
            print(f"{row.label} done, {time.perf_counter() - started:.0f} s", file=sys.stderr)

    print(machine())
    print(f"{args.clock} time; {reps} repetitions a row ({args.reps_large} from {args.large:,} chunks), each on "
          f"fresh texts; {TOKENIZER}, edgewise counting on {counter}; order edges; layout sections; {WORDS_PER_CHUNK[0]}-{WORDS_PER_CHUNK[1]} words "
          "(~150 tokens) a chunk. (worst) = the largest value over a row's repetitions.\n")
    print("Times\n")
    print(markdown(TIMES_HEADER, [times_row(r) for r in rows]))
    print("\nNoise: the same cold pack timed twice\n")
    print(markdown(NOISE_HEADER, [noise_row(r) for r in rows]))
    print("\nBudget fidelity\n")
    print(markdown(FIDELITY_HEADER, [fidelity_row(r) for r in rows]))
    print("\nPacking targets, from the rows above\n")
    print(markdown(SUMMARY_HEADER, [summary_row(t, rows) for t in TARGETS], align="---"))
    print(f"\nRun took {time.perf_counter() - started:.1f} s; {load_before} (1/5/15 min) before, {load()} after.")
    return rows


if __name__ == "__main__":
    main()
