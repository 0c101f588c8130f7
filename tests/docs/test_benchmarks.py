"""The benchmark scripts run and print what BENCHMARKS.md quotes (structure and budget checks only, never timings)."""

import gc
import importlib.util
import itertools
import re
import sys

import pytest

from ..conftest import ROOT


@pytest.fixture(autouse=True)
def frozen_heap():
    """The scripts call gc.collect() before each timed call; with the objects of every module the
    suite imported frozen, a collection walks only what the script made (a tenth of a second, not
    seconds, in a full test process)."""
    gc.freeze()
    yield
    gc.unfreeze()


def test_pack_benchmark_tiny_run(capsys):
    """A tiny run of benchmarks/pack.py: every table and column is printed, every prompt is exact and
    within its budget, the loop and the summary cover the rows they should. No timing is asserted."""
    spec = importlib.util.spec_from_file_location("bench_pack", ROOT / "benchmarks" / "pack.py")
    bench = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = bench  # dataclasses look their module up
    spec.loader.exec_module(bench)
    rows = bench.main(["--sizes", "20,200", "--budgets", "4000", "--reps", "2", "--data", str(ROOT / "tests" / "data")])
    out = capsys.readouterr().out
    assert "cl100k_base, edgewise counting on quicktok; order edges" in out

    assert [(r.n, r.budget, len(r.reps)) for r in rows] == [(20, 4000, 2), (200, 4000, 2)]
    assert [r.exact for r in rows] == [2, 2]
    assert [r.binds for r in rows] == [False, True]
    for r in rows:
        for rep in r.reps:
            assert rep.prompt_tokens == rep.prompt_tokens_check <= r.budget
            assert rep.placed <= r.n and rep.loop_kept <= r.n
    assert [rep.placed for rep in rows[0].reps] == [20, 20]
    assert [rep.loop_kept for rep in rows[0].reps] == [20, 20]
    for header in (bench.TIMES_HEADER, bench.NOISE_HEADER, bench.FIDELITY_HEADER, bench.SUMMARY_HEADER):
        assert "| " + " | ".join(header) + " |" in out
    # the noise table: the cold pack timed twice, its ratio and spread read off each repetition
    for r in rows:
        ratios = [rep.pack_again / rep.pack_cold for rep in r.reps]
        assert r.values("again/cold") == ratios and r.values("spread") == [max(x, 1 / x) for x in ratios]
        assert f"| {r.n:,} | 4,000 | 2 | {r.median('again/cold'):.2f}× ({min(ratios):.2f}×–{max(ratios):.2f}×) | " in out
    summary = {line.split(" | ")[0].lstrip("| "): line.split(" | ")[1:] for line in out.splitlines()
               if line.startswith("| cold pack") or line.startswith("| pack at")}
    assert {k: v[0] for k, v in summary.items()} == {
        "cold pack / one encode pass, ≥ 200 chunks, budget binds": "200 / 4,000",
        "cold pack / one encode pass, 200 chunks, everything fits": "none in this run",
        "cold pack / one encode pass, 20 chunks": "20 / 4,000",
        "cold pack / hand-written loop, 20 and 200 chunks": "20 / 4,000; 200 / 4,000",
        "pack at 20,000 chunks, 4k budget: cold": "none in this run",
        "pack at 20,000 chunks, 4k budget: warm": "none in this run",
    }
    assert summary["pack at 20,000 chunks, 4k budget: cold"][-1].rstrip(" |") == "not measured"
    spread = max(r.worst("spread") for r in rows)
    assert summary["cold pack / hand-written loop, 20 and 200 chunks"][3].startswith(f"{spread:.2f}× at ")


