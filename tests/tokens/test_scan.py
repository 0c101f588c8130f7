"""The passes in C (``edgewise._scan``, built by setup.py with ``optional=True``) give the answers
of their Python twins: the word-bound scan (``edgewise.tokens.wordbound.scan_words_py``, and
``words_bound`` itself) and the read of plain input dicts (``edgewise.packing.fast.lazy.plain_columns``);
a pack scans the same in either: the same prompt and the same debug record, reason for reason.
"""

from __future__ import annotations

import ast
import gzip
import importlib.metadata
import inspect
import json
import re
import shutil
import subprocess
import sys
import zipfile
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import edgewise.compiled
import edgewise.packing.fast.lazy
import edgewise.tokens.counters as counters
import edgewise.tokens.wordbound as wordbound
from edgewise import pack
from edgewise.chunk import Chunk
from edgewise.packing.fast.lazy import plain_columns
from edgewise.tokens.tokenizers import get_tokenizer
from edgewise.tokens.wordbound import O200K_BRIDGES, WordBound, scan_words_py, words_bound

from ..conftest import ROOT, examples
from ..corpus import DATA, bundled_texts

# every character class the bound reads: ASCII and Unicode white space (one, two and four bytes a
# character in CPython's str), the four separators str.split() splits on and \s does not, o200k's
# line break and "/", letters, digits, punctuation, non-Latin scripts, emoji
PIECES = ["a", "word", "Paris", "42", "—", ",", "/", "\n", "\r", " ", "  ", "\t", "\x0b", "\x0c", "\x1c", "\x1d",
          "\x1e", "\x1f", "\x85", "\xa0", "\u1680", "\u2003", "\u2028", "\u2029", "\u3000", "é", "Ж", "東京", "👍", "\ufeff"]
TEXTS = st.one_of(st.lists(st.sampled_from(PIECES), max_size=60).map("".join), st.text(max_size=80))


def test_this_install_scans_in_c() -> None:
    # make test installs with a C compiler: the passes it measures and tests are the compiled ones
    assert edgewise.compiled.STATUS == wordbound.SCANNER == "C", edgewise.compiled.STATUS
    assert WordBound().scan.func is wordbound.scan_words
    assert wordbound.scan_words.__module__ == "edgewise._scan"


@settings(max_examples=examples(600), deadline=None)
@given(text=TEXTS, stop=st.integers(min_value=-2, max_value=40), bridged=st.booleans())
def test_c_bound_passes_stop_exactly_when_words_bound_does(text: str, stop: int, bridged: bool) -> None:
    from edgewise._scan import words_over

    assert words_over(text, stop, bridged) is (words_bound(text, stop, O200K_BRIDGES if bridged else ()) > stop)


def test_c_splits_words_where_str_split_does_for_every_character() -> None:
    from edgewise._scan import words_over

    # each code point between two letters: one word or two, as str.split() (and so words_bound) sees
    # it; the four separators words_bound takes off count as one word
    points = [*range(0x3100), 0xFEFF, 0xFFFF, 0x1F44D, *(c for c in range(0x3100, 0x110000) if chr(c).isspace())]
    wrong = [hex(c) for c in points if words_over(f"a{chr(c)}b", 1, False) is not (words_bound(f"a{chr(c)}b", 1) > 1)]
    assert wrong == []


@st.composite
def scans(draw: Any) -> dict[str, Any]:
    n = draw(st.integers(min_value=0, max_value=25))
    texts = draw(st.lists(TEXTS, min_size=n, max_size=n))
    order = draw(st.permutations(range(n))) if draw(st.booleans()) else None
    stop = draw(st.integers(min_value=-1, max_value=12))
    return dict(bridged=draw(st.booleans()), texts=texts, order=order,
                start=draw(st.integers(min_value=-1, max_value=n + 1)), stop=stop,
                limit=draw(st.integers(min_value=-1, max_value=2 * stop + 2)))


@settings(max_examples=examples(500), deadline=None)
@given(scan=scans())
def test_c_scan_gives_what_the_python_scan_gives(scan: dict[str, Any]) -> None:
    from edgewise._scan import scan_words

    assert scan_words(*scan.values()) == scan_words_py(*scan.values())


def test_c_scan_over_the_bundled_corpus() -> None:
    from edgewise._scan import scan_words

    texts = bundled_texts()
    for bridged in (False, True):
        for stop in (0, 3, 10, 26, 45, 120):
            # from every 97th text on, the first whose bound stops passing: each text is decided once
            starts = range(0, len(texts), 97)
            assert [scan_words(bridged, texts, None, s, stop, -1) for s in starts] == \
                   [scan_words_py(bridged, texts, None, s, stop, -1) for s in starts]


