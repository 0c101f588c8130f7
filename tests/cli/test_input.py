"""Every input gets a result, or one line on stderr and exit status 2: never a traceback.

The CLI is run as a subprocess (`python -m edgewise`), with the bytes a hostile or careless caller
would send: runaway nesting, numbers no float holds, lone surrogates, files and stdin that are not
UTF-8, empty input. The valid oddities (raw U+2028 in JSON Lines, a BOM, CRLF line ends) must load.
The reading functions are also tested directly: :mod:`edgewise.jsonin.files` and :func:`edgewise.jsonin.strict.loads`.
"""

import importlib.util
import io
import json
import os
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edgewise.cli.output import write_out
from edgewise.errors import InputError
from edgewise.jsonin.files import read_chunks, read_text, text_arg
from edgewise.jsonin.strict import MAX_DEPTH, decode, loads, lone_surrogate

pytestmark = pytest.mark.slow  # a fresh interpreter per case: ~15 s, kept out of make check
CHUNKS = [{"id": "a", "text": "Paris is the capital of France.", "score": 0.9},
          {"id": "b", "text": "Lyon is a city in France.", "score": 0.4}]
DEEP = "[" * 100_000
BYTES_OF = {str: lambda text: text.encode("utf-8", "surrogatepass"), bytes: lambda data: data}


def edgewise(cwd, *args, stdin=b"", env=None):
    """Run ``python -m edgewise pack -t words ARGS`` in ``cwd``; stdout and stderr as bytes."""
    return subprocess.run([sys.executable, "-m", "edgewise", "pack", "-t", "words", *args], input=stdin,
                          capture_output=True, cwd=cwd, env=None if env is None else {**os.environ, **env})


def refused(result, message):
    """Exit 2, nothing on stdout, and exactly ``edgewise: error: MESSAGE`` as the one line on stderr."""
    assert result.stderr.decode("utf-8") == f"edgewise: error: {message}\n"
    assert (result.returncode, result.stdout) == (2, b"")


def packed_json(result):
    assert (result.returncode, result.stderr) == (0, b""), result.stderr.decode("utf-8", "replace")
    return json.loads(result.stdout.decode("utf-8"))


def library(query, items):
    from edgewise import pack

    return pack(query, items, tokenizer="words").to_dict()


# --- chunk input refused, through the CLI ------------------------------------------------------