@pytest.mark.models
def test_prune_speed_benchmark_tiny_run(capsys):
    """benchmarks/prune_speed.py prints its table; pruning sends the query and each sentence once."""
    spec = importlib.util.spec_from_file_location("bench_prune_speed", ROOT / "benchmarks" / "prune_speed.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    texts = bench.main(["--questions", "1", "--reps", "1", "--data", str(ROOT / "tests" / "data")])
    out = capsys.readouterr().out

    from edgewise.eval.nq import build, read_jsonl
    from edgewise.prune.sentences import split_sentences

    first = next(build(read_jsonl(ROOT / "tests" / "data" / "nq-open-oracle-dev.jsonl.gz"), docs=20, gold_at=9, seed=0,
                       progress=False))
    sentences = sum(len(split_sentences(c["text"])) for c in first["ctxs"])
    assert texts == {"score": [21], "prune": [1 + sentences]}
    assert "| what | model texts per set | wall s, median (min-max) | CPU s, median (min-max) |" in out
    assert "| score 20 passages | 21 |" in out and f"| prune 20 passages | {1 + sentences} |" in out
    assert "prune / score, CPU medians:" in out


PACK_RUNS = ("pack-targets-quicktok",)  # benchmarks/pack.py runs BENCHMARKS.md quotes


def _times_cells(name: str, sizes: tuple[str, ...], column: int) -> dict[str, str]:
    """One column of a committed pack.py run's times table, by row (``4,000`` or ``20 / 4,000``)."""
    text = (ROOT / "docs" / "bench" / f"{name}.txt").read_text(encoding="utf-8")
    rows = [line.strip("|").split(" | ") for line in text.splitlines() if line.startswith(tuple(f"| {n} |" for n in sizes))]
    return {(r[1] if sizes == ("20,000",) else f"{r[0].strip()} / {r[1]}"): r[column].strip() for r in rows if len(r) == 13}


def test_the_packing_tables_are_read_off_the_committed_runs():
    """BENCHMARKS.md's tables of the whole script: each cell of the 20,000-chunk table is a run's cold
    pack median (worst), each cell of the 20- and 200-chunk table a run's pack / loop median (worst)."""
    doc = (ROOT / "BENCHMARKS.md").read_text(encoding="utf-8")
    large = [_times_cells(n, ("20,000",), 3) for n in PACK_RUNS]
    small = [_times_cells(n, ("20", "200"), 12) for n in PACK_RUNS]
    assert list(large[0]) == ["4,000", "32,000", "128,000"] and len(small[0]) == 6
    for runs in (large, small):
        for label in runs[0]:
            assert f"| {label} | " + " | ".join(r[label] for r in runs) + " |" in doc, label


def _load(name: str, file: str):  # noqa: ANN202 - a benchmark script as a module
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / file)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_pack_band_tiny_run(capsys):
    """benchmarks/pack_band.py sweeps budgets over one input, against another checkout (this one,
    loaded again): every budget gets a band read off its debug record, both checkouts a time, and
    the table counts every budget once. No timing is asserted."""
    bench = _load("bench_pack_band", "pack_band.py")
    # (quicktok: this process may have switched already, and a run on rs-bpe would stop, saying so)
    rows = bench.main(["--chunks", "300", "--budgets", "3998:4022", "--against", str(ROOT),
                       "--data", str(ROOT / "tests" / "data"), "--counter", "quicktok"])
    out = capsys.readouterr().out
    assert "median of 1 per budget; this checkout counts on quicktok, its passes over every chunk in C\n" in out
    assert [r[0] for r in rows] == list(range(3998, 4022))
    assert all(r[4] is not None and r[3] > 0 for r in rows)
    assert {r[2] for r in rows} <= set(bench.BANDS) and {"exhausted", "no cut", "tags"} <= {r[2] for r in rows}
    assert all(left >= 0 for _, left, _, _, _ in rows)
    table = {line.split(" | ")[0].lstrip("| "): int(line.split(" | ")[1]) for line in out.splitlines()
             if line.startswith("| ") and line.split(" | ")[0].lstrip("| ") in (*bench.BANDS, "all")}
    assert table == {**{b: sum(r[2] == b for r in rows) for b in bench.BANDS}, "all": 24}


def test_pack_band_runs_the_python_passes_when_asked(capsys, monkeypatch):
    """``--passes python``: the sweep runs this checkout's Python twins of the compiled passes (as an
    install without a C compiler does), says so, and finds every budget in the band the compiled
    passes find it in (the same debug records)."""
    from edgewise.tokens.tokenizers import get_tokenizer

    bench = _load("bench_pack_band", "pack_band.py")
    args = ["--chunks", "300", "--budgets", "3998:4022", "--data", str(ROOT / "tests" / "data"), "--counter", "quicktok"]
    compiled = bench.main(args)
    tok = get_tokenizer("cl100k_base")
    monkeypatch.setattr(tok.lower_bound, "scan", tok.lower_bound.scan)  # put back after the test
    in_python = bench.main([*args, "--passes", "python"])
    assert "its passes over every chunk in Python\n" in capsys.readouterr().out
    assert tok.lower_bound.scan.func.__name__ == "scan_words_py"
    assert [r[:3] for r in in_python] == [r[:3] for r in compiled]


