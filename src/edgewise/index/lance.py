"""The index's store on LanceDB (``lancedb``, extra ``index``): on disk, on a server, or on object storage.

Three tables in one LanceDB database: ``chunks`` (one row per chunk, with its vector), ``files``
(each file's path and content hash) and ``settings`` (one JSON row). Dense search is exact cosine
kNN up to :data:`ANN_ROWS` chunks; past that an IVF-HNSW index is built once, and later writes are
folded into it by ``optimize``. Full-text search is LanceDB's BM25 index on ``text`` (rows added
after it was built are searched too, unindexed, until the next :meth:`LanceStore.finish`).

The location is a folder; or ``http(s)://HOST:PORT``, a Lance REST namespace server (``pylance``'s
``lance.namespace.RestAdapter``; the same table API over HTTP: the store lives where the server
runs); or a URI LanceDB opens: ``s3://``, ``gs://``, ``az://`` object storage (for data that outgrows
one disk; endpoint and credentials from the usual ``AWS_*`` variables) or ``db://`` LanceDB
Cloud/Enterprise (``LANCEDB_API_KEY``; not tested here: it is a hosted service).

A store that cannot be read (a data file emptied or cut short), or whose bytes are not those
written (:mod:`.integrity`: a checksum per chunk, and a manifest of a local store's files with their
sizes and hashes), is a :class:`StoreDamaged` error, one line naming the damaged file or chunk and the
command that rebuilds the store; :meth:`LanceStore.verify` checks the whole store (``index`` runs it
first), :meth:`LanceStore.get` every chunk it returns. :meth:`LanceStore.audit` finds files whose
chunks are doubled or out of step with their record.
"""

from __future__ import annotations

import json
import os
import re
import warnings
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..errors import ConfigError, EdgewiseError, InputError, missing_extra
from . import integrity
from .integrity import COLUMN, Manifest
from .store import DIM, FORMAT, Row, Settings, check_settings

CHUNKS, FILES, SETTINGS = "chunks", "files", "settings"
# Exact search scans every vector: ~30 ms a query at 10k chunks, ~200 ms at 100k on 2 busy cores
# (BENCHMARKS.md, "Embedded stores"); an IVF-HNSW index answers in ~20 ms but costs ~1.5 CPU-ms a
# chunk to build and loses some recall (0.97 at 10k): built once the store passes this size.
ANN_ROWS = 50_000
_FIELDS = ("id", "source", "title", "start", "end", "page", "text", "tokens", "sha256")
VERIFY_ROWS = 4096  # chunks read at a time when every chunk is checked


def _lancedb() -> Any:
    # lance warns, when it lists indexes, that centroids will leave the statistics: take that now, quietly
    os.environ.setdefault("LANCE_INCLUDE_VECTOR_CENTROIDS", "false")
    try:
        import lancedb
    except ImportError:
        raise missing_extra("edgewise index", "lancedb", "index") from None
    return lancedb


class StoreDamaged(ConfigError):
    """The store's files cannot be read, or hold other bytes than were written: it must be rebuilt
    from the documents."""


class UnverifiedStore(UserWarning):
    """The store was written before edgewise kept checksums: damage to its chunks is not detected."""


def damaged(location: str, exc: BaseException) -> StoreDamaged:
    """The one-line error for a store that failed to read, naming the damaged file when it can."""
    message = re.sub(r",? */rustc/\S+", "", str(exc)).strip()[:200]
    return damaged_because(location, f"{_find_damage(location)}; {type(exc).__name__}: {message}")


def damaged_because(location: str, what: str) -> StoreDamaged:
    """The one-line error for a store found damaged: what is wrong, and the command that rebuilds it."""
    return StoreDamaged(f"the store at {location} is damaged ({what}): rebuild it from your files with: "
                        f"edgewise index PATH... --store {location} --rebuild")


def unverified_note(location: str) -> str:
    return (f"the store at {location} was written before edgewise kept checksums: the chunks retrieve and ask serve "
            f"are not checked; rebuild it to add them: edgewise index PATH... --store {location} --rebuild")


