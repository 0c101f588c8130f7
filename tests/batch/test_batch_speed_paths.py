"""edgewise batch's fast paths give what the paths they replace give, value for value.

- a JSON Lines row read by orjson is the strict reader's row, or is left to the strict reader
  (integers beyond 64 bits, which orjson reads as floats; nesting past the depth limit);
- the rows of an Arrow batch (Parquet input, a Ray Dataset) read as ``to_pylist()`` reads them;
- the ``dropped`` column read off the per-chunk records is ``DebugInfo.dropped``, and a row that
  cannot be stored names the value ``dropped`` holds, as before;
- blank lines are counted and skipped as ``bytes.strip`` finds them.
"""

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgewise.batch import schema
from edgewise.batch.rows import arrow_rows, pack_row, packed_row, parse_line, read_row, to_table, writable
from edgewise.batch.units import _parse, count_rows, fast_row, iter_unit, plan
from edgewise.errors import EdgewiseError
from edgewise.jsonin.strict import MAX_DEPTH, decode
from edgewise.options import PackOptions
from edgewise.packing.packer import Packer

from ..conftest import examples

pa = pytest.importorskip("pyarrow")
pytest.importorskip("orjson")

JOB = PackOptions(budget=300, tokenizer="words")


def strict(raw: bytes):
    """What the strict reader makes of a line: its row, or the error it raises."""
    try:
        return parse_line(decode(raw, "x"), "x")
    except EdgewiseError as exc:
        return exc


def assert_reads_as_strict(raw: bytes) -> object:
    fast, slow = fast_row(raw), strict(raw)
    if fast is not None:
        assert not isinstance(slow, Exception)
        assert (json.dumps(fast), fast) == (json.dumps(slow), slow)
    parsed = _parse(raw, "x")
    if isinstance(slow, Exception):
        assert type(parsed).__name__ == "LineError"
    else:
        assert (json.dumps(parsed), parsed) == (json.dumps(slow), slow)
    return fast


@pytest.mark.parametrize("number", ["18446744073709551616", "-9223372036854775809", "123456789012345678901234",
                                    "1" + "0" * 300, "1" * 400, "1" * 401])
def test_an_integer_beyond_64_bits_is_left_to_the_strict_reader(number):
    for raw in (f'{{"query": "q", "chunks": [{{"text": "a", "score": {number}}}]}}',
                f'{{"query": "q", "chunks": [{{"text": "a", "meta": {{"n": [1, {{"m": {number}}}]}}}}]}}'):
        assert assert_reads_as_strict(raw.encode()) is None


@pytest.mark.parametrize("number", ["18446744073709551615", "-9223372036854775808", "9223372036854775807",
                                    "1e19", "1.5", "0.12345678901234567890123", "-0.0", "1E5"])
def test_numbers_orjson_reads_as_the_strict_reader_does(number):
    raw = f'{{"query": "q", "chunks": [{{"text": "a", "score": {number}, "meta": {{"n": {number}}}}}]}}'.encode()
    # 1e19 is a float of 2**63 or more, so it goes to the strict reader too (which reads the same float)
    assert (assert_reads_as_strict(raw) is None) == (number == "1e19")


def test_the_depth_limit_is_the_strict_readers():
    def row(level):  # its deepest array at ``level``: the row is level 0, chunks 1, the chunk 2, meta 3...
        return ('{"query": "q", "chunks": [{"text": "a", "meta": ' + "[" * (level - 2) + "]" * (level - 2) + "}]}").encode()

    assert [assert_reads_as_strict(row(d)) is None for d in (MAX_DEPTH - 2, MAX_DEPTH - 1, MAX_DEPTH)] == [
        False, False, True]
    assert str(strict(row(MAX_DEPTH))).startswith(f"x: JSON must be nested at most {MAX_DEPTH} levels deep, but chunks[0].meta")


_numbers = st.one_of(st.integers(min_value=-(2**70), max_value=2**70),
                     st.floats(allow_nan=False, allow_infinity=False), st.sampled_from([2**63, -(2**63) - 1, 2**64]))
_values = st.recursive(st.one_of(_numbers, st.text(max_size=4), st.booleans(), st.none()),
                       lambda inner: st.one_of(st.lists(inner, max_size=3),
                                               st.dictionaries(st.text(max_size=3), inner, max_size=3)),
                       max_leaves=12)


