"""What a cold pack costs by where the budget stops: a sweep of budgets over one large input.

``benchmarks/pack.py`` draws fresh chunks every repetition, so where the budget stops (how many
tokens are left once it is full) is left to chance, and so is the worst repetition. This script
holds the input still and sweeps the budget one token at a time, so every way a pack can end is
timed: the budget exhausted (fewer tokens left than any block needs), the band where no chunk can be
cut and each remaining chunk is skipped on its word count, the band where a chunk with short tags
could be cut (each chunk's title, and for some its id, is priced too), and budgets where a cut fits.

One input: ``--chunks`` (default 20,000) chunks drawn as ``benchmarks/pack.py`` draws them (windows
of 100-120 words of the NQ passages, titled, scores descending; seeded), one query. For each budget
of ``--budgets`` (``START:STOP``, default 4000:4261), ``--reps`` (default 1) cold packs, each after
clearing the count cache and ``gc.collect()``: ``edgewise.pack(query, chunks, budget=B,
tokenizer="cl100k_base", order="edges", layout="sections")``, CPU time. With ``--against
CHECKOUT`` the other checkout's ``pack`` (its ``src/edgewise`` loaded as ``edgewise_other``) is timed
alternately on the same input, first one then the other, budget by budget.

Each budget is put in a band by this checkout's debug record: ``exhausted`` (fewer than 1% of the
chunks left out on their word count: the budget ran out), ``no cut`` (left out on their word count,
all with one reason: too few tokens left to cut any chunk), ``tags`` (left out on their words and
their tags' bound, by title), ``tags priced`` (at least 1% left out on their tags' exact cost, by id
and title). Printed: one line per budget
(tokens left, band, ms), then per band the number of budgets and the median and worst ms of each
checkout, and the hand-written count-and-cut loop of ``benchmarks/pack.py`` on the same input.

    .venv/bin/python benchmarks/pack_band.py [--chunks 20000] [--budgets 4000:4261] [--reps 1]
        [--against CHECKOUT] [--data FILE|DIR] [--counter quicktok|rs-bpe] [--passes c|python|c,python]

``--passes c,python`` times this checkout's compiled passes and their Python twins on the same
input, alternated budget by budget (which goes first alternates too); the second column is Python's.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import re
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import pack as bench  # noqa: E402 - benchmarks/pack.py: the same input and the same loop

import edgewise  # noqa: E402
from edgewise.eval.data import data_path  # noqa: E402

TOKENIZER = "cl100k_base"
BANDS = ("exhausted", "no cut", "tags", "tags priced")


def load_other(checkout: Path):  # noqa: ANN201
    """Another checkout's ``src/edgewise``, loaded under the name ``edgewise_other``."""
    path = checkout / "src" / "edgewise"
    spec = importlib.util.spec_from_file_location("edgewise_other", path / "__init__.py",
                                                  submodule_search_locations=[str(path)])
    module = importlib.util.module_from_spec(spec)
    sys.modules["edgewise_other"] = module
    spec.loader.exec_module(module)
    return module


def _commit(module_file: Path) -> str:
    """The checkout a module comes from, by its git commit (dirty when it has uncommitted changes)."""
    import subprocess

    root = module_file.resolve().parents[2]
    out = subprocess.run(["git", "-C", str(root), "describe", "--always", "--dirty"], capture_output=True, text=True)
    return f"commit {out.stdout.strip()}" if out.returncode == 0 else "a checkout outside git"


def band(info: Any, n: int) -> str:
    """Where the budget stopped, read off a pack's debug record of ``n`` chunks (see the module docstring)."""
    skipped = [d["reason"] for d in info.dropped if "(it has more words)" in d["reason"]]
    if len(skipped) < n // 100:  # the budget ran out first (a few may be skipped on their way there)
        return "exhausted"
    if sum(bool(re.search(r"plus \d+ for its tags$", r)) for r in skipped) >= n // 100:
        return "tags priced"
    return "no cut" if len(set(skipped)) == 1 else "tags"


def use_passes(passes: str) -> str:
    """Make this checkout run its passes over every chunk compiled (``c``: stops the run if
    ``edgewise._scan`` is not built) or in Python (``python``: the twins an install without a C
    compiler runs). Returns what runs them."""
    from functools import partial

    from edgewise import compiled
    from edgewise.tokens import wordbound

    tok = edgewise.tokens.tokenizers.get_tokenizer(TOKENIZER)
    if passes == "c":
        if compiled.module is None:
            raise SystemExit(f"asked for the compiled passes, but {compiled.STATUS}")
        tok.lower_bound.scan = partial(compiled.module.scan_words, tok.lower_bound.bridges != ())
        return "C"
    tok.lower_bound.scan = partial(wordbound.scan_words_py, tok.lower_bound.bridges != ())
    return "Python"


def cold(module: Any, query: str, chunks: list[dict[str, Any]], budget: int) -> tuple[float, Any]:
    bench.clear_count_cache(module.tokens.get_tokenizer(TOKENIZER))
    gc.collect()
    start = time.process_time()
    packed = module.pack(query, chunks, budget=budget, tokenizer=TOKENIZER, order="edges", layout="sections")
    return (time.process_time() - start) * 1000, packed