NUMBER_400 = "1" * 400
NUMBER_5000 = "9" * 5000
REFUSED_CHUNKS = [
    pytest.param("chunks.json", DEEP,
                 "chunks.json: JSON must be nested at most 50 levels deep, but it is nested too deep to parse",
                 id="100k-nested-array"),
    pytest.param("chunks.jsonl", '{"id": "a", "text": "x", "meta": ' + DEEP + "\n",
                 "chunks.jsonl line 1: JSON must be nested at most 50 levels deep, but it is nested too deep to parse",
                 id="100k-nested-jsonl"),
    pytest.param("chunks.jsonl", '{"text": "x"}\n{"text": "y", "meta": ' + "[" * 60 + "]" * 60 + "}\n",
                 "chunks.jsonl line 2 (chunk #1): JSON must be nested at most 50 levels deep, but "
                 "meta[0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0... is deeper",
                 id="60-nested-meta"),
    pytest.param("chunks.jsonl", '{"id": "a", "text": "x", "score": ' + NUMBER_400 + "}\n",
                 "chunks.jsonl line 1 (chunk #0): score must be a finite number (within ±1.8e308), "
                 "but got 111111111111... (400 digits)",
                 id="score-400-digits"),
    pytest.param("chunks.json", '[{"id": "a", "text": "x", "score": -' + NUMBER_5000 + "}]",
                 "chunks.json chunk #0: score must be a finite number (within ±1.8e308), "
                 "but got -99999999999... (5000 digits)",
                 id="score-5000-digits"),
    pytest.param("chunks.json", '[{"text": "x"}, {"text": "y", "score": 1e999}]',
                 "chunks.json chunk #1: score must be a finite number (within ±1.8e308), but got 1e999",
                 id="score-1e999"),
    pytest.param("chunks.jsonl", '{"text": "a", "score": NaN}\n',
                 "chunks.jsonl line 1 (chunk #0): score must be a finite number, but got NaN",
                 id="score-NaN"),
    pytest.param("chunks.jsonl", '{"text": "a", "meta": {"weights": [1, -Infinity]}}\n',
                 "chunks.jsonl line 1 (chunk #0): meta.weights[1] must be a finite number, but got -Infinity",
                 id="meta-Infinity"),
    pytest.param("chunks.json", '[{"id": "a", "text": "ab\\ud800c"}]',
                 "chunks.json chunk #0: text must be valid Unicode, but character 3 is a lone surrogate U+D800",
                 id="lone-surrogate-text"),
    pytest.param("chunks.jsonl", '{"text": "ok"}\n"x\\uDFFF"\n',
                 "chunks.jsonl line 2 (chunk #1): text must be valid Unicode, but character 2 is a lone surrogate U+DFFF",
                 id="lone-surrogate-plain-string"),
    pytest.param("chunks.json", '[{"id": "a", "text": "x", "title": "\\udc80"}]',
                 "chunks.json chunk #0: title must be valid Unicode, but character 1 is a lone surrogate U+DC80",
                 id="lone-surrogate-title"),
    pytest.param("chunks.jsonl", '{"text": "a"}\n5\n',
                 "chunks.jsonl line 2 (chunk #1): a chunk must be a JSON object or a string, but got a number (5)",
                 id="number-line"),
    pytest.param("chunks.jsonl", '\n\nnull\n',
                 "chunks.jsonl line 3 (chunk #0): a chunk must be a JSON object or a string, but got null",
                 id="null-line"),
    pytest.param("chunks.json", '[{"text": "a"}, [{"text": "b"}]]',
                 "chunks.json chunk #1: a chunk must be a JSON object or a string, but got an array",
                 id="array-item"),
    pytest.param("chunks.jsonl", '{"text": "a"}\r\n{"text": \r\n',
                 "chunks.jsonl line 2: invalid JSON (Expecting value at column 11)",
                 id="truncated-line"),
    pytest.param("chunks.json", "", "chunks input chunks.json is empty: give at least one chunk", id="empty-file"),
    pytest.param("chunks.json", " \n\t\r\n", "chunks input chunks.json is empty: give at least one chunk",
                 id="whitespace-file"),
    pytest.param("chunks.json", "[ ]\n", "chunks input chunks.json is empty: give at least one chunk", id="empty-array"),
    pytest.param("chunks.json", b"\xef\xbb\xbf\n", "chunks input chunks.json is empty: give at least one chunk",
                 id="bom-only"),
    pytest.param("chunks.json", b'[{"text": "caf\xe9"}]',
                 "chunks file 'chunks.json' must be UTF-8 text, but byte offset 14 (0xE9) is not UTF-8 "
                 "(invalid continuation byte); save it as UTF-8",
                 id="latin-1-file"),
]


@pytest.mark.parametrize("name, content, message", REFUSED_CHUNKS)
def test_bad_chunk_files_are_one_line_and_exit_2(tmp_path, name, content, message):
    (tmp_path / name).write_bytes(BYTES_OF[type(content)](content))
    refused(edgewise(tmp_path, "-q", "q", "-c", name), message)


@pytest.mark.parametrize(
    "stdin, message",
    [
        (b'{"text": "na\xefve"}\n', "chunks on stdin must be UTF-8 text, but byte offset 12 (0xEF) is not UTF-8 "
                                    "(invalid continuation byte); save it as UTF-8"),
        (b"[" * 100_000, "<stdin>: JSON must be nested at most 50 levels deep, but it is nested too deep to parse"),
        (b"", "chunks input <stdin> is empty: give at least one chunk"),
        (b"\n\n", "chunks input <stdin> is empty: give at least one chunk"),
    ],
    ids=["latin-1", "100k-nested", "empty", "blank-lines"],
)
def test_bad_stdin_is_one_line_and_exit_2(tmp_path, stdin, message):
    refused(edgewise(tmp_path, "-q", "q", "-c", "-", stdin=stdin), message)


# --- text options: @FILE and the command line itself ----------------------------------------------

@pytest.mark.parametrize("flag, what", [("--query", "query"), ("--system", "system"), ("--profile", "profile")])
def test_a_latin_1_at_file_is_one_line_naming_file_and_offset(tmp_path, flag, what):
    (tmp_path / "chunks.json").write_text(json.dumps(CHUNKS))
    (tmp_path / "latin.txt").write_bytes("Caf\xe9 cr\xe8me".encode("latin-1"))
    args = [flag, "@latin.txt"] if flag == "--query" else ["-q", "q", flag, "@latin.txt"]
    refused(edgewise(tmp_path, *args, "-c", "chunks.json"),
            f"{what} file 'latin.txt' must be UTF-8 text, but byte offset 3 (0xE9) is not UTF-8 "
            f"(invalid continuation byte); save it as UTF-8")


