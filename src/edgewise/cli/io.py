"""What every CLI command shares: reading chunks and ``@FILE`` values, writing JSON.

Reading goes through :mod:`edgewise.textio`-style strict rules: UTF-8 only (a BOM is accepted),
JSON arrays or JSON Lines split on ``\\n`` only, and every failure an :class:`InputError` naming
the source, which the CLI prints as one line with exit status 2.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from ..errors import InputError


def read_chunk_list(source: str) -> list[Any]:
    """Raw chunk items from a file, or from stdin for ``-``."""
    from ..chunk import loads

    if source == "-":
        return loads(sys.stdin.read(), "<stdin>")
    try:
        text = Path(source).read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"chunks file {source!r} could not be read: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise InputError(f"chunks file {source!r} must be UTF-8 text") from None
    return loads(text, source)


def text_arg(value: str | None, what: str) -> str | None:
    """``@FILE`` reads the value from a file, as curl does."""
    if value is None or not value.startswith("@"):
        return value
    try:
        return Path(value[1:]).read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise InputError(f"{what} file {value[1:]!r} could not be read: {exc.strerror}") from None


def dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, indent=2)


def dump(obj: Any) -> None:
    print(dumps(obj))