def _find_damage(location: str) -> str:
    """Which file of a local store is damaged: an empty one, else (with ``pylance``) the data file
    of the first fragment that fails to read; else which table failed is unknown."""
    if is_url(location):
        return "a file of the store cannot be read"
    root = Path(location)
    tables = [root / f"{name}.lance" for name in (CHUNKS, FILES, SETTINGS)]
    for table in tables:
        for f in sorted(table.rglob("*")) if table.is_dir() else ():
            if f.is_file() and f.stat().st_size == 0 and "_transactions" not in f.parts:
                return f"file {f} is empty"
    try:
        import lance
    except ImportError:
        return "a file of the store cannot be read"
    for table in tables:
        try:
            for fragment in lance.dataset(str(table)).get_fragments():
                try:
                    fragment.to_table(columns=["source"] if table.name != f"{SETTINGS}.lance" else ["json"])
                except Exception:  # noqa: BLE001 - any failure names this fragment's files
                    return "file " + ", ".join(str(table / "data" / d.path) for d in fragment.data_files()) + \
                        " cannot be read"
        except Exception:  # noqa: BLE001 - the table itself cannot be opened
            return f"table {table} cannot be opened"
    return "a file of the store cannot be read"


@contextmanager
def _reading(location: str) -> Iterator[None]:
    """Turn a failure of LanceDB to read the store into :class:`StoreDamaged`."""
    try:
        yield
    except EdgewiseError:
        raise
    except (OSError, RuntimeError, ValueError) as exc:
        raise damaged(location, exc) from None


def _quote(value: str) -> str:
    """A SQL string literal for a LanceDB filter."""
    return "'" + value.replace("'", "''") + "'"


def _storage_options(location: str) -> dict[str, str] | None:
    """Object-storage settings from the environment (an S3-compatible endpoint such as MinIO)."""
    if not location.startswith("s3://"):
        return None
    opts = {k: os.environ[e] for k, e in (("endpoint", "AWS_ENDPOINT_URL"), ("region", "AWS_REGION"),
                                          ("aws_access_key_id", "AWS_ACCESS_KEY_ID"),
                                          ("aws_secret_access_key", "AWS_SECRET_ACCESS_KEY")) if os.environ.get(e)}
    if opts.get("endpoint", "").startswith("http://"):
        opts["allow_http"] = "true"
    return opts or None


def _connect(lancedb: Any, loc: str) -> Any:
    if loc.startswith(("http://", "https://")):
        return lancedb.connect(namespace_client_impl="rest", namespace_client_properties={"uri": loc.rstrip("/")})
    opts = _storage_options(loc)
    return lancedb.connect(loc, storage_options=opts) if opts else lancedb.connect(loc)


def is_url(location: str | Path) -> bool:
    return isinstance(location, str) and "://" in location


