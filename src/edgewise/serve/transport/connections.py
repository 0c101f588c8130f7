"""The HTTP protocol of ``edgewise serve``: uvicorn's, h11 or httptools, with bounds on connections.

uvicorn bounds neither the time a client may take to send its request line and headers nor, with
httptools, their size, nor the connections a process holds open. These classes add, whichever
parser is used (``--http``):

* **header bytes**: the request line and headers may be at most ``--max-header-bytes``. They are
  counted as they arrive, before the parser buffers them: one byte more is a 431 and the
  connection is closed. (The count of header lines is checked once they are parsed:
  :class:`~edgewise.serve.transport.limits.HeaderLimit`.)
* **header time**: they must arrive within ``--header-timeout`` seconds of the connection's start,
  or of the first byte of the next request on a kept-alive connection: else a 408 (when part of
  a request came) and the connection is closed. A connection that never sends a byte is closed
  at the same deadline.
* **keep-alive**: a connection idle between requests is closed after ``--keep-alive`` seconds
  (uvicorn's own timer).
* **open connections**: at most ``--max-connections`` per process. One more closes the oldest
  idle connection (one waiting for a request: none of its requests is being answered), so a
  flood of silent connections cannot keep a probe (``/healthz``) or a real client out; when
  none is idle the new connection is closed at once. The process's descriptor limit is raised
  to fit (up to its hard limit), and the connection limit lowered to fit it when it cannot be.

* **one framing**: a request whose body length could be read two ways (``Content-Length`` given
  twice or as a list, ``28, 28``; ``Content-Length`` beside ``Transfer-Encoding``; a
  ``Transfer-Encoding`` other than one ``chunked``) is a 400 at once, the same under both parsers
  (:func:`framing_problem`, run on the request line and headers before the parser reads them):
  h11 alone would take ``28, 28`` and wait for a chunked body that never comes, httptools refuses
  them in its own words.

Errors written here, before any app runs, have the JSON body of every other error
(:func:`edgewise.serve.errors.error_body`); so does a request the parser refuses (a malformed
``Content-Length``, a bad request line), which uvicorn would answer in plain text.
TCP_NODELAY is set on every connection (see :mod:`edgewise.serve.transport.nodelay`).
"""

from __future__ import annotations

import asyncio
import http
import logging
import re
import resource
import sys
from dataclasses import dataclass
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from ..errors import ERROR_HEADER, error_body
from .nodelay import set_nodelay

log = logging.getLogger("edgewise.serve")
LINGER_S = 1.0  # an error's connection stays open this long after the reply (a "lingering close")
FD_RESERVE = 64  # descriptors kept for everything that is not a connection (logs, models, the listener)


@dataclass(frozen=True)
class Limits:
    max_header_bytes: int = 32 * 1024
    header_timeout_s: float = 10.0
    max_connections: int = 1000


LIMITS = Limits()  # this process's; set by configure() when the app is built (each worker builds its own)


def configure(config: Any) -> Limits:
    """Take the limits of a :class:`~edgewise.serve.config.ServeConfig` for this process's connections."""
    global LIMITS
    LIMITS = Limits(config.max_header_bytes, config.header_timeout_s, _fit_descriptors(config.max_connections))
    return LIMITS


def _fit_descriptors(wanted: int) -> int:
    """Raise the soft descriptor limit to hold ``wanted`` connections; what it holds when it cannot."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = wanted + FD_RESERVE
    if soft != resource.RLIM_INFINITY and soft < need:
        target = need if hard == resource.RLIM_INFINITY else min(need, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    if soft != resource.RLIM_INFINITY and soft < need:
        fits = max(soft - FD_RESERVE, 1)
        log.warning("--max-connections %d needs %d file descriptors, but this process may open %d: "
                    "holding at most %d connections", wanted, need, soft, fits)
        return fits
    return wanted


def raw_error(status: int, type: str, message: str) -> bytes:
    """A whole HTTP/1.1 error response that closes the connection, with edgewise's JSON body."""
    body = error_body(type, message)
    head = (f"HTTP/1.1 {status} {http.HTTPStatus(status).phrase}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n{ERROR_HEADER}: 1\r\n\r\n")
    return head.encode("ascii") + body


_HEAD_END = re.compile(rb"\r?\n\r?\n")


