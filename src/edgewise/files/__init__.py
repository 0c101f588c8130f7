"""Files edgewise keeps beside the user's.

- :mod:`~edgewise.files.cache`: files that configure packing (profiles, templates), read safely and
  parsed once per version (:func:`~edgewise.files.cache.load_cached`);
- :mod:`~edgewise.files.writing`: writes a reader sees whole or not at all
  (:func:`~edgewise.files.writing.write_atomic`) and lock files that name their holder
  (:class:`~edgewise.files.writing.HolderLock`).
"""

from .cache import clear, load_cached
from .writing import HolderLock, write_atomic

__all__ = ["HolderLock", "clear", "load_cached", "write_atomic"]
