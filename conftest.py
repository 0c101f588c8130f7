"""Collection rules for ``pytest src tests`` (the doctests in src/ and the tests).

- Modules whose framework or model library is not installed are not collected as doctests (their
  import would fail); the suite reports them as skipped with the install command.
- Doctests that run an ONNX model belong to the ``models`` tier, like the tests that do.
"""

import atexit
import importlib.util
import os
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
SRC = HERE / "src" / "edgewise"
# module (relative to src/edgewise) -> (import it needs, extra that brings it)
NEEDS = {
    "integrations/haystack.py": ("haystack", "haystack"),
    "integrations/langchain.py": ("langchain_core", "langchain"),
    "integrations/llamaindex.py": ("llama_index.core", "llamaindex"),
    "score/dense.py": ("onnxruntime", "models"),
    "score/static.py": ("onnxruntime", "models"),
    "score/hybrid.py": ("onnxruntime", "models"),
    "score/cross.py": ("onnxruntime", "models"),
    "score/onnx.py": ("onnxruntime", "models"),
}
MODEL_DOCTESTS = {"score/dense.py", "score/static.py", "score/hybrid.py", "score/cross.py", "score/onnx.py"}


def _missing(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is None
    except ModuleNotFoundError:
        return True


_SKIPPED = {rel: extra for rel, (module, extra) in NEEDS.items() if _missing(module)}
collect_ignore = [str(SRC / rel) for rel in _SKIPPED]


def pytest_collection_modifyitems(config, items):
    for item in items:
        path = Path(str(item.fspath))
        if path.is_relative_to(SRC) and path.relative_to(SRC).as_posix() in MODEL_DOCTESTS:
            item.add_marker(pytest.mark.models)


def pytest_terminal_summary(terminalreporter):
    for rel, extra in sorted(_SKIPPED.items()):
        terminalreporter.write_line(
            f"SKIPPED doctests of src/edgewise/{rel}: needs {NEEDS[rel][0]} (pip install -e '.[{extra}]')")


# The native libraries the suite loads in one process (llama.cpp, onnxruntime, Lance, Ray, pyarrow)
# have now and then crashed the interpreter's own teardown, after every test had passed and the
# summary was printed (SIGSEGV at exit, seen once in two identical runs of the whole suite on an
# x86-64 VM). The main pytest process therefore leaves with the session's exit status once pytest
# has returned and printed everything (the first exit handler to run), skipping that teardown.
_STATUS: dict[str, int] = {}


def pytest_sessionfinish(session, exitstatus):
    _STATUS["exit"] = int(exitstatus)


def _leave() -> None:
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            stream.flush()
        except (AttributeError, ValueError, OSError):  # closed or replaced
            pass
    os._exit(_STATUS["exit"])


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    if "exit" in _STATUS and not hasattr(config, "workerinput"):  # not inside a pytest-xdist worker
        atexit.register(_leave)  # registered last: runs before every other exit handler