def test_an_at_file_cut_inside_a_character_names_the_last_byte(tmp_path):
    (tmp_path / "chunks.json").write_text(json.dumps(CHUNKS))
    (tmp_path / "q.txt").write_bytes("capital of Bogotá".encode()[:-1])
    refused(edgewise(tmp_path, "-q", "@q.txt", "-c", "chunks.json"),
            "query file 'q.txt' must be UTF-8 text, but byte offset 16 (0xC3) is not UTF-8 "
            "(unexpected end of data); save it as UTF-8")


def test_a_command_line_byte_that_is_not_utf8_is_one_line(tmp_path):
    (tmp_path / "chunks.json").write_text(json.dumps(CHUNKS))
    result = edgewise(tmp_path, b"-q", b"caf\xe9?", b"-c", b"chunks.json")
    refused(result, "query must be UTF-8 text, but character 4 on the command line is the byte 0xE9, which is not UTF-8")


# --- valid oddities load, through the CLI --------------------------------------------------------

ODD = [{"id": "ls\u2028", "text": "one\u2028two\u2029three\u0085four\rfive", "score": 0.5,
        "title": "t\u2029", "meta": {"note": "x\u2028y"}},
       {"id": "b", "text": "Lyon is a city in France \U0001F600.", "score": 0.4}]


def test_jsonl_with_raw_line_separators_inside_strings_loads(tmp_path):
    text = "".join(json.dumps(c, ensure_ascii=False) + "\n" for c in ODD)
    assert "\u2028" in text and "\u0085" in text  # raw, as json.dumps(ensure_ascii=False) writes them
    (tmp_path / "chunks.jsonl").write_text(text, encoding="utf-8")
    assert packed_json(edgewise(tmp_path, "-q", "q", "-c", "chunks.jsonl", "-f", "json")) == library("q", ODD)


@pytest.mark.parametrize(
    "content",
    [
        b"\xef\xbb\xbf" + json.dumps(CHUNKS).encode(),
        b"\xef\xbb\xbf" + "".join(json.dumps(c) + "\r\n" for c in CHUNKS).encode(),
        "".join(json.dumps(c) + "\r\n" for c in CHUNKS).encode() + b"\r\n  \r\n",
        json.dumps(CHUNKS, indent=2).replace("\n", "\r\n").encode(),
        b'[{"id": "a", "text": "Paris is the capital of France.", "score": 0.9},\n'
        b' {"id": "b", "text": "Lyon is a city in France.", "score": 4e-1}]',
    ],
    ids=["bom-array", "bom-crlf-jsonl", "crlf-jsonl-blank-tail", "crlf-array", "float-literals"],
)
def test_bom_and_crlf_files_load(tmp_path, content):
    (tmp_path / "chunks.json").write_bytes(content)
    assert packed_json(edgewise(tmp_path, "-q", "capital?", "-c", "chunks.json", "-f", "json")) == library("capital?", CHUNKS)


def test_bom_on_stdin_and_in_an_at_file_is_dropped(tmp_path):
    (tmp_path / "q.txt").write_bytes(b"\xef\xbb\xbfcapital?\r\n")
    stdin = b"\xef\xbb\xbf" + json.dumps(CHUNKS, ensure_ascii=False).encode()
    result = edgewise(tmp_path, "-q", "@q.txt", "-c", "-", "-f", "json", stdin=stdin)
    assert packed_json(result) == library("capital?", CHUNKS)


def test_surrogate_pairs_and_large_finite_numbers_are_valid(tmp_path):
    text = '[{"id": "a", "text": "smile \\ud83d\\ude00", "score": 1' + "0" * 300 + '}, {"id": "b", "text": "x", "score": 1e-999}]'
    (tmp_path / "chunks.json").write_text(text)
    items = [{"id": "a", "text": "smile \U0001F600", "score": 10**300}, {"id": "b", "text": "x", "score": 0.0}]
    assert packed_json(edgewise(tmp_path, "-q", "q", "-c", "chunks.json", "-f", "json")) == library("q", items)


def test_output_is_utf8_whatever_the_locale_encoding(tmp_path):
    (tmp_path / "chunks.json").write_text(json.dumps(ODD))
    result = edgewise(tmp_path, "-q", "où?", "-c", "chunks.json", env={"PYTHONIOENCODING": "ascii"})
    assert (result.returncode, result.stderr) == (0, b"")
    from edgewise import pack

    assert result.stdout.decode("utf-8") == pack("où?", ODD, tokenizer="words").prompt + "\n"


