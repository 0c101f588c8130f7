"""Modules that moved into packages keep their old import names for a while, with a warning."""

import importlib
import subprocess
import sys

import pytest

import edgewise


@pytest.mark.parametrize("old", sorted(edgewise.MOVED))
def test_an_old_module_name_imports_the_new_module_with_a_warning(old):
    code = (f"import warnings, importlib; warnings.simplefilter('error', DeprecationWarning)\n"
            f"try:\n    importlib.import_module({old!r})\nexcept DeprecationWarning as w:\n    print(w)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    new = edgewise.MOVED[old]
    assert (out.returncode, out.stdout, out.stderr) == (
        0, f"{old} moved to {new}: import it from there ({old} goes in edgewise 0.3)\n", "")


def test_the_old_name_is_the_same_module_object():
    with pytest.warns(DeprecationWarning, match="edgewise.select moved to edgewise.packing.select"):
        old = importlib.import_module("edgewise.select")
    assert old is importlib.import_module("edgewise.packing.select")
    assert old.fit is edgewise.fit


def test_every_new_name_exists_and_no_old_name_is_a_module_file():
    from pathlib import Path

    src = Path(edgewise.__file__).parent
    assert sorted(old for old in edgewise.MOVED if (src / f"{old.split('.', 1)[1]}.py").exists()) == []
    for new in edgewise.MOVED.values():
        importlib.import_module(new)


def test_an_unknown_name_is_still_not_found():
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("edgewise.no_such_module")