@settings(max_examples=examples(300), deadline=None)
@given(chunks=st.lists(st.dictionaries(st.sampled_from(["text", "score", "id", "meta"]), _values, max_size=4),
                       max_size=4))
def test_any_row_of_numbers_reads_as_the_strict_reader_reads_it(chunks):
    assert_reads_as_strict(json.dumps({"query": "q", "chunks": chunks}).encode())


# -- Arrow rows -----------------------------------------------------------------------------------

CHUNK = pa.struct([("id", pa.string()), ("text", pa.string()), ("title", pa.string()), ("score", pa.float64()),
                   ("meta", pa.struct([("k", pa.string()), ("n", pa.int64())]))])
SCHEMA = pa.schema([("id", pa.string()), ("query", pa.string()), ("chunks", pa.list_(CHUNK)),
                    ("options", pa.string())])

_text = st.one_of(st.none(), st.text(max_size=5))
_chunk = st.one_of(st.none(), st.fixed_dictionaries({
    "id": _text, "text": _text, "title": _text, "score": st.one_of(st.none(), st.floats(allow_nan=True)),
    "meta": st.one_of(st.none(), st.fixed_dictionaries({"k": _text, "n": st.one_of(st.none(), st.integers(-9, 9))}))}))
_row = st.fixed_dictionaries({"id": _text, "query": _text, "chunks": st.one_of(st.none(), st.lists(_chunk, max_size=4)),
                              "options": st.sampled_from([None, '{"budget": 200}', '{"top_k": null}', "[1]", "{bad"])})


def _read(row, index):
    try:
        return read_row(row, index, from_arrow=True)
    except EdgewiseError as exc:
        return f"{type(exc).__name__}: {exc}"


@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=st.lists(_row, max_size=12), size=st.integers(min_value=1, max_value=5))
def test_arrow_rows_read_as_to_pylist_reads_them(rows, size):
    table = pa.Table.from_pylist(rows, schema=SCHEMA)
    got, expected = [], []
    for batch in table.to_batches(max_chunksize=size):  # slices of one array, as a unit's batches are
        got += arrow_rows(batch)
        expected += batch.to_pylist()
    # repr: key order counts, and a NaN score equals itself
    assert [repr(_read(r, i)) for i, r in enumerate(got)] == [repr(_read(r, i)) for i, r in enumerate(expected)]
    assert len(got) == len(rows)


def test_arrow_rows_of_other_shapes_are_to_pylist():
    batch = pa.RecordBatch.from_pylist([{"query": "q", "chunks": ["a", None, "b"]}, {"query": "r", "chunks": None}])
    assert arrow_rows(batch) == batch.to_pylist()
    empty = pa.RecordBatch.from_pylist([{"query": "q", "chunks": [{}]}], schema=pa.schema([
        ("query", pa.string()), ("chunks", pa.list_(pa.struct([])))]))
    assert arrow_rows(empty) == empty.to_pylist()