VALUES = st.sampled_from([None, "", "x", "Paris", 0.5, -2.0, 1, True, float("nan"), float("inf"), b"x", ["x"], {"a": 1}])


class Text(str):
    pass


class Record(dict):  # type: ignore[type-arg]
    pass


@st.composite
def items(draw: Any) -> Any:
    out: list[Any] = []
    for _ in range(draw(st.integers(min_value=0, max_value=8))):
        d: dict[str, Any] = {}
        for key in ("text", "id", "score", "title", "tokens", "meta", "other"):
            if draw(st.integers(min_value=0, max_value=3)) == 0:
                continue
            d[key] = draw(VALUES if key != "text" else st.one_of(st.just("some text"), st.just(Text("t")), VALUES))
        if draw(st.integers(min_value=0, max_value=2)) > 0:  # mostly well-formed
            d = {"text": f"text {len(out)}", **({"id": f"i{len(out)}"} if draw(st.booleans()) else {}),
                 **({"score": draw(st.floats(allow_nan=False, allow_infinity=False))} if draw(st.booleans()) else {}),
                 **({"title": "T"} if draw(st.booleans()) else {})}
        out.append(Record(d) if draw(st.integers(min_value=0, max_value=9)) == 0 else d)
    shape = draw(st.sampled_from([list, tuple, list, iter]))
    return shape(out)


@settings(max_examples=examples(600), deadline=None)
@given(given_items=items())
def test_plain_dicts_are_read_a_column_at_a_time_by_the_rule_for_one(given_items: Any) -> None:
    """``plain_columns`` applies :func:`edgewise.chunk.plain_fields`'s rule to every dict at once:
    columns exactly when each dict passes it, holding what it reads from each."""
    from edgewise.chunk import plain_fields

    cols = plain_columns(given_items)
    shaped = type(given_items) in (list, tuple) and len(given_items) > 0
    fields = [plain_fields(d) for d in given_items] if shaped else [None]
    assert (cols is not None) == all(f is not None for f in fields)
    if cols is not None:
        texts, ids, scores, titles, missing_ids, missing_scores = cols
        assert list(zip(texts, ids, scores, titles)) == fields
        assert (missing_ids, missing_scores) == (ids.count(None), scores.count(None))


def test_scan_refuses_what_it_cannot_read() -> None:
    from edgewise._scan import scan_words

    with pytest.raises(TypeError, match="order must be a list or None, not tuple"):
        scan_words(False, ["a b"], (0,), 0, 0, 0)
    with pytest.raises(IndexError, match=r"order\[0\] = 5 is not a position in texts"):
        scan_words(False, ["a b"], [5], 0, 0, 0)
    with pytest.raises(TypeError, match=r"texts\[1\] must be a str, not int"):
        scan_words(False, ["a b", 7], None, 0, 0, 0)
    with pytest.raises(ValueError, match=r"bridges must be \(\) or \('\\n/', '\\r/'\), not \('x',\)"):
        WordBound(("x",))


def test_the_compiled_scan_knows_texts_only() -> None:
    """No selection policy in C: the scan takes texts, an order and three numbers, nothing that
    carries reasons, titles or prices (those are decided in edgewise.packing.select), and the stub beside
    the C file declares exactly what the module defines."""
    import edgewise._scan as c

    with pytest.raises(TypeError, match=r"scan_words\(\) takes exactly 6 arguments \(9 given\)"):
        c.scan_words(False, ["a b"], None, 0, 0, 0, ["T"], {"T": "why"}, [])
    stub = ast.parse((ROOT / "src" / "edgewise" / "_scan.pyi").read_text(encoding="utf-8"))
    declared = {f.name: [a.arg for a in f.args.posonlyargs] for f in stub.body if isinstance(f, ast.FunctionDef)}
    assert declared == {"scan_words": ["bridged", "texts", "order", "start", "stop", "limit"],
                        "words_over": ["text", "stop", "bridges"],
                        "any_in_ranges": ["text", "pages", "table"], "within": ["value", "limit", "bound"]}
    assert sorted(name for name in vars(c) if not name.startswith("_")) == sorted(declared)
    assert inspect.signature(wordbound.scan_words_py).parameters.keys() == set(declared["scan_words"])


# titles that repeat (each its passage's own where None) and long ids of varied length: the band
# where a title leaves room for a cut and the chunk's own tags, priced by id, do not
TITLES = ["Paris", None, "A Longer Title of a Film (2001)", "Paris", None]