def framing_problem(head: bytes, *, cut: bool = False) -> str | None:
    """Why the body of the request whose head starts ``head`` has no single length, or None (when
    its framing is sound, or its headers have not all come yet). Only the lines after the first
    (the request line, or a piece of a line) and before the blank line are read; ``cut``: the
    parser stopped inside the head, whose lines so far are read (the last one perhaps cut short).

    >>> framing_problem(b"POST / HTTP/1.1\\r\\nContent-Length: 28, 28\\r\\n\\r\\n{}")
    'Content-Length must be given once, as one number, but it came as a list'
    >>> framing_problem(b"POST / HTTP/1.1\\r\\nContent-Length: 2\\r\\nTransfer-Encoding: chunked\\r\\n\\r\\n")
    'Content-Length and Transfer-Encoding may not both be given (the body would have two lengths)'
    >>> framing_problem(b"POST / HTTP/1.1\\r\\nContent-Length: 2,"), framing_problem(b"POST / HTTP/1.1\\r\\nContent-Length: 2,", cut=True)
    (None, 'Content-Length must be given once, as one number, but it came as a list')
    """
    head = head.lstrip(b"\r\n")  # empty lines before a request line are skipped (RFC 9112, 2.2)
    end = _HEAD_END.search(head)
    if end is None and not cut:
        return None
    lines = (head if end is None else head[:end.start()]).split(b"\n")[1:]
    lengths: list[bytes] = []
    codings: list[bytes | None] = []
    for i, line in enumerate(lines):
        name, colon, value = line.partition(b":")
        name = name.lower()
        if colon and name == b"content-length":
            lengths.append(value.strip())
        elif colon and name == b"transfer-encoding":  # a value cut short is not read
            codings.append(None if end is None and i == len(lines) - 1 else value.strip())
    if lengths and codings:
        return "Content-Length and Transfer-Encoding may not both be given (the body would have two lengths)"
    if len(lengths) > 1:
        return f"Content-Length must be given once, as one number, but it came {len(lengths)} times"
    if lengths and b"," in lengths[0]:
        return "Content-Length must be given once, as one number, but it came as a list"
    if len(codings) > 1:
        return f"Transfer-Encoding must be given once, as chunked, but it came {len(codings)} times"
    if codings and codings[0] is not None and codings[0].lower() != b"chunked":
        return (f"Transfer-Encoding must be chunked (the only coding served), "
                f"but got {codings[0].decode('latin-1')!r}")
    return None


class _Guard:
    """What both protocols add; the parser-specific parts are :meth:`_in_head` and the hooks."""

    transport: Any
    loop: asyncio.AbstractEventLoop
    server_state: Any
    cycle: Any

    def connection_made(self, transport: Any) -> None:
        set_nodelay(transport)
        super().connection_made(transport)  # type: ignore[misc]
        self._head_bytes, self._heads, self._timer, self._since = 0, 0, None, self.loop.time()
        self._refused = False
        self._head_seen = bytearray()  # the head of the request being read, as far as it came (framing_problem)
        self._arm()  # a connection that never sends its request is closed at the header deadline
        _make_room(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)  # type: ignore[misc]

    def _in_head(self) -> bool:  # waiting for (the rest of) a request line and headers
        raise NotImplementedError

    def idle(self) -> bool:
        """No request of this connection is being answered."""
        return self._in_head() and (self.cycle is None or self.cycle.response_complete)

    def _arm(self) -> None:
        self._disarm()
        self._timer = self.loop.call_later(LIMITS.header_timeout_s, self._head_late)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _head_done(self) -> None:
        self._disarm()
        self._head_bytes = 0
        self._head_seen = bytearray()
        self._heads += 1  # request heads parsed on this connection

    def _head_late(self) -> None:
        self._timer = None
        if self.transport.is_closing() or self._refused:
            return
        if not self.idle():  # a pipelined request waits for the one being answered: not the client's delay
            self._arm()
            return
        if self._head_bytes:
            self._refuse(408, "request_timeout", f"the request line and headers did not arrive within "
                                                 f"{LIMITS.header_timeout_s:g} s (--header-timeout); "
                                                 f"{self._head_bytes} bytes came")
        else:
            self.transport.close()

    def _refuse(self, status: int, type: str, message: str) -> None:
        """Answer with an error and close, reading nothing more. The close waits a moment after the
        reply: closing with unread bytes resets the connection, and the client would lose the reply."""
        self._disarm()
        if self.transport.is_closing() or self._refused:
            return
        self._refused = True
        self.transport.pause_reading()
        self.transport.write(raw_error(status, type, message))
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self.loop.call_later(LINGER_S, self.transport.close)

    def _too_large(self) -> None:
        self._refuse(431, "headers_too_large", f"the request line and headers may be at most "
                                               f"{LIMITS.max_header_bytes} bytes (--max-header-bytes)")

    def data_received(self, data: bytes) -> None:
        if self._refused:  # bytes that were on their way when the error was sent
            return
        if self._in_head():
            if self._timer is None:  # the first byte of a request on a kept-alive connection
                self._arm()
            room = LIMITS.max_header_bytes - self._head_bytes
            piece = data[:room]
            if _HEAD_END.search(self._head_seen[-3:] + piece) and self._bad_framing(bytes(self._head_seen) + piece):
                return  # only when the head may end in this piece: a head sent a byte at a time costs no more
            self._head_seen += piece
            if len(data) > room:  # feed what may still be headers; the rest only if they ended in it
                head, data, heads = data[:room], data[room:], self._heads
                self._head_bytes += len(head)
                self._feed(head)
                if self.transport.is_closing() or self._refused:
                    return
                if self._heads == heads:  # the headers did not end within the limit
                    self._too_large()
                    return
            else:
                self._head_bytes += len(data)
        self._feed(data)

    def _bad_framing(self, head: bytes) -> bool:
        """Refuse a request head whose body length is ambiguous (a 400, the connection closed)."""
        problem = framing_problem(head)
        if problem is not None:
            self._refuse(400, "bad_request", f"the request is not valid HTTP/1.1: {problem}")
        return problem is not None

    def _feed(self, data: bytes) -> None:
        super().data_received(data)  # type: ignore[misc]

    def send_400_response(self, msg: str) -> None:
        """What uvicorn calls when the parser refuses a request: edgewise's JSON error instead of text
        (a parser that stops at the comma of ``Content-Length: 28,`` gets the message of the whole head)."""
        problem = sys.exc_info()[1]  # called while uvicorn handles the parser's error
        detail = f": {problem}" if problem is not None and str(problem) else ""
        framing = framing_problem(bytes(self._head_seen), cut=True) if self._in_head() else None
        self._refuse(400, "bad_request", f"the request is not valid HTTP/1.1{detail if framing is None else ': ' + framing}")


