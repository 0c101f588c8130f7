"""Every text of the bundled evaluation data, for tests that hold a counter to tiktoken over it."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

DATA = Path(__file__).parent / "data"


def bundled_texts() -> list[str]:
    """Each NQ question, passage title and passage text, then each key-value record set as JSON."""
    out: list[str] = []
    with gzip.open(DATA / "nq-open-oracle-dev.jsonl.gz", "rt", encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            out += [row["question"], *(c["title"] for c in row["ctxs"]), *(c["text"] for c in row["ctxs"])]
    with gzip.open(DATA / "kv-retrieval-75_keys.jsonl.gz", "rt", encoding="utf-8") as f:
        out += [json.dumps(json.loads(line)["ordered_kv_records"]) for line in f]
    return out
