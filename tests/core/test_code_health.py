"""The shape of the code: layers that import only downwards, no import cycles, a short top level,
functions a screen long, ruff clean, options defined once."""

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ..conftest import ROOT

SRC = ROOT / "src"
PKG = SRC / "edgewise"
MAX_TOP_LEVEL = 12  # modules directly in src/edgewise/: the rest lives in a package named for its concept
MAX_FUNCTION_LINES = 60  # a screen: a function's body, its docstring not counted

# Each unit (a top-level module or a package of src/edgewise/) may import units of its own layer or
# below, never above. Lazy imports inside functions count too. The LLM clients (llm) need only the
# errors, the checks and the assembled models: prune, eval and index build on them.
LAYERS = [
    {"errors", "compiled"},
    {"checks", "registry", "files", "jsonin", "raysupport", "bundled"},
    {"chunk", "tokens", "llm"},
    {"options", "order", "layout", "catalog", "score"},
    {"prune"},
    {"packing"},
    {"eval", "integrations"},
    {"index", "batch", "serve"},
    {"cli"},
]
ENTRY_POINTS = {"edgewise", "edgewise.__main__", "edgewise.serve.__main__"}  # the package root and `python -m`
# Inside serve, the same rule between its parts: the shared settings and error bodies; the
# connections and request limits; the edgewise HTTP API; the OpenAI-compatible proxy (which packs
# with the API's options, cost and work); and what assembles and runs them all.
SERVE_LAYERS = [
    {"edgewise.serve.errors", "edgewise.serve.config"},
    {"edgewise.serve.transport"},
    {"edgewise.serve.api"},
    {"edgewise.serve.proxy"},
    {"edgewise.serve", "edgewise.serve.app", "edgewise.serve.server", "edgewise.serve.ray_serve",
     "edgewise.serve.__main__"},
]


def _modules() -> dict[str, Path]:
    out = {}
    for path in PKG.rglob("*.py"):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _imports(name: str, path: Path, modules: dict[str, Path], *, top_level_only: bool) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    found = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
        else:
            continue
        found |= {t for t in targets if t in modules and t != name}
    return found


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def _graph(top_level_only: bool) -> dict[str, set[str]]:
    modules = _modules()
    graph = {m: _imports(m, p, modules, top_level_only=top_level_only) for m, p in modules.items()}
    # a package importing its own submodules (to register them) is how packages work, not a cycle
    return {m: {t for t in deps if not t.startswith(m + ".")} for m, deps in graph.items()}


def test_no_import_cycles_at_import_time():
    assert _cycle(_graph(top_level_only=True)) is None


def test_no_import_cycles_even_through_lazy_imports():
    assert _cycle(_graph(top_level_only=False)) is None


def test_the_cycle_finder_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]


