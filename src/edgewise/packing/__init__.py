"""Packing: select chunks under the budget, place them, render the prompt, and say where each went.

- :mod:`~edgewise.packing.front`: ``pack()`` and ``variants()``, the front door;
- :mod:`~edgewise.packing.packer`: ``Packer``, the long-lived object that wires the steps together;
- :mod:`~edgewise.packing.fast`: the fast paths (lazy input, skip-ahead, count memos), behind one seam;
- :mod:`~edgewise.packing.select`: which chunks fit (``fit``, ``limit``) and why the others do not;
- :mod:`~edgewise.packing.budget`: the budget loop: fixed layers, render, re-encode, settle;
- :mod:`~edgewise.packing.debug`: ``DebugInfo``, the record of where every chunk went.
"""

from .front import DebugInfo, Packed, pack, variants
from .packer import Packer
from .select import fit, limit

__all__ = ["DebugInfo", "Packed", "Packer", "fit", "limit", "pack", "variants"]
