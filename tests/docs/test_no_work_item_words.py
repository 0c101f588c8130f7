"""Code, tests, docs and file names say what is true now, not how it was built: no work-item numbers,
no numbered rounds of work, no working periods (the words are spelled out only in the patterns
below, and assembled at run time in the check of the patterns); history lives in git."""

from __future__ import annotations

import re

from ..conftest import ROOT

WORDS = re.compile(r"issue ?#?[0-9]+|(?:first|second|third|fourth|fifth|sixth) pass|this\s+session", re.IGNORECASE)
NAMES = re.compile(r"issue[0-9]|-pass|session", re.IGNORECASE)
TREES = ("src", "tests", "docs", "benchmarks")
SKIP = {".venv", "__pycache__", ".pytest_cache", ".hypothesis", "site", ".git"}


def _files():
    yield from sorted(ROOT.glob("*.md"))
    for tree in TREES:
        for path in sorted((ROOT / tree).rglob("*")):
            if path.is_file() and not SKIP & set(path.relative_to(ROOT).parts) and not path.name.endswith(".egg-info"):
                yield path


def _text(path):
    data = path.read_bytes()
    return None if b"\0" in data[:8192] else data.decode("utf-8", errors="replace")


def test_no_work_item_words_in_code_tests_or_docs():
    found = [f"{p.relative_to(ROOT)}:{n}: {m.group(0)!r}" for p in _files() if (text := _text(p)) is not None
             for n, line in enumerate(text.splitlines(), 1) for m in WORDS.finditer(line)]
    assert found == []


def test_no_work_item_words_in_file_names():
    assert [str(p.relative_to(ROOT)) for p in _files() if NAMES.search(p.relative_to(ROOT).as_posix())] == []


def test_the_patterns_find_what_they_are_for():
    # substrings, as a plain grep finds them: a passage that comes first is caught too ("the top passage" is not)
    work, item, rounds, period = "issue", " 9", ("six", "th pass"), ("this ", "session")
    for text in (f"as {work}{item} asked", f"{work.title()} #12", "the " + "".join(rounds), "in " + "".join(period),
                 "the " + "first" + " pass" + "age"):
        assert WORDS.search(text), text
    for text in ("a pre-filter", "onnxruntime.InferenceSession", "open issues", "passes 3 tests"):
        assert not WORDS.search(text), text
    assert NAMES.search(f"docs/bench/pack-{work}9-after.txt") and not NAMES.search("docs/bench/pack-band-20k-c-beside-python.txt")