class LanceStore:
    """A :class:`~edgewise.index.store.Store` on LanceDB."""

    def __init__(self, location: str, db: Any, settings: Settings, manifest: Manifest | None = None) -> None:
        self.location, self._db, self.settings = location, db, settings
        self._chunks = db.open_table(CHUNKS)
        self._files = db.open_table(FILES)
        #: whether each chunk carries its checksum (False: a store written before they were kept)
        self.checked = COLUMN in self._chunks.schema.names
        self._root = None if is_url(location) else Path(location)
        self._manifest = manifest
        self._writing = False  # this handle has written since its manifest was read
        self._intact: dict[str, tuple[int, str]] = {}  # files hashed and found as written, this run
        self.needs_finish = False  # set by verify(): the search index to be rebuilt, the files recorded anew

    @classmethod
    def open(cls, location: str | Path, *, settings: Settings | None = None, create: bool = False,
             rebuild: bool = False) -> LanceStore:
        lancedb = _lancedb()
        loc = str(location)
        if not is_url(loc):
            path = Path(loc)
            if path.exists() and not path.is_dir():
                raise InputError(f"store must be a folder or a URL, but {loc!r} is a file")
            if not create and not (path / f"{SETTINGS}.lance").exists():
                raise InputError(f"store {loc!r} holds no edgewise index; make one with: edgewise index PATH --store {loc}")
        try:
            db = _connect(lancedb, loc)
            names = set(_table_names(db))
        except (OSError, RuntimeError, ValueError) as exc:
            raise ConfigError(f"store {loc!r} cannot be opened: {type(exc).__name__}: {str(exc)[:200]}") from None
        manifest = None
        if rebuild:
            if not is_url(loc):  # first: a rebuild stopped half-way leaves no manifest to vouch for it
                integrity.remove_manifest(Path(loc))
            for name in (CHUNKS, FILES, SETTINGS):
                if name in names:
                    db.drop_table(name)
            names = set()
        if SETTINGS not in names:
            if not create:
                raise InputError(f"store {loc!r} holds no edgewise index; make one with: edgewise index PATH --store {loc}")
            if names & {CHUNKS, FILES}:
                raise ConfigError(f"store {loc!r} holds tables but no edgewise settings; index into an empty folder")
            if settings is None:
                raise ConfigError("a new store needs its settings")
            _create(db, settings)
            return cls(loc, db, settings)
        with _reading(loc):
            found = _read_settings(db, loc)
        check_settings(loc, found, settings)  # a store of another format or other settings: that first
        if not is_url(loc):  # the sizes of the files written (a stat each), before Lance reads the chunks
            try:
                manifest = integrity.read_manifest(Path(loc))
            except ValueError as exc:
                raise damaged_because(loc, str(exc)) from None
            problem = manifest and integrity.size_problem(Path(loc), manifest)
            if problem:
                raise damaged_because(loc, problem)
        try:
            store = cls(loc, db, found, manifest)
        except (OSError, RuntimeError, ValueError) as exc:  # damaged, or a Lance format newer than this lancedb
            raise damaged(loc, exc) from None
        if not store.checked and not create:
            warnings.warn(UnverifiedStore(unverified_note(loc)), stacklevel=3)
        return store

    # -- checking -----------------------------------------------------------------------------

    def verify(self) -> str | None:
        """Check the whole store, or raise :class:`StoreDamaged`; returns a note on what could not be
        checked, if anything. A local store whose manifest is the tables' last word: every recorded
        file's size and SHA-256. Otherwise (no manifest, a run that did not finish, another writer, a
        store at a URL) every chunk against its checksum; a local store's search index is then rebuilt
        and its files recorded anew by :meth:`finish` and :meth:`seal` (:attr:`needs_finish`)."""
        self.needs_finish = False
        note = None if self.checked else unverified_note(self.location)
        if self._root is None:
            self.verify_rows()
            return note
        manifest = self._manifest
        current = manifest is not None and manifest.complete and manifest.versions == self._versions()
        if manifest is not None:
            problem = integrity.file_problem(self._root, manifest, strict=current, verified=self._intact)
            if problem:
                raise damaged_because(self.location, problem)
        if not current:
            self.verify_rows()
            self.needs_finish = True
            if note is None and manifest is not None:
                note = (f"the store at {self.location} was last written by a run that did not finish (or by another "
                        "program): every chunk was checked against its checksum, and the search index is rebuilt")
        return note

    def verify_rows(self) -> None:
        """Check every chunk against the checksum written with it (none to check in a store from
        before checksums); :class:`StoreDamaged` names the first that differs."""
        if not self.checked:
            return
        with _reading(self.location):
            reader = self._chunks.search().select([*_FIELDS, "vector", COLUMN]).limit(None).to_batches(VERIFY_ROWS)
            for batch in reader:
                self._check_rows(batch)

    def _check_rows(self, batch: Any) -> None:
        """Every row of an Arrow record batch against its checksum."""
        cols = [batch.column(f).to_pylist() for f in _FIELDS]
        vec = batch.column("vector")
        flat = vec.flatten().to_numpy(zero_copy_only=False)
        stored = batch.column(COLUMN).to_pylist()
        if vec.null_count or len(flat) != len(batch) * DIM:  # a vector gone: no checksum can match
            i = next((i for i, v in enumerate(vec.to_pylist()) if v is None), 0)
            raise damaged_because(self.location, f"chunk {cols[0][i]!r} of {cols[1][i]} has lost its vector")
        sums = integrity.row_checksums(cols, flat.reshape(len(batch), DIM))
        for i, (want, got) in enumerate(zip(stored, sums)):
            if want != got:
                raise damaged_because(self.location, f"chunk {cols[0][i]!r} of {cols[1][i]} is not what was written: "
                                                     "its text, vector or place differs from its checksum")

    def _versions(self) -> dict[str, int]:
        with _reading(self.location):
            return {CHUNKS: int(self._chunks.version), FILES: int(self._files.version),
                    SETTINGS: int(self._db.open_table(SETTINGS).version)}

    def _begin(self) -> None:
        """Before the first write: mark the manifest unfinished, so a run stopped midway is noticed."""
        if self._writing:
            return
        self._writing = True
        if self._root is not None and self._manifest is not None and self._manifest.complete:
            self._manifest = Manifest(False, self._manifest.versions, self._manifest.files)
            integrity.write_manifest(self._root, self._manifest)

    def seal(self) -> None:
        """After a run's writes (and :meth:`finish`): record every file of a local store, its size and
        SHA-256, and the tables' versions, atomically. Nothing to do if nothing was written and the
        manifest is current."""
        if self._root is None or not (self._writing or self.needs_finish):
            return
        self._manifest = integrity.snapshot(self._root, (CHUNKS, FILES, SETTINGS), self._versions(), self._intact)
        integrity.write_manifest(self._root, self._manifest)
        self._writing = False

    # -- writing ------------------------------------------------------------------------------

    def sources(self) -> dict[str, str]:
        with _reading(self.location):
            rows = self._files.search().select(["source", "sha256"]).limit(None).to_list()
        return {r["source"]: r["sha256"] for r in rows}

    def audit(self) -> dict[str, str]:
        """Files whose chunks are not exactly what their record says, with why: chunks stored twice
        (two writers at once, before writers took the store's lock), chunks of another version or
        without a record (a run stopped between its writes), a record held twice. Reading every
        chunk's id also reads every data file: a damaged one raises :class:`StoreDamaged`."""
        with _reading(self.location):
            records = self._files.search().select(["source", "sha256", "chunks"]).limit(None).to_arrow().to_pylist()
            chunks = self._chunks.search().select(["id", "source", "sha256"]).limit(None).to_arrow()
        ids, sources, hashes = (chunks.column(c).to_pylist() for c in ("id", "source", "sha256"))
        bad: dict[str, str] = {}
        seen = {r["source"]: r for r in records}
        copies = Counter(ids)
        stored: Counter[str] = Counter(sources)
        doubled = Counter(s for i, s in zip(ids, sources) if copies[i] > 1)
        for src, sha in zip(sources, hashes):
            if src in bad:
                continue
            if src not in seen:
                bad[src] = "chunks are stored without a record of the file"
            elif doubled[src]:
                bad[src] = f"{doubled[src]} chunk rows share an id with another (chunks stored twice)"
            elif sha != seen[src]["sha256"]:
                bad[src] = "chunks of another version of the file are stored"
        for src, k in Counter(r["source"] for r in records).items():
            if k > 1:
                bad.setdefault(src, "the file is recorded more than once")
        for src, r in seen.items():
            if src not in bad and stored[src] != r["chunks"]:
                bad[src] = f"{stored[src]} chunks are stored, but the record says {r['chunks']}"
        return bad

    def replace_sources(self, files: Sequence[tuple[str, str, Sequence[Row]]]) -> None:
        """Make each ``(source, sha256, rows)``'s rows the chunks of its file, in one write per table
        (a write per file would leave a fragment per file behind)."""
        if not files:
            return
        # every file's old chunks go, known or not: a run stopped between the two tables' writes
        # leaves chunks whose file row is missing, and they must not be doubled
        self.delete_sources([s for s, _, _ in files])
        rows = [r for _, _, group in files for r in group]
        with _reading(self.location):
            if rows:
                self._chunks.add(_arrow(rows, self.checked))
            self._files.add([{"source": s, "sha256": h, "chunks": len(group)} for s, h, group in files])

    def delete_sources(self, sources: Sequence[str]) -> None:
        if sources:
            self._begin()
        for i in range(0, len(sources), 500):  # one filter per 500 paths keeps the SQL small
            where = f"source IN ({', '.join(_quote(s) for s in sources[i:i + 500])})"
            with _reading(self.location):
                self._chunks.delete(where)
                self._files.delete(where)

    def finish(self) -> None:
        """After a batch of writes: rebuild the full-text index (and the ANN index past ANN_ROWS),
        and compact the tables' fragments."""
        self._begin()
        with _reading(self.location):
            self._finish()

    def _finish(self) -> None:
        from lancedb.index import FTS

        n = self._chunks.count_rows()
        if n:
            self._chunks.create_index("text", config=FTS(), replace=True)
        if n > ANN_ROWS and not any(i.columns == ["vector"] for i in self._chunks.list_indices()):
            from lancedb.index import IvfHnswSq

            self._chunks.create_index("vector", config=IvfHnswSq(distance_type="cosine"))
        for table in (self._chunks, self._files):
            try:
                table.optimize()
            except (AttributeError, NotImplementedError):  # remote tables optimise themselves
                pass

    def count(self) -> int:
        with _reading(self.location):
            return int(self._chunks.count_rows())

    # -- reading ------------------------------------------------------------------------------

    def dense(self, vector: Any, k: int) -> list[str]:
        q = self._chunks.search(list(map(float, vector)), vector_column_name="vector").distance_type("cosine")
        with _reading(self.location):
            return [r["id"] for r in q.limit(k).select(["id", "_distance"]).to_list()]

    def lexical(self, query: str, k: int) -> list[str]:
        from lancedb.query import MatchQuery

        if not query.strip() or not self.count():
            return []
        q = self._chunks.search(MatchQuery(query, "text"), query_type="fts")
        with _reading(self.location):
            return [r["id"] for r in q.limit(k).select(["id", "_score"]).to_list()]

    def get(self, ids: Sequence[str]) -> list[Row]:
        """The chunks with these ids, each checked against its checksum (:class:`StoreDamaged` if
        one differs; a store from before checksums is read unchecked)."""
        if not ids:
            return []
        where = f"id IN ({', '.join(_quote(i) for i in ids)})"
        columns = [*_FIELDS, "vector", COLUMN] if self.checked else list(_FIELDS)
        with _reading(self.location):
            found = self._chunks.search().where(where).select(columns).limit(len(ids)).to_arrow()
        if self.checked:
            for batch in found.to_batches():
                self._check_rows(batch)
        return [Row(**{f: r[f] for f in _FIELDS}) for r in found.select(list(_FIELDS)).to_pylist()]