# --- the reading functions, directly -------------------------------------------------------------

def message(fn, *args):
    with pytest.raises(InputError) as caught:
        fn(*args)
    return str(caught.value)


def test_loads_splits_json_lines_on_newline_only():
    text = '{"text": "a\u2028b"}\r\n\n"c\u0085d\u2029e"\n  \n{"text": "f\\u2028g"}'
    assert loads(text) == [{"text": "a\u2028b"}, "c\u0085d\u2029e", {"text": "f\u2028g"}]
    assert loads("\ufeff" + text) == loads(text)


def test_loads_keeps_ints_exact_and_floats_as_json_parses_them():
    text = '{"id": 12345678901234567890, "text": "x", "tokens": 7, "score": -0.25, "meta": {"big": 1' + "0" * 308 + "}}"
    assert loads(text) == [{"id": 12345678901234567890, "text": "x", "tokens": 7, "score": -0.25,
                            "meta": {"big": 10**308}}]


@pytest.mark.parametrize(
    "text, expected",
    [
        ('{"text": "a", "score": 1' + "0" * 309 + "}",
         "s line 1 (chunk #0): score must be a finite number (within ±1.8e308), but got 100000000000... (310 digits)"),
        ('[{"text": "a", "meta": {"x": [Infinity]}}]',
         "s chunk #0: meta.x[0] must be a finite number, but got Infinity"),
        ('[{"text": "a", "meta": {"odd key": {"\\ud800": 1}}}]',
         's chunk #0: the key "\\ud800" in meta["odd key"] must be valid Unicode, '
         "but character 1 is a lone surrogate U+D800"),
        ('{"text": "a", "meta": {"a": "ok", "b": NaN, "c": "\\udfff"}}',  # the first bad field, in document order
         "s line 1 (chunk #0): meta.b must be a finite number, but got NaN"),
        ("true", "s line 1 (chunk #0): a chunk must be a JSON object or a string, but got a boolean (true)"),
        ('[{"text": "a"}] [1]', "s line 1: invalid JSON (Extra data at column 17)"),
        ("raw\ud800", "s line 1: invalid JSON (Expecting value at column 1)"),
        ('"raw\ud800"', "s line 1 (chunk #0): text must be valid Unicode, but character 4 is a lone surrogate U+D800"),
    ],
    ids=["310-digits", "Infinity-in-list", "surrogate-key", "first-bad-field", "boolean", "extra-data",
         "not-json", "raw-surrogate"],
)
def test_loads_names_the_rule_the_place_and_the_value(text, expected):
    assert message(loads, text, "s") == expected


def test_nesting_limit_counts_the_chunk_as_level_one():
    def nested(levels):  # a chunk object, then levels - 1 arrays inside its meta
        return '{"text": "x", "meta": ' + "[" * (levels - 1) + "]" * (levels - 1) + "}"

    assert loads(nested(MAX_DEPTH)) == [{"text": "x", "meta": json.loads("[" * 49 + "]" * 49)}]
    assert message(loads, nested(MAX_DEPTH + 1), "s") == (
        "s line 1 (chunk #0): JSON must be nested at most 50 levels deep, but "
        "meta[0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0... is deeper")
    assert message(loads, "[" * 5000, "s") == (
        "s: JSON must be nested at most 50 levels deep, but it is nested too deep to parse")


def test_decode_reports_the_byte_offset_counting_the_bom():
    assert decode(b"\xef\xbb\xbfok", "x") == "ok"
    assert message(decode, b"\xef\xbb\xbfab\xff", "chunks file 'c.json'") == (
        "chunks file 'c.json' must be UTF-8 text, but byte offset 5 (0xFF) is not UTF-8 "
        "(invalid start byte); save it as UTF-8")
    assert message(decode, "\ud800".encode("utf-8", "surrogatepass"), "x") == (  # CESU-style surrogates are not UTF-8
        "x must be UTF-8 text, but byte offset 0 (0xED) is not UTF-8 (invalid continuation byte); save it as UTF-8")


