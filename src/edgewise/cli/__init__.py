"""The ``edgewise`` command: a thin layer over the library. JSON in, JSON or text out.

One module per family of subcommands (``pack``, ``relevance``, ``data``, ``eval``, ``serve``, ``index``, ``batch``), reading input
with :mod:`edgewise.jsonin.files` and writing it with :mod:`edgewise.cli.output`. Errors are one line on stderr naming the rule and the
value, with exit status 2.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from ..errors import EdgewiseError


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr (status 2), like every other error, and
    the registries' names in help texts are listed only when help is shown (plugins load then)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        from ..options import HelpFormatter

        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The ``edgewise`` parser, with the arguments of the subcommands ``argv`` names (default:
    every subcommand's, which imports what each one lists, the eval backends included)."""
    from .. import __version__
    from . import batch, data, index, pack, relevance, serve
    from . import eval as eval_cmds
    from .lazy import build_named

    parser = _Parser(prog="edgewise", description="Pack retrieved chunks into the prompt an LLM reads best.")
    parser.add_argument("--version", action="version", version=f"edgewise {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    pack.add_commands(sub)  # pack, variants, list
    relevance.add_commands(sub)  # score, prune, highlight
    data.add_commands(sub)  # data nq
    eval_cmds.add_commands(sub)  # eval run | report | calibrate
    serve.add_commands(sub)  # serve (the HTTP service and proxy; extra `serve`)
    index.add_commands(sub)  # index, retrieve, ask (your own documents; extra `index`)
    batch.add_commands(sub)  # batch (JSON Lines/Parquet in, Parquet out; extra `ray` for Ray Data)
    if argv is None:
        _build_all(parser)
    else:
        build_named(parser, argv)
    return parser


def _build_all(parser: argparse.ArgumentParser) -> None:
    from .lazy import build_named

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                build_named(parser, [name])
                _build_all(child)


def _one_line(text: object) -> str:
    return " ".join(str(text).splitlines())


def _warn(message, category, filename, lineno, file=None, line=None) -> None:  # noqa: ANN001
    """Warnings (a plugin that failed to load, a small distractor pool) as one line on stderr."""
    print(f"edgewise: warning: {_one_line(message)}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    import warnings

    warnings.showwarning = _warn
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(argv)  # only the named subcommand's arguments: `edgewise pack` imports no eval backend
    args = parser.parse_args(argv)
    try:
        args.func(args)
    except (EdgewiseError, ImportError) as exc:  # ImportError: a missing extra, with its pip command
        print(f"edgewise: error: {_one_line(exc)}", file=sys.stderr)
        return 2
    except (RecursionError, MemoryError):  # a backstop: inputs are checked for depth and size as they are read
        print("edgewise: error: the input is too deeply nested or too large to process", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:  # eval run raises one that says how far it got
        told = _one_line(exc) if str(exc).startswith("stopped") else ""
        hint = getattr(args, "on_interrupt", None)
        print(f"edgewise: {told or 'stopped' + (f'; {hint}' if hint else '')}", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. `edgewise pack ... | head`
        return 0
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