def _table_names(db: Any) -> list[str]:
    listed = db.list_tables() if hasattr(db, "list_tables") else db.table_names()
    names = getattr(listed, "tables", listed)
    return list(names)


def _chunk_schema(checked: bool = True) -> Any:
    """The chunks table's columns; ``checked=False``: a store's from before checksums were kept."""
    import pyarrow as pa

    return pa.schema([("id", pa.string()), ("source", pa.string()), ("title", pa.string()), ("start", pa.int64()),
                      ("end", pa.int64()), ("page", pa.int32()), ("text", pa.string()), ("tokens", pa.int32()),
                      ("sha256", pa.string()), ("vector", pa.list_(pa.float32(), DIM))]
                     + ([(COLUMN, pa.string())] if checked else []))


def _create(db: Any, settings: Settings) -> None:
    import pyarrow as pa

    files = pa.schema([("source", pa.string()), ("sha256", pa.string()), ("chunks", pa.int32())])
    db.create_table(CHUNKS, schema=_chunk_schema())
    db.create_table(FILES, schema=files)
    # written last: a store without its settings row is not an index (an interrupted first run is redone)
    db.create_table(SETTINGS, data=[{"json": json.dumps(settings.to_dict())}])


def _read_settings(db: Any, loc: str) -> Settings:
    try:
        rows = db.open_table(SETTINGS).search().limit(2).to_list()
        data = json.loads(rows[0]["json"])
        return Settings.from_dict(data)
    except (IndexError, KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f"store {loc!r} has unreadable settings ({type(exc).__name__}: {exc}); "
                          "re-index it with --rebuild") from None