def test_a_parquet_unit_packs_as_its_json_lines_twin(tmp_path):
    import pyarrow.parquet as pq

    rows = [{"id": f"r{i}", "query": f"question {i}?",
             "chunks": [{"id": f"c{k}", "text": f"passage {k} of row {i}.", "score": None if i % 2 else 1.0 - k / 10,
                         "title": None if k % 2 else f"T{k}"} for k in range(5)]} for i in range(6)]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "in.parquet", row_group_size=4)
    with open(tmp_path / "in.jsonl", "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps({**r, "chunks": [{k: v for k, v in c.items() if v is not None} for c in r["chunks"]]}) + "\n")
    packer = Packer(JOB)
    out = [to_table([pack_row(packer, i, obj, from_arrow=a) for i, obj, a in iter_unit(u)]).to_pylist()
           for path in ("in.parquet", "in.jsonl") for u in plan(tmp_path / path, rows_per_unit=4)]
    assert out[0] + out[1] == out[2] + out[3]
    assert [r["error"] for r in out[0] + out[1]] == [None] * 6


# -- the dropped column -------------------------------------------------------------------------------

def test_dropped_is_debug_info_dropped_and_the_table_is_the_same():
    packer = Packer(JOB)
    chunks = [{"id": f"c{k}", "text": " ".join(["word"] * (40 + k)), "score": 1.0 - k / 20} for k in range(12)]
    packed = packer.pack("which word?", chunks)
    row = packed_row(3, "r", packed, chunk_records=False)
    d = packed.debug_info
    assert len(d.dropped) > 3
    assert [{k: r[k] for k in ("id", "input_index", "reason")} for r in row["dropped"]] == d.dropped
    before = {**row, "dropped": d.dropped}  # the row as it was built: a dict of three keys per dropped chunk
    assert to_table([row]).equals(to_table([before]))
    assert to_table([row]).to_pylist() == pa.Table.from_pylist([before], schema=schema()).to_pylist()


@settings(max_examples=examples(60), deadline=None)
@given(sizes=st.lists(st.integers(0, 30), min_size=1, max_size=6), records=st.booleans(),
       prune=st.sampled_from([None, 0.3]), errors=st.lists(st.integers(0, 5), max_size=2))
def test_the_table_is_what_from_pylist_builds_of_the_same_rows(sizes, records, prune, errors):
    """to_table builds the list-of-structs columns a field at a time: the same table, nulls included."""
    packer = Packer(JOB)
    rows = []
    for i, n in enumerate(sizes):
        chunks = [{"id": f"c{k}", "text": f"passage {k} of row {i} " + "word " * (k % 7) + ". Another sentence here.",
                   "score": None if i % 2 else 1.0 - k / 40, "meta": {"title": f"T{k}"}} for k in range(n)]
        options = {} if prune is None else {"prune": prune}
        rows.append(pack_row(packer, i, {"id": f"r{i}", "query": "which passage?", "chunks": chunks, "options": options},
                             chunk_records=records))
    for at in errors:  # an error row: every other column null
        rows.insert(min(at, len(rows)), pack_row(packer, 99, {"query": "q", "chunks": "not a list"}))
    assert to_table(rows).equals(pa.Table.from_pylist(rows, schema=schema()))


def test_a_row_that_cannot_be_stored_names_the_same_value_as_before():
    record = {"id": "c", "input_index": 0, "rank": 0, "score": 2**70, "outcome": "dropped", "reason": "no room",
              "position": None, "section": None, "tokens": None, "merged_into": None}
    row = {"index": 0, "id": "x", "dropped": [record], "budget": 2**63}  # dropped comes first, as in a row
    assert writable(row) == {"index": 0, "id": "x", "error": (
        "OutputError: budget must be an integer within int64 (< 2**63), but got 9223372036854775808")}
    bad_id = {"index": 1, "id": "y", "dropped": [{**record, "id": "c\ud800", "score": 0.5}]}
    assert writable(bad_id)["error"] == (
        "OutputError: dropped[0].id must be valid Unicode, but holds a lone surrogate (U+D800) at character 1")


# -- blank lines --------------------------------------------------------------------------------------

@settings(max_examples=examples(100), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(st.sampled_from(['{"query": "q", "chunks": ["a"]}', "", " ", "\t", "\r", "\x0b", "\x0c",
                                       " \t\r", '  {"query": "r", "chunks": []}  ', "\xa0"]), max_size=10),
       end=st.sampled_from(["", "\n"]))
def test_blank_lines_are_the_lines_strip_empties(tmp_path_factory, lines, end):
    path = tmp_path_factory.mktemp("blank") / "in.jsonl"
    data = ("\n".join(lines) + end).encode("utf-8")
    path.write_bytes(data)
    pieces = data.split(b"\n")  # JSON Lines end a line at \n alone
    kept = [line for line in (pieces[:-1] if data.endswith(b"\n") else pieces) if line.strip()]
    assert count_rows(path) == len(kept)
    units = plan(path, rows_per_unit=2) if kept else []
    assert sum(u["rows"] for u in units) == len(kept)
    read = [obj for u in units for _, obj, _ in iter_unit(u)]
    assert len(read) == len(kept)
    assert [r if isinstance(r, dict) else "error" for r in read] == [
        r if isinstance(r := strict(line), dict) else "error" for line in kept]
