"""The CLI imports only what the subcommand needs, and a second run loads the encoding from the cache.

Each case is a fresh interpreter run with ``-X importtime``, whose report names every module the
process imported; the encoding cache is pointed at a temporary directory with ``EDGEWISE_CACHE``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from edgewise.cli import main
from edgewise.tokens.encodings import cache_path, read_cached_ranks

from ..conftest import ROOT

PACK = ["pack", "--query", "@examples/query.txt", "--chunks", "examples/chunks.json", "--budget", "2000"]
CL100K = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"
# what no pack on the default scorer, and no --help, may pull in: the eval harness and its HTTP
# client, the model runtimes, and the test library the encoding loader once used
NEVER = ("edgewise.eval", "urllib.request", "http", "http.client", "ssl", "onnxruntime", "numpy", "tokenizers",
         "llama_cpp", "matplotlib", "unittest")
# the note a text prompt that left chunks out prints on stderr (30 chunks do not all fit 2,000 tokens)
LEFT_OUT = re.compile(r"edgewise: \d+ of 30 chunks left out of the prompt \(budget 2000 tokens\): "
                      r"--table or --format json gives each reason")


def run(args: list[str], cache: Path, *, code: str | None = None) -> tuple[str, set[str]]:
    """stdout of ``python -X importtime -m edgewise ARGS`` (or of ``-c CODE ARGS``), and the modules it imported."""
    env = {**os.environ, "EDGEWISE_CACHE": str(cache)}
    cmd = [sys.executable, "-X", "importtime"] + (["-c", code] if code else ["-m", "edgewise"]) + args
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    modules = {line.rsplit("|", 1)[1].strip() for line in out.stderr.splitlines() if line.startswith("import time:")}
    errors = [line for line in out.stderr.splitlines()
              if not line.startswith("import time:") and not LEFT_OUT.fullmatch(line)]
    assert (out.returncode, errors) == (0, [])
    return out.stdout, modules - {"package"}  # the report's own header line


def heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if any(m == n or m.startswith(n + ".") for n in NEVER))


def test_pack_imports_no_eval_backend_http_client_or_model_runtime(tmp_path, monkeypatch, capsys):
    out, modules = run(PACK, tmp_path)
    monkeypatch.chdir(ROOT)
    assert main(PACK) == 0
    assert out == capsys.readouterr().out  # the same prompt as the full parser in this process
    assert heavy(modules) == []
    assert "edgewise.cli.pack" in modules and "rs_bpe" in modules  # counting runs on rs-bpe's precompiled tables
    assert "tiktoken" not in modules and "edgewise.tokens.encodings" not in modules  # tiktoken's ~130 ms build is skipped


@pytest.mark.parametrize("names", [[], ["--order", "relevance", "--layout", "paper", "--tokenizer", "words"]])
def test_pack_with_built_in_names_reads_no_plugin_metadata(names, tmp_path):
    """Plugins are looked for only for a name not built in (or to list names): ``importlib.metadata``
    and the ``email`` package it needs cost ~50 ms of CPU."""
    _, modules = run(PACK + names, tmp_path)
    assert sorted(m for m in modules if m.split(".")[0] == "email" or m.startswith("importlib.metadata")) == []


@pytest.mark.parametrize("args", [["--help"], ["pack", "--help"], ["score", "--help"], ["data", "nq", "--help"]])
def test_help_imports_no_tokenizer_and_no_eval(args, tmp_path):
    out, modules = run(args, tmp_path)
    assert out.startswith("usage: edgewise " + " ".join(args[:-1]))
    assert heavy(modules) == []
    assert "tiktoken" not in modules
    assert not (tmp_path / "tiktoken").exists()


def test_eval_run_help_still_lists_the_backends(tmp_path):
    """`eval run` is the one subcommand whose flags name the backends: it imports them, and only it."""
    from edgewise.eval.backends import backend_names

    out, modules = run(["eval", "run", "--help"], tmp_path)
    assert f"--backend BACKEND one of: {', '.join(backend_names())} (default local)" in " ".join(out.split())
    assert "edgewise.eval.backends" in modules
    report_out, report_modules = run(["eval", "report", "--help"], tmp_path)
    assert report_out.startswith("usage: edgewise eval report")
    assert "edgewise.eval.backends" not in report_modules


# tiktoken's own Encoding (what `Tokenizer.encoding` gives, and what counts when rs-bpe is missing)
TIKTOKEN = ("import sys, edgewise.tokens as t\n"
            "print(t.TiktokenTokenizer('cl100k_base', fast=False).count(open(sys.argv[1]).read()))\n")


def test_the_second_run_loads_the_encoding_from_the_cache_and_a_damaged_cache_is_rebuilt(tmp_path):
    first, modules = run(["examples/chunks.json"], tmp_path, code=TIKTOKEN)
    path = cache_path("cl100k_base", CL100K, tmp_path)
    assert len(read_cached_ranks(path, CL100K) or {}) == 100256
    assert "gzip" in modules  # the shipped vocabulary was read
    good = path.read_bytes()

    # the same command, in a process where reading the shipped vocabulary fails: it must not be needed
    no_vocabulary = ("import sys, edgewise.tokens.encodings as e\n"
                     "def refuse(name): raise AssertionError('the vocabulary was read: the cache was not used')\n"
                     "e._read_vocabulary = refuse\n" + TIKTOKEN)
    second, modules = run(["examples/chunks.json"], tmp_path, code=no_vocabulary)
    assert second == first
    assert "gzip" not in modules

    path.write_bytes(good[: len(good) // 3])  # truncated: detected, rebuilt, same output
    third, _ = run(["examples/chunks.json"], tmp_path, code=TIKTOKEN)
    assert third == first
    assert path.read_bytes() == good
