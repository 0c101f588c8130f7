"""The one compiled part of edgewise, optional: the word-bound scan (src/edgewise/_scan.c).

Everything else is in pyproject.toml. ``optional=True``: where the C compiler or Python's headers
are missing, the install goes on without it and :mod:`edgewise.tokens.wordbound` scans in Python (the same
answers, slower: ``edgewise.tokens.wordbound.SCANNER`` says which).
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("edgewise._scan", ["src/edgewise/_scan.c"], optional=True)])