def _band_inputs() -> tuple[str, list[dict[str, Any]]]:
    """400 NQ passages of the bundled slice, titled, scores descending, and a question."""
    chunks: list[dict[str, Any]] = []
    with gzip.open(DATA / "nq-open-oracle-dev.jsonl.gz", "rt", encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            chunks += [{"id": f"nq/dev/{len(chunks) + j}/passage-{(len(chunks) + j) * 7919 % 1000}",
                        "title": TITLES[(len(chunks) + j) % len(TITLES)] or c["title"], "text": c["text"]}
                       for j, c in enumerate(row["ctxs"])]
            if len(chunks) >= 400:
                break
    return "Who wrote the song?", [{**c, "score": 1.0 - k / 1000} for k, c in enumerate(chunks[:400])]


BUDGETS = range(1525, 1580)


def _sweep(tokenizer: str, as_chunks: bool = False) -> list[Any]:
    query, chunks = _band_inputs()
    if as_chunks:  # Chunk objects: the general path, walked a chunk at a time
        chunks = [Chunk.from_dict(c, i) for i, c in enumerate(chunks)]  # type: ignore[misc]
    out = []
    for budget in BUDGETS:
        packed = pack(query, chunks, budget=budget, tokenizer=tokenizer, order="edges", layout="sections")
        out.append((packed.prompt, packed.debug_info.to_dict()))
    return out


def _band(info: dict[str, Any]) -> str:
    """How a pack's scan ended, by its debug record (as benchmarks/pack_band.py tells)."""
    skipped = [d["reason"] for d in info["dropped"] if "(it has more words)" in d["reason"]]
    if len(skipped) < 4:
        return "exhausted"
    if sum(bool(re.search(r"plus \d+ for its tags$", r)) for r in skipped) >= 4:
        return "tags priced"
    return "tags" if len({r.split("plus at least ")[-1] for r in skipped}) > 1 else "no cut"


@pytest.mark.parametrize("tokenizer", ["cl100k_base", "o200k_base"])
def test_packs_are_the_same_in_c_and_in_python(tokenizer: str, monkeypatch: pytest.MonkeyPatch) -> None:
    compiled = _sweep(tokenizer)
    # the sweep reaches every way a scan skips: words alone, a title's bound, a tags' price by id
    assert {_band(info) for _prompt, info in compiled} == {"exhausted", "no cut", "tags", "tags priced"}

    tok = get_tokenizer(tokenizer)
    bridges = tok.lower_bound.bridges  # type: ignore[attr-defined]
    monkeypatch.setattr(tok.lower_bound, "scan", partial(scan_words_py, bridges != ()))
    assert _sweep(tokenizer) == compiled


def test_the_scan_in_blocks_packs_what_a_walk_chunk_by_chunk_packs() -> None:
    # runs of hundreds of skipped chunks, some stopped inside a block by a chunk to decide: the lazy
    # path scans them in blocks (C), the general path one by one (Python); the same packs
    assert _sweep("cl100k_base") == _sweep("cl100k_base", as_chunks=True)


def test_without_the_compiled_scan_edgewise_scans_in_python() -> None:
    # a fresh interpreter where edgewise._scan cannot be imported (as where it was not built)
    code = ("import sys; sys.modules['edgewise._scan'] = None\n"
            "import edgewise.tokens.wordbound as w\n"
            "from edgewise.tokens import get_tokenizer\n"
            "import edgewise.packing.fast.lazy as r\n"
            "print(w.SCANNER); print(get_tokenizer('cl100k_base').lower_bound.scan.func.__name__)\n"
            "print(r.rank_plain([{'id': 'a', 'text': 'x y', 'score': 0.5}])[0].ids())\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.splitlines()
    assert out[0].startswith("Python (edgewise._scan is not built: ")
    assert out[1] == "scan_words_py"
    assert out[2] == "['a']"


@pytest.mark.slow
def test_a_machine_without_a_c_compiler_still_builds_edgewise(tmp_path: Path) -> None:
    # CC=false: the compile fails, setup.py's optional=True lets the wheel build without the scan
    try:
        setuptools_major = int(importlib.metadata.version("setuptools").split(".")[0])
    except importlib.metadata.PackageNotFoundError:
        setuptools_major = 0
    if setuptools_major < 77:  # no build isolation: this venv's setuptools builds it
        pytest.skip("builds edgewise with this venv's setuptools, older than pyproject.toml's: pip install 'setuptools>=77'")
    src = tmp_path / "src"
    for name in ("pyproject.toml", "setup.py", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, src / name if src.exists() else _mkdir(src) / name)
    shutil.copytree(ROOT / "src", src / "src", ignore=shutil.ignore_patterns("*.so", "__pycache__", "*.egg-info"))
    env = {"PATH": "/usr/bin:/bin", "CC": "false", "HOME": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w",
                           str(tmp_path / "wheels"), str(src)], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    (wheel,) = (tmp_path / "wheels").glob("edgewise-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "edgewise/tokens/wordbound.py" in names
    assert [n for n in names if n.startswith("edgewise/_scan")] == ["edgewise/_scan.pyi"]  # its stub, not the module


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True)
    return path


@pytest.mark.slow
def test_the_band_sweep_times_c_and_python_side_by_side(capsys: pytest.CaptureFixture[str],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """``benchmarks/pack_band.py --passes c,python``: each budget packed with the compiled scan and
    with its Python twin in the same run, and the process left on the compiled passes. No timing
    is asserted."""
    import importlib.util

    pytest.importorskip("quicktok", reason="needs quicktok: pip install -e '.[fast]'")
    spec = importlib.util.spec_from_file_location("bench_pack_band_both", ROOT / "benchmarks" / "pack_band.py")
    bench = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    monkeypatch.setitem(sys.modules, "bench_pack_band_both", bench)
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    spec.loader.exec_module(bench)  # type: ignore[union-attr]
    rows = bench.main(["--chunks", "300", "--budgets", "3998:4008", "--data", str(ROOT / "tests" / "data"),
                       "--counter", "quicktok", "--passes", "c,python"])
    out = capsys.readouterr().out
    assert "its passes over every chunk in C, beside them in Python (alternated budget by budget)\n" in out
    assert "\nother: " not in out and "| band | budgets | this ms (C): median (worst) | Python ms: median (worst) |" in out
    assert [r[0] for r in rows] == list(range(3998, 4008)) and all(r[3] > 0 and r[4] > 0 for r in rows)
    tok = get_tokenizer("cl100k_base")
    assert tok.lower_bound.scan.func is wordbound.scan_words
    with pytest.raises(SystemExit):
        bench.main(["--passes", "c,python", "--against", str(ROOT), "--chunks", "10"])


UNEQUAL_EDGES = sorted({chr(c) for a, b in counters.UNEQUAL for c in (a - 1, a, b, b + 1)})


@settings(max_examples=examples(600), deadline=None)
@given(text=st.one_of(TEXTS, st.lists(st.sampled_from(PIECES + UNEQUAL_EDGES), max_size=30).map("".join)))
def test_c_finds_the_characters_quicktok_counts_apart_as_python_does(text: str) -> None:
    assert counters.has_unequal(text) is counters.has_unequal_py(text)
    assert counters.has_unequal_py(text) is any(a <= ord(c) <= b for c in text for a, b in counters.UNEQUAL)


def test_c_finds_every_edge_of_every_range_in_every_string_width() -> None:
    assert counters.has_unequal is not counters.has_unequal_py  # the C pass
    for c in UNEQUAL_EDGES:
        inside = any(a <= ord(c) <= b for a, b in counters.UNEQUAL)
        for text in (c, "x" + c, "é" * 5 + c, "東" + c + "y", "👍" + c):
            assert counters.has_unequal(text) is inside, (hex(ord(c)), text)
    assert not counters.has_unequal("") and not counters.has_unequal("ÿ" * 100) and not counters.has_unequal("東京" * 50)


# -- within: the check of a JSON value orjson read (edgewise.jsonin.strict.clean) ----------------------------

JSON_LEAVES = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.text(max_size=4),
                        st.floats(allow_nan=False), st.sampled_from([2.0**63, -(2.0**63), 9.223372036854775e18,
                                                                     -9.223372036854775e18, 1e19, -0.0]))
JSON_VALUES = st.recursive(JSON_LEAVES, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                                st.dictionaries(st.text(max_size=3), inner, max_size=4)),
                           max_leaves=40)


def _nested(levels: int, leaf: Any) -> Any:
    value = leaf
    for k in range(levels):
        value = [value] if k % 2 else {"k": value}
    return value


@settings(max_examples=examples(300), deadline=None)
@given(value=JSON_VALUES, levels=st.integers(0, 60), leaf=JSON_LEAVES)
def test_c_within_gives_what_clean_py_gives(value: Any, levels: int, leaf: Any) -> None:
    from edgewise._scan import within
    from edgewise.jsonin.strict import _BIG, MAX_DEPTH, clean_py

    for v in (value, _nested(levels, leaf), {"row": [value, _nested(levels, value)]}):
        assert within(v, MAX_DEPTH, _BIG) is clean_py(v)


def test_within_reads_the_limit_and_the_bound_it_is_given() -> None:
    from edgewise._scan import within

    assert [within(_nested(n, 1), 3, 10.0) for n in (2, 3, 4)] == [True, True, False]
    assert [within({"a": [x]}, 50, 10.0) for x in (9.99, 10.0, -10.0, 10, "10.0")] == [True, False, False, True, True]
    with pytest.raises(ValueError, match="limit must be from 0 to 10000, but got -1"):
        within([], -1, 1.0)