def test_read_text_and_text_arg(tmp_path, monkeypatch):
    (tmp_path / "sys.txt").write_bytes("\ufeff  Be brief.\u2028\n".encode())
    monkeypatch.chdir(tmp_path)
    assert read_text("sys.txt", "system") == "  Be brief.\u2028\n"
    assert text_arg("@sys.txt", "system") == "Be brief."
    assert [text_arg(None, "system"), text_arg("plain", "system"), text_arg("", "system")] == [None, "plain", ""]
    assert message(read_text, "missing.txt", "profile") == "profile file 'missing.txt' could not be read: No such file or directory"
    assert message(text_arg, "@.", "profile") == "profile file '.' could not be read: Is a directory"
    assert message(text_arg, "x\udcff", "system") == (
        "system must be UTF-8 text, but character 2 on the command line is the byte 0xFF, which is not UTF-8")
    assert message(text_arg, "x\ud800", "system") == "system must be valid Unicode, but character 2 is a lone surrogate U+D800"
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"\xef\xbb\xbfhello \xc3\xa9")))
    assert text_arg("@-", "query") == "hello é"


def test_read_chunks_from_files_and_stdin(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "c.jsonl").write_bytes(b'{"text": "a"}\r\n"b"\r\n')
    assert read_chunks("c.jsonl") == [{"text": "a"}, "b"]
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"\xef\xbb\xbf[\"x\"]")))
    assert read_chunks("-") == ["x"]
    monkeypatch.setattr(sys, "stdin", io.StringIO('["y"]'))  # a text stream with no bytes under it
    assert read_chunks("-") == ["y"]
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"\xff")))
    assert message(read_chunks, "-") == (
        "chunks on stdin must be UTF-8 text, but byte offset 0 (0xFF) is not UTF-8 (invalid start byte); save it as UTF-8")
    (tmp_path / "e.json").write_text("\n[]\n")
    assert message(read_chunks, "e.json") == "chunks input e.json is empty: give at least one chunk"
    assert message(read_chunks, "nope.json") == "chunks file 'nope.json' could not be read: No such file or directory"


def test_write_out_writes_utf8_or_nothing():
    out = io.TextIOWrapper(io.BytesIO(), encoding="ascii")
    out.write("before ")
    write_out("où \u2028 \U0001F600", out)
    assert out.buffer.getvalue() == "before où \u2028 \U0001F600\n".encode()
    plain = io.StringIO()
    write_out("où", plain)
    assert plain.getvalue() == "où\n"
    empty = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    assert message(write_out, "ok\ud800", empty) == "output must be valid Unicode, but character 3 is a lone surrogate U+D800"
    assert empty.buffer.getvalue() == b""
    assert [lone_surrogate("abc"), lone_surrogate("é\U0001F600"), lone_surrogate("é\udfff")] == [None, None, 1]


# --- property: whatever json.dumps writes, loads reads back ----------------------------------------

json_text = st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=12)
chunk_items = st.lists(
    st.one_of(json_text, st.fixed_dictionaries({"text": json_text}, optional={
        "id": json_text, "score": st.floats(allow_nan=False, allow_infinity=False), "tokens": st.integers(0, 10**30),
        "meta": st.dictionaries(json_text, st.one_of(json_text, st.integers(), st.lists(json_text, max_size=3)),
                                max_size=3)})),
    min_size=1, max_size=6)


@settings(max_examples=int(os.environ.get("EDGEWISE_INPUT_EXAMPLES", "200")))
@given(items=chunk_items, array=st.booleans(), crlf=st.booleans(), bom=st.booleans(), ascii_only=st.booleans())
def test_loads_reads_back_what_json_dumps_writes(items, array, crlf, bom, ascii_only):
    end = "\r\n" if crlf else "\n"
    if array:
        text = json.dumps(items, ensure_ascii=ascii_only, indent=1).replace("\n", end)
    else:
        text = "".join(json.dumps(item, ensure_ascii=ascii_only) + end for item in items)
    assert loads(("\ufeff" if bom else "") + text) == items


# --- orjson reads long texts first: the same values and the same errors as Python's json ----------

needs_orjson = pytest.mark.skipif(importlib.util.find_spec("orjson") is None, reason="orjson is not installed")


@pytest.fixture
def through_orjson(monkeypatch):
    """Every text read by orjson first (it is otherwise tried from ORJSON_MIN characters on)."""
    import edgewise.jsonin.strict as jsonin

    monkeypatch.setattr(jsonin, "ORJSON_MIN", 0)
    return jsonin


def _read_by_python_json(monkeypatch):
    import edgewise.jsonin.strict as jsonin

    monkeypatch.setattr(jsonin, "ORJSON_MIN", float("inf"))


