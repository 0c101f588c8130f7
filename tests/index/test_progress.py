"""A long ``edgewise index`` run says how far it got: a bar on stderr counting the chunks embedded
(embedding is most of the time: one big file is hundreds of chunks), shown on a terminal by itself
and anywhere with ``--progress``; a run whose stderr is no terminal prints no bar unless asked."""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys

import pytest

pytestmark = pytest.mark.models
pytest.importorskip("lancedb", reason="needs the index extra: pip install -e '.[index]'")
pytest.importorskip("onnxruntime", reason="needs the models extra")

from edgewise.index.build import EMBED_BATCH  # noqa: E402

from ..conftest import ROOT  # noqa: E402


def index(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "edgewise", "index", *args], capture_output=True, text=True,
                          timeout=120)


def test_one_big_file_shows_the_chunks_embedded_as_they_go(tmp_path):
    words = (ROOT / "examples" / "docs" / "gettysburg-address.txt").read_text().split()
    rng = random.Random(7)
    big = tmp_path / "big.txt"  # one line, no paragraph: what one big text file is
    big.write_text(" ".join(rng.choice(words) for _ in range(2500)) + "\n")
    small = ["--chunk-tokens", "32", "--overlap-tokens", "4", "--format", "json"]  # many chunks, each cheap
    r = index(str(big), "--store", str(tmp_path / "a"), *small, "--progress")
    assert r.returncode == 0, r.stderr
    n = json.loads(r.stdout)["chunks_written"]
    assert n > 2 * EMBED_BATCH
    shown = [s for s in re.split(r"[\r\n]", r.stderr) if s.startswith("indexing:")]  # text mode reads \r as \n
    counts = [tuple(map(int, m.groups())) for s in shown if (m := re.search(r"\| (\d+)/(\d+) \[.*chunk/s, file 1/1\]", s))]
    assert counts[-1] == (n, n), r.stderr
    assert (EMBED_BATCH, n) in counts and (2 * EMBED_BATCH, n) in counts  # moved a batch at a time, not at the end
    quiet = index(str(big), "--store", str(tmp_path / "b"), *small)  # stderr is no terminal here: no bar
    assert (quiet.returncode, quiet.stderr) == (0, "")
