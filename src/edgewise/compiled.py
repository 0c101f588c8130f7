"""The optional compiled primitives, loaded here for every caller: ``edgewise._scan``, which setup.py
builds with ``optional=True`` where a C compiler and Python's headers are found. Each has a Python
twin with the same answers (``tests/tokens/test_scan.py``), used where the module was not built.

>>> STATUS in ("C",) or STATUS.startswith("Python (")
True
"""

from __future__ import annotations

from types import ModuleType


def _load() -> tuple[ModuleType | None, str]:
    try:
        from . import _scan
    except ImportError as exc:
        return None, f"Python (edgewise._scan is not built: {exc})"
    return _scan, "C"


module, STATUS = _load()
"""``edgewise._scan``, or None; and what runs the passes: ``C``, or ``Python (why)``."""
