"""A tiny run of benchmarks/proxy_relay.py: every way is measured, every reply read whole, the
table printed as BENCHMARKS.md quotes it. No timing is asserted."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from ..conftest import ROOT

pytest.importorskip("fastapi")


@pytest.mark.slow
def test_proxy_relay_benchmark_tiny_run(capsys):
    spec = importlib.util.spec_from_file_location("bench_proxy_relay", ROOT / "benchmarks" / "proxy_relay.py")
    bench = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = bench
    spec.loader.exec_module(bench)
    result = bench.main(["--sizes-mb", "0.5", "--clients", "1,2", "--reps", "1", "--small", "3"])
    out = capsys.readouterr().out
    assert "| " + " | ".join(bench.HEADER) + " |" in out
    rows = result["rows"]
    assert [(r[0], r[1], r[2]) for r in rows] == [("0.5 MB", c, w) for c in (1, 2) for w in ("direct", "forwarded", "chat")]
    assert [r[5] for r in rows if r[2] == "direct"] == ["1.00x", "1.00x"]  # the baseline is itself
    assert all(r[6] == "" for r in rows if r[2] == "direct") and all(r[6] != "" for r in rows if r[2] != "direct")
    assert "GET /v1/models, 3 sequential requests x 3: direct " in out
