"""One input row in, one typed output row out, with one Arrow schema for every row.

An input row is a JSON object (a JSON Lines line, or a Parquet row) with ``query``, ``chunks``,
and optionally ``options`` (pack options for this row, over the job's) and ``id``. The output row
holds the prompt, the OpenAI-style messages, and the debug info as typed columns (:func:`schema`);
a row that cannot be packed keeps its ``index`` and its own ``id`` (its input index when it has
none) and says why in ``error``, every other column null. A row of an input file names the file
and the row there, as ``{path} row {index}: `` after the error's class (:func:`where`).
:func:`packed_dict` turns an output row back into what ``Packed.to_dict()`` gives.

>>> from edgewise.packing.packer import Packer
>>> row = pack_row(Packer(tokenizer="words"), 0, {"query": "capital?", "chunks": ["Paris.", "Rome."]})
>>> row["id"], row["order"], row["prompt_tokens"], row["error"]
('0', ['chunk-0', 'chunk-1'], 194, None)
>>> pack_row(Packer(tokenizer="words"), 1, {"id": "r1", "query": "q", "chunks": "Paris."})["error"]
'InputError: chunks must be a list of chunks, but got a string'
>>> pack_row(Packer(tokenizer="words"), 13, {"id": "bad", "chunks": []}, path="in.jsonl")
{'index': 13, 'id': 'bad', 'error': "InputError: in.jsonl row 13: a row needs 'query', but this one has only: id, chunks"}
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from functools import lru_cache
from itertools import chain, compress, repeat
from operator import is_
from typing import Any

from ..errors import InputError
from ..packing.debug import _FIELDS as DEBUG_FIELDS
from ..packing.debug import mark_pruned

ROW_KEYS = ("id", "query", "chunks", "options")
_LIST_FIELDS = ("order", "section_A_ids", "section_B_ids", "section_C_ids", "placed", "summarized", "truncated",
                "reminders")
_INT_FIELDS = ("prompt_tokens", "message_tokens", "budget", "remaining_tokens", "cache_prefix_tokens", "render_passes")
_STR_FIELDS = ("tokenizer", "strategy", "layout", "scorer")


@lru_cache(maxsize=1)
def schema() -> Any:
    """The Arrow schema of every output row: ``index``, ``id``, the packed prompt, its messages, every
    :class:`~edgewise.packing.debug.DebugInfo` field as a typed column (``chunks`` is a list of structs with
    :data:`~edgewise.packing.debug.CHUNK_KEYS`), ``placement`` (what ``order="auto"`` chose and why; null
    for every other order), and ``error``."""
    import pyarrow as pa

    ids = pa.list_(pa.string())
    chunk = pa.struct([("id", pa.string()), ("input_index", pa.int64()), ("rank", pa.int64()),
                       ("score", pa.float64()), ("outcome", pa.string()), ("reason", pa.string()),
                       ("position", pa.int64()), ("section", pa.string()), ("tokens", pa.int64()),
                       ("merged_into", pa.int64())])
    fields = [("index", pa.int64()), ("id", pa.string()), ("prompt", pa.string()),
              ("messages", pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())])))]
    for name in DEBUG_FIELDS:
        if name in _LIST_FIELDS:
            fields.append((name, ids))
        elif name in _INT_FIELDS:
            fields.append((name, pa.int64()))
        elif name in _STR_FIELDS:
            fields.append((name, pa.string()))
        elif name == "estimated":
            fields.append((name, pa.bool_()))
        elif name == "sections":
            fields.append((name, pa.map_(pa.string(), ids)))
        elif name == "chunks":
            fields.append((name, pa.list_(chunk)))
        elif name == "dropped":
            fields.append((name, pa.list_(pa.struct([("id", pa.string()), ("input_index", pa.int64()),
                                                     ("reason", pa.string())]))))
        elif name == "pruned":
            fields.append((name, pa.list_(pa.struct([("id", pa.string()), ("original_chars", pa.int64()),
                                                     ("kept_chars", pa.int64()), ("score", pa.float64())]))))
        else:  # pragma: no cover - a new DebugInfo field must be given a type here
            raise TypeError(f"no Arrow type for debug field {name!r}")
    profile = pa.struct([("name", pa.string()), ("path", pa.string()), ("model", pa.string()), ("task", pa.string()),
                         ("layout", pa.string()), ("n_docs", pa.int64())])
    fields.append(("placement", pa.struct([("requested", pa.string()), ("order", pa.string()), ("reason", pa.string()),
                                           ("prune", pa.float64()), ("profile_prune", pa.float64()),
                                           ("profile", profile)])))
    fields.append(("error", pa.string()))
    return pa.schema(fields)


def where(path: Any, index: int | None) -> str:
    """How an error cell names row ``index`` of the input file ``path`` (text that can be stored:
    a path's undecodable bytes are escaped).

    >>> where("in.jsonl", 13)
    'in.jsonl row 13'
    """
    return _escaped(f"{path} row {index}")


def parse_line(text: str, source: str) -> Any:
    """The JSON object of one JSON Lines row, read with the strict rules of chunk input; any other
    value (an array, a string, a number...) is an :class:`InputError` saying what it is.

    >>> parse_line('"capital?"', "in.jsonl row 3")
    Traceback (most recent call last):
    ...
    edgewise.errors.InputError: in.jsonl row 3: a row must be a JSON object with query and chunks, but got a string
    """
    from ..jsonin.strict import loads

    start = text.lstrip(" \t\r\n")[:1]
    if start == "[":  # loads would read it as an array of chunks
        raise InputError(f"{source}: a row must be a JSON object with query and chunks, but got an array")
    if start != "{":  # loads would read it as one chunk (a string), or refuse it as a chunk
        try:
            value = json.loads(text)  # a scalar: no nesting to recurse into
        except ValueError:
            pass  # not JSON: the strict reader says where
        else:
            raise InputError(f"{source}: a row must be a JSON object with query and chunks, but got {_kind(value)}")
    try:
        return loads(text, source)[0]
    except InputError as exc:  # loads names a line and a chunk of a chunks file: here it is one row
        raise InputError(str(exc).replace(f"{source} line 1 (chunk #0):", f"{source}:")
                         .replace(f"{source} line 1:", f"{source}:")) from None


def _drop_nulls(value: Any) -> Any:
    """A row read from Arrow: a struct field that is null was absent (Arrow fills missing keys with null)."""
    return {k: v for k, v in value.items() if v is not None} if isinstance(value, Mapping) else value


def _chunks_without_nulls(chunks: list[Any]) -> list[Any]:
    """Each chunk of a row read from Arrow without its null fields (:func:`_drop_nulls`); the list
    itself when no chunk has one (as :func:`arrow_rows` builds them), found in one pass in C."""
    if set(map(type, chunks)) <= {dict} and None not in chain.from_iterable(map(dict.values, chunks)):
        return chunks
    return [_drop_nulls(c) for c in chunks]


def arrow_rows(batch: Any) -> list[dict[str, Any]]:
    """The rows of an Arrow record batch, as ``batch.to_pylist()`` gives them, but for the chunks of a
    ``chunks`` column of structs: each is built once, as a dict without its null fields (what
    :func:`read_row` drops from a row read from Arrow), a field at a time (half the time of
    ``to_pylist`` and a second dict per chunk, at 200 chunks a row).

    >>> import pyarrow as pa
    >>> arrow_rows(pa.RecordBatch.from_pylist([{"query": "q", "chunks": [{"text": "a", "score": None}]}]))
    [{'query': 'q', 'chunks': [{'text': 'a'}]}]
    """
    names = batch.schema.names
    if len(set(names)) != len(names):
        return batch.to_pylist()
    columns = []
    for name, column in zip(names, batch.columns):
        chunks = _struct_lists(column) if name == "chunks" else None
        columns.append(column.to_pylist() if chunks is None else chunks)
    return [dict(zip(names, values)) for values in zip(*columns)]


def _struct_lists(column: Any) -> list[Any] | None:
    """A ``list<struct>`` column as lists of dicts without their null fields (None for a null list);
    None for a column of another type, or holding a null struct (``to_pylist`` reads it)."""
    import pyarrow as pa

    if not pa.types.is_list(column.type) or not pa.types.is_struct(column.type.value_type):
        return None
    if isinstance(column, pa.ChunkedArray):  # a Table's column (Ray Data hands tables): one array
        column = column.combine_chunks()
    structs = column.flatten()  # every row's chunks, in order (a slice's own)
    names = [f.name for f in structs.type]
    if structs.null_count or not names or len(set(names)) != len(names):
        return None
    fields = structs.flatten()
    values = [f.to_pylist() for f in fields]
    dicts = list(map(dict, map(zip, repeat(names), zip(*values))))
    for name, field, column_values in zip(names, fields, values):
        if field.null_count:
            for at in compress(range(len(dicts)), map(is_, column_values, repeat(None))):
                del dicts[at][name]
    out: list[Any] = []
    at = 0
    for n in column.value_lengths().to_pylist():
        if n is None:
            out.append(None)
        else:
            out.append(dicts[at:at + n])
            at += n
    return out


def read_row(obj: Any, index: int | None, *, from_arrow: bool = False) -> tuple[str, str, Any, dict[str, Any]]:
    """``(id, query, chunks, options)`` of one input row, or an :class:`InputError` saying what is wrong.

    ``from_arrow``: the row came from Parquet/Arrow, where an absent key reads as null, so null
    fields of the row, of its options and of each chunk are dropped; ``options`` may be JSON text there.
    """
    if not isinstance(obj, Mapping):
        raise InputError(f"a row must be a JSON object with query and chunks, but got {_kind(obj)}")
    row = _drop_nulls(obj) if from_arrow else obj
    unknown = sorted(set(row) - set(ROW_KEYS))
    if unknown:
        raise InputError(f"unknown row key {unknown[0]!r}; a row has: {', '.join(ROW_KEYS)}")
    for key in ("query", "chunks"):
        if key not in row:
            raise InputError(f"a row needs {key!r}, but this one has only: {', '.join(row) or 'nothing'}")
    rid = row.get("id")
    if rid is None:
        if index is None:
            raise InputError("the row's id is null, and a Dataset's rows have no input index: give every row an id")
        rid = str(index)
    elif isinstance(rid, int) and not isinstance(rid, bool):
        rid = str(rid)
    elif not isinstance(rid, str):
        raise InputError(f"id must be a string or an integer, but got {_kind(rid)}")
    options = row.get("options")
    if from_arrow and isinstance(options, str):
        try:
            options = json.loads(options)
        except ValueError as exc:
            raise InputError(f"options must be a JSON object, but the text does not parse: {exc}") from None
    if options is None:
        options = {}
    elif not isinstance(options, Mapping):
        raise InputError(f"options must be an object, but got {_kind(options)}")
    elif from_arrow:
        options = _drop_nulls(options)
    chunks = row["chunks"]
    if isinstance(chunks, str):
        raise InputError("chunks must be a list of chunks, but got a string")
    if from_arrow and isinstance(chunks, list):
        chunks = _chunks_without_nulls(chunks)
    return rid, row["query"], chunks, dict(options)


def _kind(value: Any) -> str:
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
    for t, name in names.items():
        if isinstance(value, t):
            return name
    return "a number" if isinstance(value, (int, float)) else type(value).__name__


def error_row(index: int | None, rid: str | None, message: str) -> dict[str, Any]:
    """The output row of a row that could not be packed: its index and id, and why."""
    return {"index": index, "id": rid, "error": message}


def own_id(obj: Any) -> str | None:
    """The id a row gives itself (a string, or an integer as text), even when the row is refused
    otherwise; None when it gives none, or one that is no id (another type). A lone surrogate is
    kept escaped, as Parquet stores it.

    >>> own_id({"id": "bad", "chunks": []}), own_id({"id": 17}), own_id({"id": [1]}), own_id("a string row")
    ('bad', '17', None, None)
    """
    rid = obj.get("id") if isinstance(obj, Mapping) else None
    if isinstance(rid, int) and not isinstance(rid, bool):
        try:
            return str(rid)
        except ValueError:  # more digits than Python turns into text
            return None
    if not isinstance(rid, str):
        return None
    return rid if unwritable(rid) is None else _escaped(rid)


def error_text(exc: BaseException, source: str | None = None) -> str:
    """An error cell: the exception's class, the row it is about (``source``: :func:`where`), the message on one line."""
    at = f"{source}: " if source else ""
    return f"{type(exc).__name__}: {at}{' '.join(str(exc).splitlines())}"


def packed_row(index: int | None, rid: str, packed: Any, *, chunk_records: bool = True) -> dict[str, Any]:
    """The output row of a packed request (every column of :func:`schema` but ``error``); without
    ``chunk_records`` the ``chunks`` column (one record per input chunk) is null."""
    d = packed.debug_info
    row: dict[str, Any] = {"index": index, "id": rid, "prompt": packed.prompt, "messages": packed.messages("openai")}
    for name in DEBUG_FIELDS:
        if name not in ("dropped", "chunks"):
            row[name] = getattr(d, name)
    if chunk_records:
        records = d.chunks
        # the records DebugInfo.dropped is made of (it would copy their id, input_index and reason
        # into new dicts): Arrow reads only those keys of each
        row["dropped"] = [r for r in records if r["outcome"] == "dropped"]
        row["chunks"] = records
    else:  # the dropped chunks alone, no record built for the others
        row["dropped"] = d.dropped
        row["chunks"] = None
    row["sections"] = list(d.sections.items())
    row["placement"] = d.placement
    row["error"] = None
    return row


def pack_row(packer: Any, index: int | None, obj: Any, *, from_arrow: bool = False,
             chunk_records: bool = True, path: Any = None) -> dict[str, Any]:
    """Pack one input row with ``packer`` (its options, then the row's): a packed row or an error row.

    Every failure of one row (bad input, an unknown option, a budget too small, a number too large
    for the arithmetic...) becomes its ``error`` cell, named by the exception's class and, for a
    row of the input file ``path``, by the file and the row (:func:`where`); the job goes on with
    the other rows. The error row keeps the row's own id (:func:`own_id`), or its index.
    ``chunk_records=False`` leaves the per-chunk ``chunks`` column null (``dropped`` still lists
    every chunk left out, with its reason).
    """
    rid = None
    try:
        rid, query, chunks, options = read_row(obj, index, from_arrow=from_arrow)
        return packed_row(index, rid, packer.pack(query, chunks, **options), chunk_records=chunk_records)
    except Exception as exc:  # noqa: BLE001 - one row's failure, whatever it is, is that row's error cell
        if rid is None:
            rid = own_id(obj)
        if rid is None and index is not None:
            rid = str(index)
        return error_row(index, rid, error_text(exc, where(path, index) if path is not None else None))


#: the range of Parquet's int64 columns
INT64 = (-(2**63), 2**63 - 1)


def to_table(rows: Iterable[Mapping[str, Any]], *, path: Any = None) -> Any:
    """The rows as one Arrow table of :func:`schema` (absent columns null).

    A row holding a value the schema cannot store (an integer outside int64, a string that is not
    valid Unicode, a value of the wrong type) becomes an error row naming the column and the value
    (and, for rows of the input file ``path``, the file and the row: :func:`where`), and the other
    rows are kept as they are.
    """
    import pyarrow as pa

    rows = list(rows)
    try:
        return _columns(rows)
    except (pa.ArrowException, OverflowError, UnicodeError, TypeError, ValueError, AttributeError, KeyError):
        return pa.Table.from_pylist([writable(row, path=path) for row in rows], schema=schema())


def _columns(rows: list[Mapping[str, Any]]) -> Any:
    """What ``pa.Table.from_pylist(rows, schema=schema())`` gives, with each list-of-structs column
    (``dropped``, ``chunks``, ``messages``, ``pruned``) built a field at a time from the records (a
    tenth of the time at 200 chunks a row); raises where from_pylist would."""
    import pyarrow as pa

    full = schema()
    nested = [f.name for f in full if pa.types.is_list(f.type) and pa.types.is_struct(f.type.value_type)]
    rest = pa.schema([f for f in full if f.name not in nested])
    table = pa.Table.from_pylist(rows, schema=rest)  # ignores the keys not in its schema
    arrays = {name: _struct_lists_array([row.get(name) for row in rows], full.field(name).type) for name in nested}
    return pa.Table.from_arrays([arrays[f.name] if f.name in arrays else table.column(f.name) for f in full],
                                schema=full)


def _struct_lists_array(values: list[Any], kind: Any) -> Any:
    """A ``list<struct>`` array of ``values`` (each a list of mappings, or None), one child array per
    struct field (a missing key is null, as from_pylist reads it)."""
    import pyarrow as pa

    offsets, nulls, flat = [0], [], []
    for value in values:
        nulls.append(value is None)
        if value is not None:
            flat.extend(value)
        offsets.append(len(flat))
    struct = kind.value_type
    children = [pa.array([record.get(f.name) for record in flat], type=f.type) for f in struct]
    items = pa.StructArray.from_arrays(children, fields=list(struct)) if flat else pa.array([], type=struct)
    return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), items, type=kind,
                                    mask=pa.array(nulls, pa.bool_()) if any(nulls) else None)