@pytest.mark.parametrize("raw_name", ["pack-band-20k-c-beside-python.txt"])
def test_the_band_sweep_table_is_the_committed_run(raw_name):
    """BENCHMARKS.md quotes the by-band table of each committed band sweep, and the sweep's lines add up to it."""
    raw = (ROOT / "docs" / "bench" / raw_name).read_text(encoding="utf-8")
    table = raw.split("\n\n")[-1].strip()
    assert table.startswith("| band | budgets |") and table in (ROOT / "BENCHMARKS.md").read_text(encoding="utf-8")
    lines = [line.split() for line in raw.splitlines() if line[:6].strip().isdigit()]
    counts = {line.split(" | ")[0].lstrip("| "): int(line.split(" | ")[1]) for line in table.splitlines()[2:]}
    # budget, left, the band's words, then one ms column per checkout timed
    kinds = [" ".join(w for w in parts[2:] if not w.replace(".", "", 1).isdigit()) for parts in lines]
    assert counts == {**{k: kinds.count(k) for k in ("exhausted", "no cut", "tags", "tags priced")}, "all": len(lines)}


@pytest.mark.parametrize("raw", [f"{name}.txt" for name in PACK_RUNS])
def test_the_full_runs_targets_are_quoted_as_printed(raw):
    """BENCHMARKS.md quotes the packing targets table of each committed full run of benchmarks/pack.py verbatim."""
    text = (ROOT / "docs" / "bench" / raw).read_text(encoding="utf-8")
    table = text.split("Packing targets, from the rows above\n\n")[1].split("\n\n")[0].strip()
    assert table.count("\n") == 7 and table in (ROOT / "BENCHMARKS.md").read_text(encoding="utf-8")


def test_truncate_benchmark_tiny_run(capsys):
    """benchmarks/truncate.py compares cuts from a prefix with cuts from all ids (it stops if any
    differ) and the index chunker against another checkout (this one, loaded again). No timing asserted."""
    bench = _load("bench_truncate", "truncate.py")
    out = bench.main(["--cuts", "8,64", "--passages", "40", "--words", "3000", "--reps", "1", "--against", str(ROOT),
                      "--data", str(ROOT / "tests" / "data")])
    printed = capsys.readouterr().out
    assert [row[0] for row in out["cuts"]] == ["8", "64"] and [row[:3] for row in out["split"]] == [["3,000", "18,070", "16"]]
    assert "| tokens kept | truncate µs | from all ids µs | ratio |" in printed
    assert "| words | characters | chunks | this ms | other ms |" in printed


def test_the_truncate_table_is_the_committed_run():
    """BENCHMARKS.md quotes the cuts table of benchmarks/truncate.py as printed (the run's second
    table, the chunker beside another checkout, stays in the raw file)."""
    raw = (ROOT / "docs" / "bench" / "truncate-head.txt").read_text(encoding="utf-8")
    tables = [t.strip() for t in raw.split("\n\n") if t.strip().startswith("| ")]
    doc = (ROOT / "BENCHMARKS.md").read_text(encoding="utf-8")
    assert len(tables) == 2 and tables[0].startswith("| tokens kept | truncate µs |") and tables[0] in doc


