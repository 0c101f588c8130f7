import gzip
import json
import os
from pathlib import Path

import pytest
from hypothesis import settings

ROOT = Path(__file__).resolve().parents[1]
# The shared evaluation data sits beside the project (../shared/data); EDGEWISE_DATA overrides it.
DATA = Path(os.environ.get("EDGEWISE_DATA", ROOT.parent / "shared" / "data"))

settings.register_profile("edgewise", deadline=None, print_blob=True)
settings.load_profile("edgewise")


@pytest.fixture(scope="session")
def nq_rows():
    """The first 200 rows of the shared NaturalQuestions dev file."""
    rows = []
    with gzip.open(DATA / "nq-open-oracle-dev.jsonl.gz", "rt", encoding="utf-8") as f:
        for line in f:
            rows.append(json.loads(line))
            if len(rows) == 200:
                break
    return rows


@pytest.fixture(scope="session")
def example():
    query = (ROOT / "examples" / "query.txt").read_text(encoding="utf-8").strip()
    chunks = json.loads((ROOT / "examples" / "chunks.json").read_text(encoding="utf-8"))
    return query, chunks
