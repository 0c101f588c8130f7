import gzip
import json
import os
import signal
from pathlib import Path

import pytest
from hypothesis import settings

ROOT = Path(__file__).resolve().parents[1]
# The evaluation data the tests need ships with them (tests/data/README.md says what and from where),
# so the suite never depends on a folder outside the checkout. The library and every CLI subprocess
# the tests start resolve their data through $EDGEWISE_DATA: point it here, whatever it was.
TESTS = ROOT / "tests"
DATA = TESTS / "data"
NEEDED = ("nq-open-oracle-dev.jsonl.gz", "kv-retrieval-75_keys.jsonl.gz")
os.environ["EDGEWISE_DATA"] = str(DATA)
# Haystack would report every Pipeline.run to its telemetry service: tests reach only loopback
os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")
# not test modules: the plugin packages a test installs into a venv, and the data
collect_ignore = ["plugin_pkg", "data"]


# The fast tier (``-m "not slow ..."``) draws a quarter of each property's examples; ``make test`` draws
# them all. Set in pytest_configure, which runs before any test module is imported.
FAST_TIER = False


def examples(n: int) -> int:
    """The hypothesis ``max_examples`` of a property that draws ``n`` examples in the whole suite."""
    return max(20, n // 4) if FAST_TIER else n


def pytest_configure(config):
    global FAST_TIER
    FAST_TIER = "not slow" in (config.getoption("markexpr") or "")
    missing = [name for name in NEEDED if not (DATA / name).is_file()]
    if missing:
        raise pytest.UsageError(f"the test data must be in {DATA}, but it lacks {', '.join(missing)}")
    # a suite started as a background job (bash's `cmd &`) inherits SIGINT ignored, and so would every
    # subprocess it starts: the Ctrl-C tests need what a terminal gives a process
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


settings.register_profile("edgewise", deadline=None, print_blob=True)
settings.load_profile("edgewise")


@pytest.fixture(scope="session")
def nq_rows():
    """The first 200 rows of the NaturalQuestions dev file in tests/data."""
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
