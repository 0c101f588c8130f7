"""benchmarks/embed_throughput.py prints its table, and BENCHMARKS.md quotes the committed run as
printed (structure only: no timing is asserted)."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from ..conftest import ROOT

RAW = ROOT / "docs" / "bench" / "embed-throughput-minilm.txt"


def _load():  # noqa: ANN202 - the benchmark script as a module
    spec = importlib.util.spec_from_file_location("bench_embed_throughput", ROOT / "benchmarks" / "embed_throughput.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_the_embedding_table_is_the_committed_run():
    raw = RAW.read_text(encoding="utf-8")
    table = "\n".join(line for line in raw.splitlines() if line.startswith("|"))
    assert table.count("\n") == 2 + 12 - 1  # header, rule, 3 libraries x 2 precisions x 2 thread counts
    section = (ROOT / "BENCHMARKS.md").read_text(encoding="utf-8").split("## Embedding throughput")[1].split("\n## ")[0]
    assert table in section
    for line in raw.splitlines():
        if line.startswith(("1 thread(s):", "2 thread(s):", "512 chunks", "versions:")):
            assert line in section, line


@pytest.mark.models
def test_embed_throughput_tiny_run(capsys):
    pytest.importorskip("onnxruntime", reason="needs the models extra")
    bench = _load()
    rows = bench.main(["--chunks", "6", "--threads", "1", "--data", str(ROOT / "tests" / "data" / "nq-open-oracle-dev.jsonl.gz")])
    out = capsys.readouterr().out
    assert "| " + " | ".join(bench.HEADER) + " |" in out
    assert [(r["library"], r["precision"], r["threads"], r["n"]) for r in rows] == [("edgewise", "int8", 1, 6),
                                                                                      ("edgewise", "fp32", 1, 6)]
    assert rows[1]["cosine"] == pytest.approx((1.0, 1.0)) and rows[0]["cosine"][1] > 0.98  # the same model
    assert all(r["cpu"] > 0 and r["cells"][8] == "-" for r in rows)  # no sentence-transformers row to compare with
