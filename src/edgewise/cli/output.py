"""What every CLI command writes: JSON and text on stdout, as UTF-8 whatever the locale says.

Reading is :mod:`edgewise.jsonin.files` (chunks, ``@FILE`` values); every failure there is an
:class:`~edgewise.errors.InputError` naming the source, which the CLI prints as one line with exit
status 2.

>>> print(dumps({"text": "café", "ids": [1]}))
{
  "text": "café",
  "ids": [
    1
  ]
}
"""

from __future__ import annotations

import json
import sys
from typing import Any, TextIO

from ..errors import InputError
from ..jsonin.strict import lone_surrogate


def dumps(obj: Any) -> str:
    """``obj`` as indented JSON, non-ASCII as it is.

    >>> dumps(["é"])
    '[\\n  "é"\\n]'
    """
    return json.dumps(obj, ensure_ascii=False, indent=2)


def dump(obj: Any) -> None:
    """Write ``obj`` as indented JSON to stdout (:func:`write_out`)."""
    write_out(dumps(obj))


def write_out(text: str, stream: TextIO | None = None) -> None:
    """Write ``text`` and a newline to ``stream`` (stdout) as UTF-8, whatever the locale's encoding.

    Text that cannot be UTF-8 (a lone surrogate) is an error before anything is written.

    >>> import io
    >>> out = io.TextIOWrapper(io.BytesIO(), encoding="ascii")
    >>> write_out("café", out)
    >>> out.buffer.getvalue()
    b'caf\\xc3\\xa9\\n'
    """
    stream = sys.stdout if stream is None else stream
    at = lone_surrogate(text)
    if at is not None:
        raise InputError(
            f"output must be valid Unicode, but character {at + 1} is a lone surrogate U+{ord(text[at]):04X}"
        )
    buffer = getattr(stream, "buffer", None)
    if buffer is None:
        stream.write(text + "\n")
        return
    stream.flush()  # whatever went through the text layer comes first
    buffer.write((text + "\n").encode("utf-8"))
    buffer.flush()
