"""A plugin module whose dependency is missing."""

import frobnicate  # noqa: F401  (not installed anywhere: importing this module fails)


def strategy(n, ctx):
    return list(range(n))
