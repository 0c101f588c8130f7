"""edgewise batch: a row holding a value Parquet cannot store is an error cell; every other row is
written, and the folder of a job says plainly whether it is finished."""

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import edgewise
from edgewise.batch import packed_dict, run, schema
from edgewise.batch.rows import pack_row, to_table, unwritable
from edgewise.options import PackOptions
from edgewise.packing.packer import Packer

from ..conftest import examples

pq = pytest.importorskip("pyarrow.parquet")

JOB = PackOptions(budget=300, tokenizer="words")
GOOD = {"query": "capital of France?", "chunks": [{"id": "paris", "text": "Paris is the capital.", "score": 0.9},
                                                   {"id": "rome", "text": "Rome is in Italy.", "score": 0.2}]}
BIG = 2**63


def _jsonl(path, rows):
    with open(path, "w", encoding="utf-8") as f:
        for row in rows:
            f.write((row if isinstance(row, str) else json.dumps(row)) + "\n")  # ensure_ascii: \ud800 escapes
    return path


def _good(i):
    return {**GOOD, "id": f"g{i}"}


def _expected_good(i):
    return edgewise.pack(GOOD["query"], GOOD["chunks"], JOB).to_dict()


def test_a_budget_too_large_for_int64_is_an_error_cell_and_the_rest_is_written(tmp_path):
    rows = [_good(0), {**_good(1), "options": {"budget": BIG}}, _good(2)]
    summary = run(_jsonl(tmp_path / "in.jsonl", rows), tmp_path / "out", JOB, engine="local", rows_per_unit=1,
                  chunk_records=True)
    assert (summary.rows, summary.errors) == (3, 1)
    out = pq.read_table(tmp_path / "out").to_pylist()
    nulls = {name: None for name in schema().names}
    assert out[1] == {**nulls, "index": 1, "id": "g1", "error": (
        f"OutputError: {tmp_path / 'in.jsonl'} row 1: budget must be an integer within int64 (< 2**63), but got "
        "9223372036854775808")}
    assert [(r["index"], r["id"], packed_dict(r)) for r in (out[0], out[2])] == [
        (0, "g0", _expected_good(0)), (2, "g2", _expected_good(2))]
    manifest = json.loads((tmp_path / "out" / "_edgewise_batch.json").read_text())
    assert (manifest["state"], manifest["rows"], manifest["errors"], manifest["files"]) == (
        "done", 3, 1, ["part-00000.parquet"])
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["_edgewise_batch.json", "part-00000.parquet"]


@pytest.mark.parametrize("row, error", [
    ({"options": {"budget": -BIG - 1}}, "InputError: {path} row 1: budget must be > 0, but got -9223372036854775809"),
    ({"options": {"budget": 10**400}}, "InputError: {path} row 1: options.budget must be a finite number (within "
                                       "±1.8e308), but got 100000000000... (401 digits)"),
    ({"chunks": [{"id": "a", "text": "x", "tokens": BIG}]}, None),  # a chunk's token count: refused or stored
    ({"chunks": [{"id": "a", "text": "x", "score": 10**400}]}, None),  # too large for a float
    ({"options": {"top_k": 10**400}}, None),
    ({"chunks": [{"id": "a", "text": "x", "meta": {"n": 10**400, "deep": [[{"k": [BIG]}]]}}]}, None),
])
def test_huge_numbers_anywhere_never_stop_the_job(tmp_path, row, error):
    rows = [_good(0), {**_good(1), **row}, _good(2)]
    summary = run(_jsonl(tmp_path / "in.jsonl", rows), tmp_path / "out", JOB, engine="local", chunk_records=True)
    out = pq.read_table(tmp_path / "out").to_pylist()
    assert [r["index"] for r in out] == [0, 1, 2] and summary.rows == 3
    assert [(r["id"], packed_dict(r)) for r in (out[0], out[2])] == [("g0", _expected_good(0)), ("g2", _expected_good(2))]
    if error is not None:
        assert out[1]["error"] == error.format(path=tmp_path / "in.jsonl")
    elif out[1]["error"] is None:  # packed: then exactly as pack() packs it
        assert packed_dict(out[1]) == edgewise.pack(rows[1]["query"], rows[1]["chunks"], JOB,
                                                    **rows[1].get("options", {})).to_dict()
    else:
        assert out[1]["error"].split(":")[0] in {"InputError", "ConfigError", "OutputError", "OverflowError"}


