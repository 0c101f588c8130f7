"""One ``edgewise index`` run names every file it skips in one form: as the user named the folder it
is in. A file refused when checked (a FIFO, one too large) and one that fails when read (binary)
are both ``docs/...`` when the folder was given as ``docs``, and both absolute when it was given
absolute; ``Report.failed`` (what the lines and ``--format json`` print) holds the same paths."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("lancedb", reason="needs the index extra: pip install -e '.[index]'")

from edgewise.index import index_paths  # noqa: E402
from edgewise.index.store import DIM  # noqa: E402

FIFO = "only regular files are indexed, but this is a FIFO"
BIG = "files must be at most 1000 bytes (--max-file-bytes), but this one is 5000"
BINARY = "a text file must not hold NUL bytes; this looks like a binary file"


def fake_embed(texts):
    import numpy as np

    return np.full((len(texts), DIM), DIM ** -0.5, dtype=np.float32)


@pytest.fixture()
def folder(tmp_path, monkeypatch) -> Path:
    """``docs/`` under the working folder: a good file, a FIFO and a file over 1,000 bytes (refused
    when checked), and a binary ``.txt`` in a subfolder (refused when read)."""
    if not hasattr(os, "mkfifo"):
        pytest.skip("needs os.mkfifo")
    d = tmp_path / "docs"
    (d / "sub").mkdir(parents=True)
    (d / "good.txt").write_text("The harbour light is lit at dusk.\n")
    (d / "big.txt").write_text("word " * 1000)
    os.mkfifo(d / "pipe.txt")
    (d / "sub" / "photo.txt").write_bytes(b"\xff\xd8\xff\xe0\x00\x10JFIF\x00")
    monkeypatch.chdir(tmp_path)
    return d


def expected(root: str) -> list[tuple[str, str]]:
    return [(os.path.join(root, "big.txt"), BIG), (os.path.join(root, "pipe.txt"), FIFO),
            (os.path.join(root, "sub", "photo.txt"), BINARY)]


@pytest.mark.parametrize("given, shown", [("docs", "docs"), ("./docs/", "docs"), (None, None)])
def test_one_run_names_every_skipped_file_in_the_form_its_folder_was_given(folder, given, shown):
    given = given or str(folder)  # None: the folder's absolute path
    shown = shown or str(folder)
    report = index_paths([given], "store", embed=fake_embed, max_file_bytes=1000)
    assert report.failed == expected(shown)
    assert [Path(p).name for p in report.added] == ["good.txt"]


def test_a_file_given_by_itself_is_named_as_given(folder):
    report = index_paths(["docs/sub/photo.txt", "docs/good.txt"], "store", embed=fake_embed)
    assert report.failed == [("docs/sub/photo.txt", BINARY)]


@pytest.mark.models
def test_the_cli_prints_one_form_of_path(folder):
    r = subprocess.run([sys.executable, "-m", "edgewise", "index", "docs", "--store", "store", "--quiet",
                        "--max-file-bytes", "1000"], capture_output=True, text=True, timeout=300, cwd=folder.parent)
    assert r.returncode == 1, r.stderr  # some files skipped, the rest indexed
    assert r.stderr.splitlines() == [f"edgewise: skipped {path}: {why}" for path, why in expected("docs")]
