"""A tiny run of benchmarks/counter_switch.py: its tables, and where each variant's counter
switched (structure only, never a timing)."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from ..conftest import ROOT


@pytest.mark.slow
def test_counter_switch_benchmark_tiny_run(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("quicktok", reason="needs quicktok: pip install -e '.[fast]'")
    spec = importlib.util.spec_from_file_location("bench_counter_switch", ROOT / "benchmarks" / "counter_switch.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = bench
    spec.loader.exec_module(bench)
    rows = bench.main(["--calls", "30", "--skip", "5", "--rounds", "1", "--threshold", "100000", "--gil-reps", "1"])
    out = capsys.readouterr().out
    gil = [line.split(" | ")[0].lstrip("| ") for line in out.splitlines() if line.startswith("| ") and "_base" in line]
    assert gil == ["cl100k_base", "o200k_base"]  # quicktok's load beside a Python thread, once each
    assert "(no --before-src: the 'before' variant is not run)" in out
    assert out.count("| " + " | ".join(bench.HEADER) + " |") == 2  # every run, and the medians
    assert [(r["variant"], r["counter at end"], r["calls"]) for r in rows] == [
        ("construct", "quicktok", 25), ("background", "quicktok", 25), ("never", "rs-bpe", 25)]
    construct, background, never = rows
    assert (construct["switch"], never["switch"]) == ("at construction", "never")
    assert (construct["switch call"], construct["its ms"], never["switch call"]) == (None, None, None)
    # 20 chunks of 100-120 words a call: past 100,000 characters within the first 11 calls, where the load starts
    assert background["switch"].startswith("calls ") and background["switch"].endswith(" (another thread loads)")
    first = int(background["switch"].split()[1].split("-")[0])
    assert 4 <= first <= 10 and first <= background["switch call"] and background["its ms"] > 0


def test_benchmarks_md_quotes_the_committed_run() -> None:
    """The table of BENCHMARKS.md's "When counting switches to quicktok" is the medians table of
    docs/bench/counter-switch.txt, as printed."""
    raw = (ROOT / "docs" / "bench" / "counter-switch.txt").read_text(encoding="utf-8")
    medians = raw.split("Median over the rounds:\n\n")[1].strip()
    section = (ROOT / "BENCHMARKS.md").read_text(encoding="utf-8").split("## When counting switches to quicktok\n")[1]
    quoted = "\n".join(line for line in section.split("\n\n- **before**")[0].splitlines() if line.startswith("|"))
    assert quoted == medians
    assert "docs/bench/counter-switch.txt" in section and "5 rounds" in raw and "5 rounds" in section