def writable(row: Mapping[str, Any], *, path: Any = None) -> dict[str, Any]:
    """``row`` if Arrow can store it in :func:`schema`, else its error row saying which value cannot be
    (and, for a row of the input file ``path``, naming the file and the row: :func:`where`)."""
    import pyarrow as pa

    try:
        pa.Table.from_pylist([row], schema=schema())
        return dict(row)
    except (pa.ArrowException, OverflowError, UnicodeError, TypeError, ValueError) as exc:
        problem = unwritable(_as_stored(row)) or f"the row cannot be written to Parquet: {type(exc).__name__}: {exc}"
    rid = row.get("id")
    if isinstance(rid, str) and unwritable(rid) is not None:
        rid = _escaped(rid)
    at = f"{where(path, row.get('index'))}: " if path is not None else ""
    return error_row(row.get("index"), rid, _escaped(f"OutputError: {at}{' '.join(problem.splitlines())}"))


#: the keys of a ``dropped`` record, as :func:`schema` stores it
DROPPED_KEYS = ("id", "input_index", "reason")


def _as_stored(row: Mapping[str, Any]) -> Mapping[str, Any]:
    """``row`` with each ``dropped`` record cut to the keys stored (:func:`packed_row` hands Arrow the
    whole per-chunk records), so that what :func:`unwritable` names is a stored value."""
    dropped = row.get("dropped")
    if not isinstance(dropped, list) or not all(isinstance(r, Mapping) for r in dropped):
        return row
    return {**row, "dropped": [{k: r.get(k) for k in DROPPED_KEYS} for r in dropped]}


