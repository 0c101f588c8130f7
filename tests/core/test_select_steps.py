"""``edgewise.packing.select`` reads as named steps: no function of it longer than a screen or with more
branch points than a reader holds at once (the output of the steps is held by the golden, lazy-input,
scan and pack property tests)."""

from __future__ import annotations

import ast
from pathlib import Path

import edgewise.packing.select

SCREEN = 50  # lines, its docstring included
BRANCHES = 12  # if, for, while, boolean operators, conditional expressions, comprehension conditions


def _branches(node: ast.AST) -> int:
    kinds = (ast.If, ast.For, ast.While, ast.IfExp, ast.BoolOp, ast.comprehension, ast.Try, ast.With)
    return sum(isinstance(n, kinds) for n in ast.walk(node))


def test_every_function_of_select_is_a_screen_long() -> None:
    tree = ast.parse(Path(edgewise.packing.select.__file__).read_text(encoding="utf-8"))
    functions = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]
    too_long = {f.name: f.end_lineno - f.lineno + 1 for f in functions if f.end_lineno - f.lineno + 1 > SCREEN}  # type: ignore[operator]
    too_branchy = {f.name: _branches(f) for f in functions if _branches(f) > BRANCHES}
    assert (too_long, too_branchy) == ({}, {})
    assert {"fit", "skip_unfit", "skip_uncut"} <= {f.name for f in functions}
