"""Strict reading of input that a reader gets whole: every bad byte, line or field refused by name.

- :mod:`.strict`: UTF-8 bytes (``decode``) and chunk lists, a JSON array or JSON Lines (``loads``),
  read by orjson where it gives the value Python's json gives (``quick``, ``clean``);
- :mod:`.files`: the text of a file or stdin, ``@FILE`` values and chunk files, as the CLI reads them;
- :mod:`.bodies`: HTTP request bodies, as the server reads them (orjson where it reads the same
  values, the characters of the text fields, the path of a lone surrogate).

Writing is left to the layer that writes: the CLI's :mod:`edgewise.cli.output` and the server's codecs.
"""