@needs_orjson
def test_a_long_text_is_read_by_orjson_and_gives_what_python_json_gives():
    import edgewise.jsonin.strict as jsonin

    chunks = [{"id": f"c{i}", "text": "word " * 60, "score": i / 7, "meta": {"n": i, "tags": ["a", None, True]}}
              for i in range(20)]
    text = "\n".join(json.dumps(c) for c in chunks)
    assert len(text) >= jsonin.ORJSON_MIN
    assert loads(text) == chunks and loads(json.dumps(chunks)) == chunks
    assert jsonin._orjson.__name__ == "orjson"  # imported by the first long text


@needs_orjson
@pytest.mark.parametrize("value", [2**63, -(2**63) - 1, 2**64, 12345678901234567890123, -(10**30)],
                         ids=["2**63", "below-int64", "2**64", "23-digits", "-10**30"])
def test_integers_orjson_reads_as_floats_are_read_again_exactly(through_orjson, value):
    got = loads('{"text": "x", "meta": {"n": ' + str(value) + '}}')
    assert got == [{"text": "x", "meta": {"n": value}}] and type(got[0]["meta"]["n"]) is int


@needs_orjson
@pytest.mark.parametrize(
    "text",
    ['{"text": "a", "score": 1' + "0" * 309 + "}", '[{"text": "a", "meta": {"x": [Infinity]}}]',
     '[{"text": "a", "meta": {"odd key": {"\\ud800": 1}}}]', '{"text": "a", "meta": {"a": "ok", "b": NaN}}',
     "true", "1e300", '[{"text": "a"}] [1]', "raw\ud800", '"raw\ud800"', '{"text": "a", "x": 1e999}',
     '{"text": "x", "meta": ' + "[" * 50 + "]" * 50 + "}", '[{"text": "x", "meta": ' + "[" * 50 + "]" * 50 + "}]",
     "[" * 5000, '{"text": "a\tb"}'],
    ids=["310-digits", "Infinity", "surrogate-key", "NaN", "boolean", "float-item", "extra-data", "not-json",
         "raw-surrogate", "1e999", "too-deep", "too-deep-in-array", "5000-brackets", "control-character"],
)
def test_a_text_orjson_reads_first_is_refused_with_python_json_s_message(through_orjson, monkeypatch, text):
    fast = message(loads, text, "s")
    _read_by_python_json(monkeypatch)
    assert fast == message(loads, text, "s")


deep_values = st.recursive(
    st.one_of(json_text, st.none(), st.booleans(), st.integers(-(2**70), 2**70),
              st.floats(allow_nan=False, allow_infinity=False),
              st.sampled_from([2.0**63, -(2.0**63), 9.223372036854775e18, 1e19])),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(json_text, inner, max_size=3)),
    max_leaves=30)


@needs_orjson
@settings(max_examples=int(os.environ.get("EDGEWISE_INPUT_EXAMPLES", "200")))
@given(items=st.lists(st.one_of(json_text, st.dictionaries(json_text, deep_values, max_size=4)), min_size=1, max_size=5),
       array=st.booleans(), nest=st.integers(0, 60))
def test_orjson_first_or_python_json_alone_read_every_text_alike(items, array, nest):
    import edgewise.jsonin.strict as jsonin

    if nest:  # a chunk nested near the depth limit, on either side of it
        items = [*items, {"text": "x", "meta": json.loads("[" * nest + "]" * nest)}]
    text = json.dumps(items) if array else "\n".join(json.dumps(i) for i in items)
    results = []
    for minimum in (0, float("inf")):
        jsonin.ORJSON_MIN, saved = minimum, jsonin.ORJSON_MIN
        try:
            results.append(loads(text, "s"))
        except InputError as exc:
            results.append(str(exc))
        finally:
            jsonin.ORJSON_MIN = saved
    assert results[0] == results[1]
    assert repr(results[0]) == repr(results[1])  # ints stay ints, -0.0 stays -0.0


def test_without_orjson_every_text_is_read_by_python_json(through_orjson, monkeypatch):
    monkeypatch.setattr(through_orjson, "_orjson", False)  # as when the import failed
    text = '{"text": "x", "meta": {"n": 12345678901234567890123}}\n"y"'
    assert loads(text) == [{"text": "x", "meta": {"n": 12345678901234567890123}}, "y"]
    assert message(loads, '{"text": "a", "x": NaN}', "s") == "s line 1 (chunk #0): x must be a finite number, but got NaN"
