"""``edgewise ask`` end to end: the bundled documents indexed, then answered by the bundled Gemma 3
270M in process (the default) and through a real llama.cpp server (``--backend openai``).

What a 270M model answers proves nothing about quality; the tests hold the plumbing: the prompt is
packed within the model's context in the model's own tokens (llama.cpp's count of the prompt it
evaluated is the packed count plus the chat template's few tokens), the answer and its sources come
back, and ``--debug`` says where every retrieved chunk went.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.models]
pytest.importorskip("lancedb", reason="needs the index extra: pip install -e '.[index]'")
pytest.importorskip("llama_cpp", reason="needs the eval extra: pip install -e '.[eval]'")

from edgewise.index import index_paths  # noqa: E402
from edgewise.index.answer import TEMPLATE_TOKENS  # noqa: E402

from ..conftest import ROOT  # noqa: E402
from ..servers import llama_cpp  # noqa: E402

DOCS = ROOT / "examples" / "docs"
QUESTION = "How old must a senator be?"


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("ask") / "store"
    index_paths([DOCS], path)
    return path


def ask(*args: str) -> dict:
    r = subprocess.run([sys.executable, "-m", "edgewise", "ask", QUESTION, *args, "--format", "json", "--debug"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def check(out: dict, budget: int) -> None:
    debug = out["debug_info"]
    assert out["question"] == QUESTION and isinstance(out["answer"], str) and out["answer"]
    assert debug["budget"] == budget and debug["prompt_tokens"] <= budget
    assert out["usage"]["packed_prompt_tokens"] == debug["prompt_tokens"]
    # llama.cpp counts what it evaluated: the packed prompt in Gemma's own tokens, plus its chat template
    assert 0 < out["usage"]["prompt_tokens"] - debug["prompt_tokens"] <= TEMPLATE_TOKENS
    placed = [c["id"] for c in debug["chunks"] if c["outcome"] != "dropped"]
    assert [s["id"] for s in out["sources"]] == (out["cited"] or debug["order"])
    assert set(debug["order"]) == set(placed) and len(debug["chunks"]) == 8  # every retrieved chunk accounted for
    # the Senate clause (page 2 of the PDF) is in the prompt: retrieval found it
    assert any(s["source"].endswith("constitution.pdf") and s.get("page") == 2 for s in out["sources"])


def test_ask_with_the_bundled_model_in_process(store):
    out = ask("--store", str(store), "--max-tokens", "48")
    check(out, 4096 - 48 - TEMPLATE_TOKENS)
    assert out["debug_info"]["tokenizer"].startswith("gguf:") and out["debug_info"]["layout"] == "paper"


def test_ask_through_an_openai_compatible_server(store, tmp_path_factory):
    with llama_cpp(tmp_path_factory.mktemp("llama"), n_ctx=2048) as url:
        out = ask("--store", str(store), "--backend", "openai", "--base-url", url, "--model", "gemma-3-270m",
                  "--context", "2048", "--max-tokens", "48", "--layout", "paper")  # counted with the model's own
    check(out, 2048 - 48 - TEMPLATE_TOKENS)


def test_ask_says_on_stderr_when_hits_are_left_out_and_debug_shows_why(store):
    args = [sys.executable, "-m", "edgewise", "ask", QUESTION, "--store", str(store), "--context", "600",
            "--max-tokens", "16", "--top-n", "8"]
    plain = subprocess.run(args, capture_output=True, text=True, timeout=600)
    assert plain.returncode == 0, plain.stderr
    debug = subprocess.run([*args, "--format", "json", "--debug"], capture_output=True, text=True, timeout=600)
    assert debug.returncode == 0, debug.stderr
    record = json.loads(debug.stdout)["debug_info"]
    left = len(record["dropped"])
    assert 0 < left < 8 and debug.stderr == ""  # --debug carries the record, so no note
    assert plain.stderr.splitlines()[-1] == (
        f"edgewise: {left} of 8 chunks left out of the prompt (budget {record['budget']} tokens): "
        "--debug gives each reason")