def _arrow(rows: Sequence[Row], checked: bool = True) -> Any:
    """Rows as one Arrow table (vectors as one float32 block, not a Python float per element), each
    with its checksum (``checked``)."""
    import numpy as np
    import pyarrow as pa

    vectors = np.asarray([r.vector for r in rows], dtype=np.float32)
    if vectors.shape != (len(rows), DIM):
        raise InputError(f"vectors must be {DIM}-dimensional, but got shape {vectors.shape}")
    values = [[getattr(r, f) for r in rows] for f in _FIELDS]
    columns = [pa.array(v) for v in values]
    columns.append(pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), DIM))
    if checked:
        columns.append(pa.array(integrity.row_checksums(values, vectors)))
    return pa.Table.from_arrays(columns, schema=_chunk_schema(checked))




def open_store(location: str | Path, *, settings: Settings | None = None, create: bool = False,
               rebuild: bool = False) -> LanceStore:
    """Open the store at ``location`` (a folder, or a URL LanceDB opens); ``create`` makes a new one
    with ``settings``. An existing store must have been written with ``settings`` (when given)."""
    return LanceStore.open(location, settings=settings, create=create, rebuild=rebuild)


__all__ = ["ANN_ROWS", "FORMAT", "LanceStore", "StoreDamaged", "UnverifiedStore", "is_url", "open_store"]