def test_lone_surrogates_and_nan_from_parquet_or_json_are_error_cells(tmp_path):
    import pyarrow as pa

    lines = [json.dumps(_good(0)),
             '{"id": "bad\\ud800", "query": "q", "chunks": ["a"]}',  # a lone surrogate in the id
             '{"query": "q\\udfff", "chunks": ["a"]}',
             '{"query": "q", "chunks": ["a"], "options": {"\\ud800": 1}}',
             '{"query": "q", "chunks": [{"text": "a", "score": NaN}]}']
    _jsonl(tmp_path / "in.jsonl", lines)
    summary = run(tmp_path / "in.jsonl", tmp_path / "out", JOB, engine="local", chunk_records=True)
    out = pq.read_table(tmp_path / "out").to_pylist()
    assert summary.rows == 5 and [r["index"] for r in out] == list(range(5))
    assert out[0]["error"] is None and all(r["error"] for r in out[1:])
    for r in out[1:]:
        r["error"].encode("utf-8")  # every cell is valid text
    table = pa.table({"id": ["n1", "n2"], "query": ["q", "q"],
                      "chunks": [[{"text": "a", "score": float("nan")}], [{"text": "a", "score": 1.0}]]})
    pq.write_table(table, tmp_path / "nan.parquet")
    summary = run(tmp_path / "nan.parquet", tmp_path / "out2", JOB, engine="local")
    out = pq.read_table(tmp_path / "out2").to_pylist()
    assert [(r["id"], r["error"] is None) for r in out] == [("n1", False), ("n2", True)]


def test_an_id_with_a_lone_surrogate_from_the_library_is_kept_escaped():
    row = pack_row(Packer(JOB), 4, {"id": "a\ud800", "query": "q", "chunks": ["x"]})
    table = to_table([row])
    assert table.to_pylist()[0] | {} == {**{n: None for n in schema().names}, "index": 4, "id": "a\\ud800",
                                         "error": "OutputError: id must be valid Unicode, but holds a lone surrogate "
                                                  "(U+D800) at character 1"}
    assert unwritable({"sections": [("A", ["x", 2**64])]}) == (
        "sections[0][1][1] must be an integer within int64 (< 2**63), but got 18446744073709551616")


# Values a JSON row may hold anywhere: huge integers, floats, odd text, nesting
_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.integers(min_value=2**62, max_value=2**70),
                     st.integers(max_value=-(2**63) + 2, min_value=-(2**70)), st.floats(allow_nan=False),
                     st.text(max_size=8))
_values = st.recursive(_scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                         st.dictionaries(st.text(max_size=4), inner, max_size=3)),
                       max_leaves=8)
_option_keys = st.sampled_from(["budget", "top_k", "order", "layout", "reserve", "meta", "x"])
_chunk = st.fixed_dictionaries({"text": st.text(min_size=1, max_size=20)},
                               optional={"id": _values, "score": _values, "tokens": _values, "meta": _values,
                                         "title": _values})
