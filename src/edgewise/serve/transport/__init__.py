"""The HTTP transport of ``edgewise serve``: connections and the limits on what they carry.

- :mod:`.connections`: uvicorn's HTTP protocol (h11 or httptools) with bounds on the header's
  size and time and on the connections a process holds.
- :mod:`.limits`: request limits: body size and time, header count, chunks and characters, and
  strings that are not valid Unicode.
- :mod:`.nodelay`: TCP_NODELAY on every connection.
"""
