"""Third-party plugins, installed with pip, found through entry points, listed and used.

The packages in tests/plugin_pkg are installed with this interpreter's pip (offline: no index, no
build isolation, the venv's setuptools builds them) into a temporary directory, and edgewise runs
in a subprocess with that directory on PYTHONPATH: real distributions with real entry-point
metadata, while the shared venv and this test process never see them (so no other test can be
disturbed, and deleting the directory uninstalls them even after a crash).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from edgewise.registry import describe

from ..conftest import TESTS

pytestmark = pytest.mark.slow  # builds and installs two packages with pip (~10 s)

PKG = TESTS / "plugin_pkg"
DEMO = "edgewise-plugin-demo"
BROKEN = "edgewise-plugin-broken"
# What the demo package adds to each registry, as `describe()` lists it (name, source).
DEMO_ENTRIES = {
    "orders": [("plugin-reverse-pairs", DEMO), ("plugin-rotate:N", DEMO)],
    "layouts": [("plugin-plain", DEMO)],
    "scorers": [("plugin-overlap", DEMO)],
    "tokenizers": [("plugin-bytes", DEMO)],
    "models": [],
    "backends": [("plugin-echo", DEMO)],
    "tasks": [],
    "metrics": [("plugin-contains", DEMO)],
}
CHUNKS = ["alpha beta", "gamma delta", "capital of france paris", "capital city"]
PLUGIN_OPTIONS = {"order": "plugin-reverse-pairs", "layout": "plugin-plain", "scorer": "plugin-overlap",
                  "tokenizer": "plugin-bytes"}
# plugin-overlap ranks chunk-2 (3 query words), chunk-3 (1), chunk-0, chunk-1 (0, input order);
# plugin-reverse-pairs swaps neighbours: ranks 1, 0, 3, 2; plugin-plain renders "#id" + quoted text.
FULL_PROMPT = ("#chunk-3\n  capital city\n#chunk-2\n  capital of france paris\n#chunk-1\n  gamma delta\n"
               "#chunk-0\n  alpha beta\nQ:\n  capital of france")


def _install(name: str, tmp: Path) -> Path:
    src, site = tmp / f"{name}-src", tmp / f"{name}-site"
    shutil.copytree(PKG / name, src)  # build from a copy: setuptools writes build/ and *.egg-info beside it
    cmd = [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index",
           "--disable-pip-version-check", "--quiet", "--target", str(site), str(src)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return site


def _builds_wheels() -> bool:
    """Whether this venv's setuptools builds wheels offline (setuptools 70.1 or later, or ``wheel``)."""
    try:
        return (importlib.util.find_spec("setuptools.command.bdist_wheel") is not None
                or importlib.util.find_spec("wheel") is not None)
    except ModuleNotFoundError:  # no setuptools at all
        return False


@pytest.fixture(scope="module")
def sites(tmp_path_factory):
    if not _builds_wheels():
        pytest.skip("builds the plugins with this venv's setuptools, which cannot build a wheel: "
                    "pip install 'setuptools>=70.1'")
    tmp = tmp_path_factory.mktemp("plugins")
    installed = {name: _install(name, tmp) for name in ("demo", "broken")}
    yield installed
    for site in installed.values():  # uninstall: the packages exist only in these directories
        shutil.rmtree(site)


def run(sites: list[Path], *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """``python -W default *args`` with the given plugin directories importable."""
    path = [str(s) for s in sites] + [p for p in [os.environ.get("PYTHONPATH")] if p]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path), "PYTHONIOENCODING": "utf-8"}
    return subprocess.run([sys.executable, "-W", "default", *args], capture_output=True, text=True, env=env, cwd=cwd)


def test_plugins_are_listed_with_the_distribution_they_come_from(sites):
    builtin = describe()  # this process has no plugins: the built-ins alone
    expected = {kind: [list(e) for e in entries + DEMO_ENTRIES[kind]] for kind, entries in builtin.items()}
    done = run([sites["demo"]], "-c", "import json; from edgewise.registry import describe; print(json.dumps(describe()))")
    assert (done.returncode, done.stderr) == (0, "")
    assert json.loads(done.stdout) == expected


def test_edgewise_list_shows_plugins_and_their_source(sites):
    def line(kind: str, entries: list[tuple[str, str]]) -> str:
        return f"{kind}: " + ", ".join(n if s == "edgewise" else f"{n} ({s})" for n, s in entries)

    from edgewise.cli.pack import _profiles_text

    expected = [line(kind, entries + DEMO_ENTRIES[kind]) for kind, entries in describe().items()]
    done = run([sites["demo"]], "-m", "edgewise", "list")
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.splitlines() == expected + _profiles_text().splitlines()  # then the position profiles