def unwritable(value: Any, where: str = "") -> str | None:
    """What in ``value`` Parquet cannot store (its path, the rule and the value), or None.

    >>> unwritable({"budget": 2**63})
    'budget must be an integer within int64 (< 2**63), but got 9223372036854775808'
    >>> unwritable({"id": "a" + chr(0xD800)})
    'id must be valid Unicode, but holds a lone surrogate (U+D800) at character 1'
    """
    if isinstance(value, bool) or value is None or isinstance(value, float):
        return None
    if isinstance(value, int):
        if INT64[0] <= value <= INT64[1]:
            return None
        side = "< 2**63" if value > 0 else ">= -2**63"
        return f"{where or 'value'} must be an integer within int64 ({side}), but got {_short(value)}"
    if isinstance(value, str):
        try:
            value.encode("utf-8")
            return None
        except UnicodeEncodeError as exc:
            return (f"{where or 'value'} must be valid Unicode, but holds a lone surrogate (U+{ord(value[exc.start]):04X}) "
                    f"at character {exc.start}")
    if isinstance(value, Mapping):
        items: Iterable[tuple[Any, Any]] = value.items()
    elif isinstance(value, (list, tuple)):
        items = enumerate(value)
    else:
        return None
    for key, item in items:
        path = f"{where}[{key}]" if isinstance(key, int) or where and not isinstance(key, str) else (
            f"{where}.{key}" if where else str(key))
        found = unwritable(key, f"{where or 'a'} key") if isinstance(key, str) else None
        found = found or unwritable(item, path)
        if found:
            return found
    return None


