import gzip
import json
import os
import subprocess
from pathlib import Path

import pytest
from hypothesis import settings

ROOT = Path(__file__).resolve().parents[1]
NEEDED = ("nq-open-oracle-dev.jsonl.gz", "kv-retrieval-75_keys.jsonl.gz")


def _find_data() -> Path:
    """The shared evaluation data: $EDGEWISE_DATA, else ../shared/data beside the checkout, else
    beside the repository this one was cloned from (a scratch clone made elsewhere)."""
    if os.environ.get("EDGEWISE_DATA"):
        return Path(os.environ["EDGEWISE_DATA"])
    candidates = [ROOT.parent / "shared" / "data"]
    origin = subprocess.run(["git", "-C", str(ROOT), "config", "--get", "remote.origin.url"],
                            capture_output=True, text=True).stdout.strip()
    if origin and Path(origin).is_dir():
        candidates.append(Path(origin).resolve().parent / "shared" / "data")
    return next((c for c in candidates if c.is_dir()), candidates[0])


DATA = _find_data()
# the library and the CLI subprocesses the tests start resolve the same folder
os.environ["EDGEWISE_DATA"] = str(DATA)


def pytest_configure(config):
    missing = [name for name in NEEDED if not (DATA / name).is_file()]
    if missing:
        raise pytest.UsageError(
            f"the shared evaluation data must be in ../shared/data beside the checkout or in $EDGEWISE_DATA, "
            f"but {DATA} lacks {', '.join(missing)}"
        )

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