def test_pack_uses_a_plugin_order_layout_scorer_and_tokenizer(sites):
    code = f"""
import json, edgewise
from edgewise.eval.backends import get_backend
from edgewise.eval.metrics import get_metric
out = {{}}
for budget in (200, 75):
    p = edgewise.pack("capital of france", {CHUNKS!r}, budget=budget, **{PLUGIN_OPTIONS!r})
    d = p.debug_info
    out[budget] = [p.prompt, d.order, [x["id"] for x in d.dropped], d.prompt_tokens, len(p.prompt.encode()),
                   [d.strategy, d.layout, d.scorer, d.tokenizer]]
out["rotate"] = edgewise.reorder(list("abcde"), "plugin-rotate:2")
try:
    edgewise.reorder(list("abc"), "plugin-rotate")
except edgewise.ConfigError as exc:
    out["rotate-no-arg"] = str(exc)
backend = get_backend("plugin-echo", model="m")
out["backend"] = [backend.complete("x\\ny", max_tokens=5, stop=[]).text, backend.describe()]
out["metric"] = get_metric("plugin-contains")("it is Paris", ["Paris"])
print(json.dumps(out))
"""
    done = run([sites["demo"]], "-c", code)
    assert (done.returncode, done.stderr) == (0, "")
    names = ["plugin-reverse-pairs", "plugin-plain", "plugin-overlap", "plugin-bytes"]
    small = "#chunk-2\n  capital of france paris\nQ:\n  capital of france"
    assert json.loads(done.stdout) == {
        "200": [FULL_PROMPT, ["chunk-3", "chunk-2", "chunk-1", "chunk-0"], [], 126, 126, names],
        "75": [small, ["chunk-2"], ["chunk-0", "chunk-1", "chunk-3"], 57, 57, names],
        "rotate": ["c", "d", "e", "a", "b"],
        "rotate-no-arg": "order 'plugin-rotate' needs an argument: plugin-rotate:N",
        "backend": ["y", {"backend": "plugin-echo", "model": "m"}],
        "metric": 1.0,
    }


def test_the_cli_packs_with_plugins(sites, tmp_path):
    (tmp_path / "chunks.json").write_text(json.dumps(CHUNKS))
    flags = [x for k, v in PLUGIN_OPTIONS.items() for x in (f"--{k}", v)]
    done = run([sites["demo"]], "-m", "edgewise", "pack", "-q", "capital of france", "-c", "chunks.json", *flags,
               cwd=tmp_path)
    assert (done.returncode, done.stderr, done.stdout) == (0, "", FULL_PROMPT + "\n")
    done = run([sites["demo"]], "-m", "edgewise", "pack", "-q", "q", "-c", "chunks.json", "--order", "plugin-rotate",
               cwd=tmp_path)
    assert (done.returncode, done.stdout, done.stderr) == (
        2, "", "edgewise: error: order 'plugin-rotate' needs an argument: plugin-rotate:N\n")


def test_a_broken_plugin_warns_and_breaks_nothing(sites):
    both = [sites["demo"], sites["broken"]]
    done = run(both, "-c", "import sys, edgewise; print(sorted(m for m in sys.modules if m.startswith('edgewise_plugin')))")
    assert (done.returncode, done.stdout, done.stderr) == (0, "[]\n", "")  # plugins load on first use only

    code = "import edgewise; print(edgewise.reorder(list('abcd'), 'edges'), edgewise.reorder(list('abcd'), 'plugin-reverse-pairs'))"
    done = run(both, "-c", code)
    assert (done.returncode, done.stdout) == (0, "['a', 'c', 'd', 'b'] ['b', 'a', 'd', 'c']\n")
    warned = [line.split("PluginWarning: ", 1)[1] for line in done.stderr.splitlines() if "PluginWarning: " in line]
    assert sorted(warned) == [
        f"order plugin 'edges' from {BROKEN} (edgewise_plugin_broken:edges) was not loaded: "
        "order 'edges' is already registered by edgewise (edgewise.order.edges); choose another name",
        f"order plugin 'plugin-broken' from {BROKEN} (edgewise_plugin_broken.needs_frobnicate:strategy) was not "
        "loaded: ModuleNotFoundError: No module named 'frobnicate'",
    ]
    # the layouts registry reads its own group when first used, and skips the bad entry the same way
    done = run(both, "-c", "import edgewise; print(edgewise.layout.layout_names())")
    assert (done.returncode, done.stdout) == (0, "['sections', 'layered', 'paper', 'kv', 'template:FILE', 'plugin-plain']\n")
    warned = [line.split("PluginWarning: ", 1)[1] for line in done.stderr.splitlines() if "PluginWarning: " in line]
    assert warned == [
        f"layout plugin 'plugin-typo' from {BROKEN} (edgewise_plugin_broken:no_such_layout) was not loaded: "
        "AttributeError: module 'edgewise_plugin_broken' has no attribute 'no_such_layout'"
    ]