def timed_python(query: str, chunks: list[dict[str, Any]], budget: int) -> float:
    """One cold pack of this checkout with its passes in Python, then back to C."""
    use_passes("python")
    try:
        return cold(edgewise, query, chunks, budget)[0]
    finally:
        use_passes("c")


def main(argv: list[str] | None = None) -> list[tuple[int, int, str, float, float | None]]:
    """Run the sweep; returns each budget's (budget, tokens left, band, this ms, other ms)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=20_000)
    parser.add_argument("--budgets", default="4000:4261", help="START:STOP, every budget in range(START, STOP)")
    parser.add_argument("--reps", type=int, default=1, help="cold packs per budget (and checkout); the median is kept")
    parser.add_argument("--against", help="another checkout, timed alternately (its src/edgewise is loaded)")
    parser.add_argument("--data", help="nq-open-oracle-dev.jsonl.gz or its folder (default: $EDGEWISE_DATA, ../shared/data)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--counter", choices=["quicktok", "rs-bpe"], default="rs-bpe",
                        help="what this checkout counts on (default rs-bpe: a checkout before the switch has no other)")
    parser.add_argument("--passes", choices=["c", "python", "c,python"], default="c",
                        help="this checkout's passes over every chunk: compiled (edgewise._scan, as installed) or "
                             "their Python twins, as an install without a C compiler runs them; c,python: both, "
                             "alternated budget by budget (the second column is then Python's, not another checkout's)")
    a = parser.parse_args(argv)
    counter = bench.set_counter(a.counter)
    both = a.passes == "c,python"
    if both and a.against:
        parser.error("--passes c,python times this checkout twice: it takes no --against")
    passes = use_passes(a.passes.split(",")[0])
    start, stop = (int(x) for x in a.budgets.split(":"))
    other = load_other(Path(a.against)) if a.against else edgewise if both else None
    maker = bench.ChunkMaker(data_path("nq-open-oracle-dev.jsonl.gz", a.data), a.seed)
    chunks, query = maker.chunks(a.chunks), maker.query()
    encoding = edgewise.tokens.tokenizers.get_tokenizer(TOKENIZER).encoding
    loop_ms = statistics.median(bench.timed(lambda: bench.count_and_cut(encoding, chunks, start))[0] for _ in range(5))

    print(f"this: {_commit(Path(edgewise.__file__))}" + (f"\nother: {_commit(Path(other.__file__))}" if other and not both else ""))
    print(f"{a.chunks:,} chunks, {len({c['title'] for c in chunks}):,} distinct titles, budgets {start}..{stop - 1}, "
          f"cold pack, CPU ms, median of {a.reps} per budget; this checkout counts on {counter}, "
          f"its passes over every chunk in {passes}" + (", beside them in Python (alternated budget by budget)" if both else "")
          + "\n")
    print("budget  left  band          this ms" + ("  other ms" if other and not both else "  Python ms" if both else ""))
    rows: list[tuple[int, int, str, float, float | None]] = []
    for budget in range(start, stop):
        mine: list[float] = []
        theirs: list[float] = []
        packed = None
        for rep in range(a.reps):
            python_first = both and (budget + rep) % 2 == 1  # with both, Python first on every other pack
            if python_first:
                theirs.append(timed_python(query, chunks, budget))
            ms, packed = cold(edgewise, query, chunks, budget)
            mine.append(ms)
            if both and not python_first:
                theirs.append(timed_python(query, chunks, budget))
            elif other is not None and not both:
                theirs.append(cold(other, query, chunks, budget)[0])
        kind = band(packed.debug_info, len(chunks))  # type: ignore[union-attr] - reps >= 1
        left = budget - packed.debug_info.prompt_tokens  # type: ignore[union-attr]
        this_ms, other_ms = statistics.median(mine), statistics.median(theirs) if theirs else None
        rows.append((budget, left, kind, this_ms, other_ms))
        print(f"{budget:6d}  {left:4d}  {kind:12s}  {this_ms:7.1f}" + (f"  {other_ms:8.1f}" if other_ms is not None else ""))

    def stats(values: list[float]) -> str:
        return f"{statistics.median(values):.1f} ({max(values):.1f})" if values else "n/a"

    header = ["band", "budgets", f"this ms{' (C)' if both else ''}: median (worst)"] + (
        [f"{'Python' if both else 'other'} ms: median (worst)"] if other else [])
    table: list[list[str]] = []
    for kind in (*BANDS, "all"):
        picked = [r for r in rows if kind in ("all", r[2])]
        line = [kind, str(len(picked)), stats([r[3] for r in picked])]
        if other:
            line.append(stats([r[4] for r in picked if r[4] is not None]))
        table.append(line)
    print(f"\nby band (hand-written count-and-cut loop on the same input, budget {start}: {loop_ms:.1f} ms)\n")
    print(markdown(header, table))
    return rows


def markdown(header: list[str], rows: list[list[str]]) -> str:
    line: Callable[[list[str]], str] = lambda cells: "| " + " | ".join(cells) + " |"  # noqa: E731
    return "\n".join([line(header), line(["---"] * len(header)), *map(line, rows)])


if __name__ == "__main__":
    main()
