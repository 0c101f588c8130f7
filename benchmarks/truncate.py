"""Cutting a text to its first N tokens: from a prefix of it (``countcache.token_head``) against
encoding all of it, in the same run.

Two measures, CPU time:

- **cuts**: ``get_tokenizer(NAME).truncate(passage, n)`` for each of ``--passages`` NQ passages
  (those over 500 characters, ~150 tokens) at each ``n`` of ``--cuts``, against the same cut made
  from all of the passage's ids (encode it whole, decode the first ``n``, step back while the prefix
  re-encodes to more than ``n``: what ``truncate`` did before). Each passage is cut once, fresh, by
  one of the two, alternately (a text just encoded encodes faster again); median µs per cut. Every
  passage's two cuts must be equal (the script stops otherwise).
- **index chunking**: ``edgewise.index.chunking.split_text(text, tok, size=256, overlap=32)`` on
  one text of ``--words`` NQ words with the periods taken out (one "sentence", so every chunk is
  cut from the rest of it with ``truncate``: logs, tables and code read like this), with this
  checkout and, given ``--against CHECKOUT``, that checkout's ``split_text`` (loaded as in
  ``benchmarks/pack_band.py``), alternately, ``--reps`` times; median ms. The pieces must be equal.

    .venv/bin/python benchmarks/truncate.py [--tokenizer cl100k_base] [--cuts 8,32,64,128]
        [--passages 1000] [--words 5000,20000,80000] [--reps 3] [--against CHECKOUT] [--data FILE|DIR]
"""

from __future__ import annotations

import argparse
import functools
import gzip
import importlib
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from pack_band import _commit, load_other  # noqa: E402

import edgewise  # noqa: E402
from edgewise.eval.data import data_path  # noqa: E402
from edgewise.index.chunking import split_text  # noqa: E402
from edgewise.tokens.tokenizers import get_tokenizer  # noqa: E402


def cut_from_all_ids(tok: Any, text: str, n: int) -> str:
    """A cut made from every id of the text (``truncate`` before it read a prefix)."""
    return tok.cut_from_ids(text, tok.encode(text), n)


def cpu_ms(fn: Any, *args: Any, **kwargs: Any) -> tuple[float, Any]:
    start = time.process_time()
    out = fn(*args, **kwargs)
    return (time.process_time() - start) * 1000, out


def main(argv: list[str] | None = None) -> dict[str, list[list[str]]]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokenizer", default="cl100k_base")
    parser.add_argument("--cuts", default="8,32,64,128")
    parser.add_argument("--passages", type=int, default=1000)
    parser.add_argument("--words", default="5000,20000,80000")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--against", help="another checkout: its split_text is timed alternately")
    parser.add_argument("--data", help="nq-open-oracle-dev.jsonl.gz or its folder (default: $EDGEWISE_DATA, ../shared/data)")
    a = parser.parse_args(argv)
    other = load_other(Path(a.against)) if a.against else None
    with gzip.open(data_path("nq-open-oracle-dev.jsonl.gz", a.data), "rt", encoding="utf-8") as f:
        passages = [json.loads(line)["ctxs"][0]["text"] for line in f]
    words = " ".join(passages).replace(".", "").split()
    passages = [p for p in passages if len(p) > 500][: a.passages]
    tok = get_tokenizer(a.tokenizer)
    print(f"this: {_commit(Path(edgewise.__file__))}" + (f"\nother: {_commit(Path(other.__file__))}" if other else ""))
    print(f"{a.tokenizer}; CPU time; {len(passages)} passages of over 500 characters\n")

    cut_rows = []
    for n in (int(x) for x in a.cuts.split(",")):
        # every passage is cut once, fresh, by one of the two (alternately): a text just encoded is
        # encoded faster again, so cutting the same passage both ways would favour the second
        times: dict[bool, list[float]] = {True: [], False: []}
        for i, p in enumerate(passages):
            head = i % 2 == 0
            ms, _ = cpu_ms(tok.truncate if head else functools.partial(cut_from_all_ids, tok), p, n)
            times[head].append(ms * 1000)
        if [tok.truncate(p, n) for p in passages] != [cut_from_all_ids(tok, p, n) for p in passages]:
            raise SystemExit(f"cuts differ at n={n}")
        mine, theirs = statistics.median(times[True]), statistics.median(times[False])
        cut_rows.append([str(n), f"{mine:.1f}", f"{theirs:.1f}", f"{mine / theirs:.2f}×"])
    print("cuts: median µs per cut, each passage cut once (half by truncate, half from all ids); the cuts are equal\n")
    print(markdown(["tokens kept", "truncate µs", "from all ids µs", "ratio"], cut_rows))

    split_rows = []
    for n_words in (int(x) for x in a.words.split(",")):
        text = " ".join(words[:n_words])
        mine: list[float] = []
        theirs: list[float] = []
        for _ in range(a.reps):
            tok._cache.clear()  # noqa: SLF001 - cold: no count kept from the last repetition
            ms, pieces = cpu_ms(split_text, text, tok, size=256, overlap=32)
            mine.append(ms)
            if other is not None:
                otok = other.tokens.get_tokenizer(a.tokenizer)
                other_split = importlib.import_module("edgewise_other.index.chunking").split_text
                otok._cache.clear()  # noqa: SLF001
                oms, opieces = cpu_ms(other_split, text, otok, size=256, overlap=32)
                theirs.append(oms)
                if [(p.start, p.end, p.tokens) for p in pieces] != [(p.start, p.end, p.tokens) for p in opieces]:
                    raise SystemExit(f"pieces differ at {n_words} words")
        row = [f"{n_words:,}", f"{len(text):,}", str(len(pieces)), f"{statistics.median(mine):,.0f}"]
        if other is not None:
            row.append(f"{statistics.median(theirs):,.0f}")
        split_rows.append(row)
    print(f"\nindex chunking (size 256, overlap 32) of one unpunctuated text: median ms of {a.reps}\n")
    header = ["words", "characters", "chunks", "this ms"] + (["other ms"] if other else [])
    print(markdown(header, split_rows))
    return {"cuts": cut_rows, "split": split_rows}


def markdown(header: list[str], rows: list[list[str]]) -> str:
    def line(cells: list[str]) -> str:
        return "| " + " | ".join(cells) + " |"

    return "\n".join([line(header), line(["---"] * len(header)), *map(line, rows)])


if __name__ == "__main__":
    main()