def _unit(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "edgewise"


def _layer_of() -> dict[str, int]:
    return {unit: i for i, layer in enumerate(LAYERS) for unit in layer}


def test_every_unit_has_a_layer():
    units = {_unit(m) for m in _modules()} - {"edgewise", "__main__"}
    assert sorted(units - set(_layer_of())) == []


def _upward(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    layer = _layer_of()
    return sorted((m, t) for m, deps in graph.items() if m not in ENTRY_POINTS
                  for t in deps if t != "edgewise" and layer[_unit(t)] > layer[_unit(m)])


def test_imports_go_down_the_layers():
    assert _upward(_graph(top_level_only=False)) == []


def test_the_layer_test_finds_an_upward_import():
    graph = {"edgewise.tokens.cache": {"edgewise.packing.budget", "edgewise.errors"},
             "edgewise.packing.budget": {"edgewise.tokens.cache"}, "edgewise.cli.pack": {"edgewise.serve.app"}}
    assert _upward(graph) == [("edgewise.tokens.cache", "edgewise.packing.budget")]


def _serve_layer(module: str) -> int | None:
    """The SERVE_LAYERS index of a module of serve (its own entry, else its subpackage's)."""
    parent = module.rpartition(".")[0]
    for i, layer in enumerate(SERVE_LAYERS):
        if module in layer or (parent != "edgewise.serve" and parent in layer):
            return i
    return None


def test_every_module_of_serve_has_a_layer():
    assert sorted(m for m in _modules() if _unit(m) == "serve" and _serve_layer(m) is None) == []


def _serve_upward(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    return sorted((m, t) for m, deps in graph.items() if _unit(m) == "serve" and m != "edgewise.serve.__main__"
                  for t in deps if _unit(t) == "serve" and _serve_layer(t) > _serve_layer(m))


def test_serve_imports_go_down_its_layers():
    assert _serve_upward(_graph(top_level_only=False)) == []


def test_the_serve_layer_test_finds_an_upward_import():
    graph = {"edgewise.serve.api.cost": {"edgewise.serve.proxy.conversation", "edgewise.serve.errors"},
             "edgewise.serve.proxy.routes": {"edgewise.serve.api.cost"}}
    assert _serve_upward(graph) == [("edgewise.serve.api.cost", "edgewise.serve.proxy.conversation")]


def test_the_top_level_is_short():
    top = sorted(p.stem for p in PKG.glob("*.py"))
    assert len(top) <= MAX_TOP_LEVEL, top


def _function_lengths() -> dict[str, int]:
    out = {}
    for path in PKG.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                body = node.body
                docstring = isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant)
                start = body[1].lineno if docstring and len(body) > 1 else body[0].lineno
                out[f"{path.relative_to(ROOT)}:{node.lineno} {node.name}"] = node.end_lineno - start + 1
    return out


def test_functions_are_a_screen_long():
    assert {f: n for f, n in _function_lengths().items() if n > MAX_FUNCTION_LINES} == {}


def test_ruff_is_clean():
    ruff = shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")
    if not Path(ruff).exists():
        pytest.skip("ruff is not installed (pip install -e '.[dev]')")
    out = subprocess.run([ruff, "check", "src", "tests", "benchmarks"], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_each_pack_option_is_defined_once():
    """Options live in PackOptions; no other module declares a flag or a schema entry for one."""
    from edgewise.options import PackOptions

    names = PackOptions.names()
    # `eval run --model` names the OpenAI backend's model (what the endpoint serves), not the pack option
    # `index --tokenizer` counts the chunk sizes of what is indexed: no prompt is packed there
    # `eval calibrate --prune` lists the thresholds a calibration measures, not one to pack with
    elsewhere = {("src/edgewise/cli/eval.py", "--model"), ("src/edgewise/cli/index.py", "--tokenizer"),
                 ("src/edgewise/cli/eval.py", "--prune")}
    offenders = []
    for path in PKG.rglob("*.py"):
        if path.name == "options.py":
            continue
        text = path.read_text(encoding="utf-8")
        for name in names:
            flag = "--" + name.replace("_", "-")
            if (str(path.relative_to(ROOT)), flag) not in elsewhere and re.search(
                    rf"add_argument\([^)]*[\"']{re.escape(flag)}[\"']", text):
                offenders.append(f"{path.relative_to(ROOT)} declares {flag}")
    assert offenders == []


def test_every_option_reaches_the_cli_the_schema_and_the_conditions():
    from edgewise.cli import build_parser
    from edgewise.eval.runner import parse_condition
    from edgewise.options import PackOptions

    schema = PackOptions.json_schema()["properties"]
    parser = build_parser()
    pack_cmd = next(a for a in parser._subparsers._group_actions[0].choices.values() if a.prog.endswith(" pack"))
    flags = {s for action in pack_cmd._actions for s in action.option_strings}
    for name in PackOptions.names():
        assert name in schema
        assert "--" + name.replace("_", "-") in flags
        if name not in ("key_id", "order", "scorer"):  # refused in conditions on purpose (see parse_condition)
            value = {"bool": "true", "int": "3", "number": "0.5", "positive": "2", "unit": "0.5", "choice":
                     PackOptions.spec(name).choices[0] if PackOptions.spec(name).choices else "", "text": "hello",
                     "str": "x", "name": "paper"}[PackOptions.spec(name).kind]
            if name == "tokenizer":
                value = "words"
            cond = parse_condition(f"edgewise:{name}={value}")
            assert name in cond.options
