"""Check the word bound against the exact count over the whole evaluation corpus, and how tight it is.

``select.fit`` drops a chunk without encoding it when ``Tokenizer.lower_bound`` (its words, see
``edgewise.tokens.tokenizers.words_bound``) already exceeds the tokens left. ``tests/tokens/test_lower_bound.py``
checks the bound on the data bundled with the tests; this script checks it on the full evaluation
data (every NaturalQuestions question, title and passage; every key-value record of the 75-key
file, as JSON and as ``key value``), for cl100k and o200k, and on each text as a ``sections``
block. It prints the texts checked, the violations (must be 0; the exit status is 1 otherwise), and
the bound's share of the exact count.

    .venv/bin/python benchmarks/lower_bound.py [--data FILE|DIR]
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import time

from edgewise.chunk import Chunk
from edgewise.eval.data import data_path
from edgewise.layout import Item, get_layout
from edgewise.tokens.tokenizers import get_tokenizer

BIG = 10**9


def corpus(data: str | None) -> dict[str, list[str]]:
    nq, kv = [], []
    with gzip.open(data_path("nq-open-oracle-dev.jsonl.gz", data), "rt", encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            nq.append(row["question"])
            for ctx in row["ctxs"]:
                nq += [ctx["title"], ctx["text"]]
    with gzip.open(data_path("kv-retrieval-75_keys.jsonl.gz", data), "rt", encoding="utf-8") as f:
        for line in f:
            records = json.loads(line)["ordered_kv_records"]
            kv.append(json.dumps(records))
            kv += [f"{k} {v}" for k, v in records]
    return {"nq": nq, "kv": kv}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", help="a data file or the folder holding both (default: $EDGEWISE_DATA, ../shared/data)")
    args = ap.parse_args(argv)
    texts = corpus(args.data)
    sections = get_layout("sections")
    print("| encoding | corpus | what | texts | exact tokens | bound | bound / exact | violations | seconds |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    bad = 0
    for name in ("cl100k_base", "o200k_base"):
        tok = get_tokenizer(name)
        for label, items in texts.items():
            for what in ("text", "block"):
                start = time.perf_counter()
                subject = items if what == "text" else [
                    sections.block(Item(Chunk(f"c{i}", t), "whole", t, i)) + "\n" for i, t in enumerate(items)]
                exact = [len(ids) for ids in tok.encoding.encode_ordinary_batch(subject)]
                bound = [tok.lower_bound(t, BIG) for t in items]
                violations = sum(b > n for b, n in zip(bound, exact))
                bad += violations
                print(f"| {name} | {label} | {what} | {len(items):,} | {sum(exact):,} | {sum(bound):,} | "
                      f"{sum(bound) / sum(exact):.3f} | {violations} | {time.perf_counter() - start:.1f} |")
    print("\nno violation: the bound never exceeds the exact count" if not bad else f"\n{bad} VIOLATIONS")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