def test_the_batch_tables_are_the_committed_run():
    """BENCHMARKS.md's batch section quotes benchmarks/batch.py's committed run: each way's row with
    the raw table's cells at 20 and then 200 chunks (rows/s per worker, both ratios, steady rate), and
    the stage table's pack(), Arrow, parse and total rows; the targets table quotes the run's Ray ratios."""
    doc = (ROOT / "BENCHMARKS.md").read_text(encoding="utf-8")
    raw = (ROOT / "docs" / "bench" / "batch-per-worker-and-ray.txt").read_text(encoding="utf-8")
    ways = [[c.strip() for c in line.strip("|").split("|")] for line in raw.splitlines()
            if line.startswith(("| 20 | ", "| 200 | ")) and line.count("|") == 11]
    assert len(ways) == 18
    section = doc.split("## Batch (`edgewise batch`)")[1].split("\n## ")[0]
    by_size = {n: {w[2]: [w[i] for i in (4, 5, 6, 7)] for w in ways if w[0] == n} for n in ("20", "200")}
    assert list(by_size["20"]) == list(by_size["200"]) and len(by_size["20"]) == 9
    quoted = ["| " + " | ".join([way, *by_size["20"][way], *by_size["200"][way]]) + " |" for way in by_size["20"]]
    assert [line for line in quoted if line not in section] == []
    stage = raw.split("Where one worker's time goes (local x1, CPU ms per row, medians):\n\n")[1].split("\n\n")[0]
    stages = {cells[0]: cells[1:] for cells in ([c.strip() for c in line.strip("|").split("|")] for line in stage.splitlines()[2:])}
    prose = " ".join(section.split("Where one worker's time goes")[1].split("\n\n")[0].split())
    for label, name in (("pack()", "`pack()`"), ("Arrow conversion (to_table, 32 rows at a time)", "Arrow conversion"),
                        ("parse the row (orjson, and its checks)", "parsing"), ("**total, local x1**", "of")):
        assert f"{name} {stages[label][0]} and {stages[label][2]}" in prose, label
    assert f"({stages['pack()'][1]} and {stages['pack()'][3]}× the bare loop's)" in prose
    ratios = dict(line.rsplit(": ", 1) for line in raw.splitlines() if "steady per worker: " in line)
    targets = doc.split("| `edgewise batch` on Ray Data, per actor")[1].split("\n")[0]
    assert [ratios[f"{n} chunks, ray x{a} / local x{a}, steady per worker"].replace("x", "×") in targets
            for a in (1, 2) for n in (20, 200)] == [True] * 4


def _raw_table(name: str, header: str) -> str:
    """The table of a committed raw file whose header row starts with ``header``, as printed."""
    lines = (ROOT / "docs" / "bench" / name).read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    return "\n".join(lines[start:end])


def test_the_relevance_tables_are_the_committed_runs():
    """Ranking and pruning are quoted from their committed runs of benchmarks/relevance.py as printed
    (pruning without the raw file's two rows that repeat the defaults); each compression cell is the
    dense column of the committed heads run."""
    doc = (ROOT / "BENCHMARKS.md").read_text(encoding="utf-8")
    assert _raw_table("models-int8-heldout-int8.txt", "| scorer | questions |") in doc
    pruning = _raw_table("prune-head-tuning.txt", "| method | threshold").splitlines()
    assert [r for r in pruning if "library's default" in r] == pruning[-2:] and "\n".join(pruning[:-2]) in doc
    heads = _raw_table("prune-heads-one-vs-two-embeddings.txt", "| prune threshold, budget").splitlines()[2:]
    dense = {cells[0]: cells[1] for cells in ([c.strip() for c in row.strip("|").split("|")] for row in heads)}
    section = doc.split("### Compression")[1].split("\n### ")[0]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in section.splitlines() if line.startswith("| ")][1:]
    budgets = ("no budget", "budget 1000", "budget 500", "budget 300")
    quoted = {f"{'no prune' if r[0] == 'no prune' else 'prune ' + r[0]}, {b}": cell for r in rows for b, cell in zip(budgets, r[1:])}
    assert len(quoted) == 24 and quoted == {k: dense[k] for k in quoted}


def _sections(doc: str) -> list[tuple[str, str]]:
    """BENCHMARKS.md cut at its headings: (heading, text up to the next heading)."""
    parts = re.split(r"^(#{2,4} .+)$", doc, flags=re.MULTILINE)
    return list(zip(parts[1::2], parts[2::2]))


def test_every_table_names_an_existing_script_and_every_cited_file_exists():
    """Each section with a table names the benchmarks/ script that prints it (or ``make bench``), and
    every script and raw file BENCHMARKS.md names exists (``{a,b}`` spells several raw files)."""
    doc = (ROOT / "BENCHMARKS.md").read_text(encoding="utf-8")
    without = [h for h, text in _sections(doc) if "\n|" in text and h != "## Targets"
               and not re.search(r"benchmarks/\w+\.py|make bench", text)]
    assert without == []
    scripts = set(re.findall(r"benchmarks/(\w+\.py)", doc))
    assert scripts and [s for s in scripts if not (ROOT / "benchmarks" / s).is_file()] == []
    raws = []
    for name in re.findall(r"docs/bench/([\w.{},-]+\.(?:txt|json))", doc):
        pieces = [p.split(",") for p in re.split(r"[{}]", name)]  # text, {options}, text, {options}, ...
        raws += ["".join(parts) for parts in itertools.product(*pieces)]
    assert raws and [n for n in raws if not (ROOT / "docs" / "bench" / n).is_file()] == []
