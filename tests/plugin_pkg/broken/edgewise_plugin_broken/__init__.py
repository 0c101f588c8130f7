"""A plugin with mistakes: its ``edges`` order takes a name edgewise already uses."""


def edges(n, ctx):
    return list(range(n))