def _escaped(text: str) -> str:
    """``text`` with every lone surrogate written as its escape (``\\ud800``), so it can be stored."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _short(value: Any, limit: int = 80) -> str:
    text = str(value) if not isinstance(value, int) or value.bit_length() < 4000 else f"an integer of {value.bit_length()} bits"
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def packed_dict(row: Mapping[str, Any]) -> dict[str, Any]:
    """An output row (a dict of its columns, as ``Table.to_pylist()`` gives) back as ``Packed.to_dict()``:
    ``{"prompt", "messages", "debug_info"}``. A row with an error has no packed value: InputError."""
    if row.get("error") is not None:
        raise InputError(f"row {row.get('id')!r} was not packed: {row['error']}")
    debug = {name: row[name] for name in DEBUG_FIELDS}
    debug["sections"] = dict(debug["sections"])
    if debug["chunks"] and debug["pruned"]:  # a cut chunk's record holds its pruning record, as in to_dict()
        mark_pruned([r for r in debug["chunks"] if r["merged_into"] is None], debug["pruned"], reason=False)
    if row.get("placement") is not None:  # order="auto" only, as in DebugInfo.to_dict()
        debug["placement"] = row["placement"]
    return {"prompt": row["prompt"], "messages": row["messages"], "debug_info": debug}