_row = st.fixed_dictionaries({"query": st.one_of(st.text(max_size=10), _values), "chunks": st.lists(_chunk, max_size=3)},
                             optional={"id": _values, "options": st.dictionaries(_option_keys, _values, max_size=2)})


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(bad=st.lists(_row, min_size=1, max_size=4))
def test_any_row_is_packed_or_an_error_cell_and_never_stops_the_job(tmp_path_factory, bad):
    """Hostile rows between good ones: the job ends, every row is there once, in order; the good
    rows are pack()'s; a hostile row is pack()'s result when it packs and is storable, else an error."""
    d = tmp_path_factory.mktemp("prop")
    rows = [x for pair in zip([_good(i) for i in range(len(bad))], bad) for x in pair] + [_good(len(bad))]
    summary = run(_jsonl(d / "in.jsonl", rows), d / "out", JOB, engine="local", rows_per_unit=2, chunk_records=True)
    out = pq.read_table(d / "out").to_pylist()
    assert summary.rows == len(rows) and [r["index"] for r in out] == list(range(len(rows)))
    for i, (row, got) in enumerate(zip(rows, out)):
        assert got["id"] == _own_id(row, i)  # packed or not
        if i % 2 == 0:
            assert (got["id"], got["error"], packed_dict(got)) == (row["id"], None, _expected_good(i))
        elif got["error"] is None:
            assert packed_dict(got) == edgewise.pack(row["query"], row["chunks"], JOB, **row.get("options", {})).to_dict()
        else:
            kind, _, why = got["error"].partition(": ")
            assert kind.isidentifier() and why.startswith(f"{d / 'in.jsonl'} row {i}: "), got["error"]


def _own_id(row, index):
    """The id column of an output row: the row's own id (a string, or an integer as text), else its index."""
    rid = row.get("id") if isinstance(row, dict) else None
    if isinstance(rid, int) and not isinstance(rid, bool):
        return str(rid)
    return rid if isinstance(rid, str) else str(index)


def test_every_error_cell_names_the_file_and_the_row_and_a_row_keeps_its_own_id(tmp_path):
    lines = [json.dumps(_good(0)),
             '{"id": "bad", "chunks": ["a"]}',  # no query
             '"a string row"',
             "42",
             "null",
             '{"id": 17, "query": "q"}',  # no chunks; an integer id
             '{"id": "huge", "query": "q", "chunks": ["a"], "options": {"budget": 1e400}}',  # the strict reader refuses it
             '{"id": "late", "query": 1, "chunks": ["a"]}',  # pack() refuses it
             '{"id": "small", "query": "q", "chunks": ["a"], "options": {"budget": 5}}',  # the budget cannot hold it
             '{"id": "cut", "query": "q", "chunks": [',  # not JSON: no id can be read
             '{"id": [1], "query": "q", "chunks": ["a"]}',  # an id that is no id
             '{"id": "", "chunks": ["a"]}',  # an empty id is the row's own too
             json.dumps(_good(12))]
    path = _jsonl(tmp_path / "in.jsonl", lines)
    run(path, tmp_path / "out", JOB, engine="local", rows_per_unit=5)  # the rows named across units
    out = pq.read_table(tmp_path / "out", columns=["index", "id", "error"]).to_pylist()
    errors = {
        1: ("bad", "InputError", "a row needs 'query', but this one has only: id, chunks"),
        2: ("2", "InputError", "a row must be a JSON object with query and chunks, but got a string"),
        3: ("3", "InputError", "a row must be a JSON object with query and chunks, but got a number"),
        4: ("4", "InputError", "a row must be a JSON object with query and chunks, but got null"),
        5: ("17", "InputError", "a row needs 'chunks', but this one has only: id, query"),
        6: ("huge", "InputError", "options.budget must be a finite number (within ±1.8e308), but got 1e400"),
        7: ("late", "InputError", "query must be a string, but got int"),
        8: ("small", "BudgetError", "budget must hold the fixed layers: "),
        9: ("9", "InputError", "invalid JSON ("),
        10: ("10", "InputError", "id must be a string or an integer, but got an array"),
        11: ("", "InputError", "a row needs 'query', but this one has only: id, chunks"),
    }
    assert [(r["index"], r["id"], r["error"]) for r in (out[0], out[12])] == [(0, "g0", None), (12, "g12", None)]
    for r in out[1:12]:
        rid, kind, why = errors[r["index"]]
        assert r["id"] == rid and r["error"].startswith(f"{kind}: {path} row {r['index']}: {why}"), r


