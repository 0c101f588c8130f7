"""Subcommands whose arguments are added only when the command line names them.

``edgewise --help`` needs each subcommand's name and one-line help, not its flags; building the
flags can import what they list (the eval backends, the scorers). :func:`command` adds a subcommand
with its help now and remembers how to add its arguments; :func:`build_named` adds them, level by
level, for the subcommands an argument list names, so ``edgewise pack`` never imports the eval
backends and ``edgewise --help`` imports none of them.

>>> import argparse
>>> parser = argparse.ArgumentParser(prog="demo"); sub = parser.add_subparsers(dest="command")
>>> p = command(sub, "greet", lambda p: p.add_argument("--name"), help="say hello")
>>> [a.dest for a in p._actions]
['help']
>>> build_named(parser, ["greet", "--name", "Ada"]); parser.parse_args(["greet", "--name", "Ada"]).name
'Ada'
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any

_BUILD = "_edgewise_build"  # the attribute of a subcommand's parser that holds its builder until it runs


def command(subparsers: Any, name: str, build: Callable[[argparse.ArgumentParser], Any], **kwargs: Any) -> Any:
    """Add subcommand ``name`` (``kwargs`` as for ``add_parser``: ``help``, ``epilog``...); its
    arguments are added by ``build(parser)`` when :func:`build_named` finds ``name`` on the command line."""
    parser = subparsers.add_parser(name, **kwargs)
    setattr(parser, _BUILD, build)
    return parser


def build_named(parser: argparse.ArgumentParser, argv: Sequence[str]) -> None:
    """Add the arguments of each subcommand that ``argv`` names, down the levels of subcommands.

    At each level the subcommand is the first argument that is not an option: the parsers that hold
    subcommands here take no option with a value (only ``--help`` and ``--version``).
    """
    args = list(argv)
    while True:
        subs = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
        at = next((i for i, arg in enumerate(args) if not arg.startswith("-")), None)
        if subs is None or at is None or args[at] not in subs.choices:
            return  # no (known) subcommand here: argparse reports it
        parser = subs.choices[args[at]]
        build = parser.__dict__.pop(_BUILD, None)
        if build is not None:
            build(parser)
        args = args[at + 1 :]
