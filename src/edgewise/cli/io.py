"""What every CLI command shares: reading chunks and ``@FILE`` values, writing JSON.

Reading goes through :mod:`edgewise.cli.textio`'s strict rules: UTF-8 only (a BOM is accepted),
JSON arrays or JSON Lines split on ``\\n`` only, and every failure an :class:`InputError` naming
the source, which the CLI prints as one line with exit status 2.
"""

from __future__ import annotations

import json
from typing import Any

from .textio import read_chunks as read_chunk_list
from .textio import text_arg, write_out

__all__ = ["dump", "dumps", "read_chunk_list", "text_arg", "write_out"]


def dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, indent=2)


def dump(obj: Any) -> None:
    write_out(dumps(obj))