def test_error_cells_of_parquet_rows_name_the_file_and_the_row(tmp_path):
    import pyarrow as pa

    rows = [_good(0), {"id": "noquery", "chunks": [{"text": "a"}]}, {**_good(2), "options": '{"budget": 5}'},
            {**_good(3), "options": {"budget": BIG}}]
    pq.write_table(pa.Table.from_pylist([{**r, "options": json.dumps(r["options"]) if isinstance(r.get("options"), dict)
                                          else r.get("options")} for r in rows]), tmp_path / "in.parquet")
    run(tmp_path / "in.parquet", tmp_path / "out", JOB, engine="local")
    out = pq.read_table(tmp_path / "out", columns=["index", "id", "error"]).to_pylist()
    at = f"{tmp_path / 'in.parquet'} row"
    assert [(r["id"], (r["error"] or "").split(": ")[:2]) for r in out] == [
        ("g0", [""]), ("noquery", ["InputError", f"{at} 1"]), ("g2", ["BudgetError", f"{at} 2"]),
        ("g3", ["OutputError", f"{at} 3"])]


# JSON texts of rows: odd numbers (long, huge, tiny, negative zero), escapes, nesting, keys twice
_json_number = st.one_of(st.integers(min_value=-(10**30), max_value=10**30).map(str),
                         st.sampled_from(["1e999", "-1e400", "1.5e-400", "-0", "-0.0", "1E5", "NaN", "Infinity",
                                          "18446744073709551616", "9223372036854775808", "0.1e1", "1" * 400]))
_json_string = st.one_of(st.text(max_size=6).map(lambda t: json.dumps(t, ensure_ascii=bool(len(t) % 2))),
                         st.sampled_from(['"\\ud800"', '"\\udfff x"', '"\\ud83d\\ude00"', '"a\\u0000b"']))
_json_value = st.recursive(st.one_of(_json_number, _json_string, st.sampled_from(["true", "null"])),
                           lambda inner: st.one_of(st.lists(inner, max_size=3).map(lambda xs: "[" + ",".join(xs) + "]"),
                                                   st.lists(st.tuples(_json_string, inner), max_size=3).map(
                                                       lambda kv: "{" + ",".join(f"{k}:{v}" for k, v in kv) + "}")),
                           max_leaves=10)


@settings(max_examples=examples(300), deadline=None)
@given(fields=st.lists(st.tuples(st.sampled_from(['"query"', '"chunks"', '"id"', '"options"', '"query"']), _json_value),
                       max_size=4), deep=st.integers(min_value=0, max_value=60))
def test_the_fast_row_reader_reads_what_the_strict_reader_reads(fields, deep):
    """orjson's fast path gives the strict reader's value, or leaves the line to it (never another value)."""
    from edgewise.batch.units import _parse, fast_row
    from edgewise.jsonin.strict import decode

    body = ",".join(f"{k}:{v}" for k, v in fields)
    if deep:
        body += (',' if body else '') + '"meta":' + "[" * deep + "]" * deep
    raw = ("{" + body + "}\n").encode("utf-8", "surrogatepass")
    fast = fast_row(raw)
    try:
        strict = pack_row_parse(decode(raw, "x"))
    except edgewise.EdgewiseError as exc:
        strict = exc
    if fast is not None:
        assert not isinstance(strict, Exception) and json.dumps(fast) == json.dumps(strict) and fast == strict
    assert (type(_parse(raw, "x")).__name__ == "LineError") == isinstance(strict, Exception)


def pack_row_parse(text):
    from edgewise.batch.rows import parse_line

    return parse_line(text, "x")