def _make_room(new: Any) -> None:
    """Past the connection limit: close the oldest idle connection, or ``new`` when none is idle."""
    connections = new.server_state.connections
    if len(connections) <= LIMITS.max_connections:
        return
    idle = [c for c in connections if c is not new and isinstance(c, _Guard) and c.idle()]
    victim = min(idle, key=lambda c: c._since) if idle else new
    victim.transport.close()


class GuardedH11(_Guard, H11Protocol):  # type: ignore[misc]
    """uvicorn's h11 protocol with the limits above."""

    def _in_head(self) -> bool:
        return self.conn.their_state is h11.IDLE

    def _feed(self, data: bytes) -> None:
        was = self._in_head()
        super()._feed(data)
        if was and not self._in_head():
            self._head_done()

    def on_response_complete(self) -> None:
        if self.conn.their_state is h11.DONE:  # what came after the request (pipelined) is h11's to read next
            buffered = self.conn.trailing_data[0]
            if self._bad_framing(buffered):
                return  # refused before h11 reads it
            self._head_seen = bytearray(buffered)
        super().on_response_complete()
        self._since = self.loop.time()
        if not self._in_head():  # a pipelined request already parsed
            self._head_done()

    def send_400_response(self, msg: str) -> None:
        if self._in_head() and len(self.conn.trailing_data[0]) > LIMITS.max_header_bytes:
            self._too_large()  # h11's own bound (pipelined bytes)
        else:
            super().send_400_response(msg)


def _httptools_class() -> type:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    class GuardedHttpTools(_Guard, HttpToolsProtocol):  # type: ignore[misc, valid-type]
        """uvicorn's httptools protocol with the limits above."""

        _head_open = True

        def _in_head(self) -> bool:
            return self._head_open

        def on_headers_complete(self) -> None:
            self._head_open = False
            self._head_done()
            super().on_headers_complete()

        def on_message_complete(self) -> None:
            super().on_message_complete()
            self._head_open = True

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._since = self.loop.time()

    return GuardedHttpTools


def __getattr__(name: str) -> Any:  # GuardedHttpTools: only where httptools is installed
    if name == "GuardedHttpTools":
        cls = _httptools_class()
        globals()[name] = cls
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def protocol_path(parser: str) -> str:
    """The import string uvicorn loads the HTTP protocol from, for ``--http`` (auto, h11, httptools)."""
    if parser == "auto":
        try:
            import httptools  # noqa: F401
        except ImportError:
            parser = "h11"
        else:
            parser = "httptools"
    if parser == "httptools":
        try:
            import httptools  # noqa: F401, F811
        except ImportError:
            from ...errors import ConfigError

            raise ConfigError("--http httptools needs httptools: pip install httptools (or use --http h11)") from None
    return f"{__name__}:{'GuardedHttpTools' if parser == 'httptools' else 'GuardedH11'}"
