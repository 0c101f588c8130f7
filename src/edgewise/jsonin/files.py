"""Text from files, stdin and ``@FILE`` values: strict UTF-8, one clear error for every bad input.

Files and stdin are read as bytes and decoded as UTF-8 (a leading BOM is dropped); a byte that is
not UTF-8 is an :class:`~edgewise.errors.InputError` naming the file and the byte offset, never a
traceback. Chunk files are JSON arrays or JSON Lines, read by :func:`edgewise.jsonin.strict.loads`.

>>> decode(b'\\xef\\xbb\\xbf{"text": "caf\\xc3\\xa9"}', "chunks file 'c.json'")
'{"text": "café"}'
>>> text_arg("@no-such-file.txt", "system")
Traceback (most recent call last):
...
edgewise.errors.InputError: system file 'no-such-file.txt' could not be read: No such file or directory
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from ..errors import InputError
from .strict import decode, loads, lone_surrogate


def read_text(path: str, what: str) -> str:
    """The UTF-8 text of file ``path``, or of stdin when ``path`` is ``-``; ``what`` names it in errors.

    >>> read_text("no/such/file.txt", "query")
    Traceback (most recent call last):
    ...
    edgewise.errors.InputError: query file 'no/such/file.txt' could not be read: No such file or directory
    """
    if path == "-":
        stream = sys.stdin
        buffer = getattr(stream, "buffer", None)
        if buffer is None:  # a text stream without bytes under it (io.StringIO in tests)
            return stream.read().removeprefix("\ufeff")
        return decode(buffer.read(), f"{what} on stdin")
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise InputError(f"{what} file {path!r} could not be read: {exc.strerror}") from None
    return decode(data, f"{what} file {path!r}")


def text_arg(value: str | None, what: str) -> str | None:
    """A text option as given: ``@FILE`` reads the (stripped) text of FILE, ``@-`` of stdin, as curl does.

    A value typed on the command line must be UTF-8 too: Python hands an undecodable byte over
    as a lone surrogate, which is refused here with the byte it stands for.

    >>> text_arg("capital of France?", "query"), text_arg(None, "system")
    ('capital of France?', None)
    >>> text_arg("caf\\udce9", "query")
    Traceback (most recent call last):
    ...
    edgewise.errors.InputError: query must be UTF-8 text, but character 4 on the command line is the byte 0xE9, which is not UTF-8
    """
    if value is None:
        return None
    if value.startswith("@"):
        return read_text(value[1:], what).strip()
    at = lone_surrogate(value)
    if at is not None:
        code = ord(value[at])
        if 0xDC80 <= code <= 0xDCFF:  # how Python passes on a byte of argv that is not UTF-8
            raise InputError(
                f"{what} must be UTF-8 text, but character {at + 1} on the command line is the byte "
                f"0x{code - 0xDC00:02X}, which is not UTF-8"
            )
        raise InputError(f"{what} must be valid Unicode, but character {at + 1} is a lone surrogate U+{code:04X}")
    return value


def read_chunks(source: str) -> list[Any]:
    """The raw chunk items (dicts or strings) of a JSON array or JSON Lines file, or of stdin for ``-``.

    Empty input (nothing, only whitespace, ``[]``) is an error: a prompt with no chunks is never
    what the caller meant.

    >>> import tempfile
    >>> with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
    ...     _ = f.write('{"id": "a", "text": "Paris"}\\n[]\\n')
    >>> read_chunks(f.name)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    edgewise.errors.InputError: ....json line 2 (chunk #1): a chunk must be a JSON object or a string, but got an array
    >>> with open(f.name, "w") as g:
    ...     _ = g.write(" [ ]\\n")
    >>> read_chunks(f.name)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    edgewise.errors.InputError: chunks input ....json is empty: give at least one chunk
    >>> import os; os.remove(f.name)
    """
    label = "<stdin>" if source == "-" else source
    items = loads(read_text(source, "chunks"), label)
    if not items:
        raise InputError(f"chunks input {label} is empty: give at least one chunk")
    return items

