"""Documents from files: ``.txt``, ``.md``, ``.html``/``.htm`` and ``.pdf``, as text with a title.

- ``.txt`` and ``.md``: UTF-8 text, read as is (an LLM reads Markdown well; rendering it would lose
  code fences and lists). The title is the first Markdown heading (``.md``) or a short first line
  that is not a sentence (``.txt``), else the file's stem.
- ``.html``: BeautifulSoup (``beautifulsoup4``, with the standard library's ``html.parser``): the
  ``<title>``, then the visible text, one line per block; scripts, styles, navigation, headers,
  footers, forms and templates are left out. The tree is walked with a stack, not recursion, so
  100,000 nested elements read in time linear in the file.
- ``.pdf``: pypdf (``pypdf``), page by page; pages are joined by a blank line and each page's
  offset is kept (``Document.pages``), so a chunk can say which page it came from.

Only regular files are read (a symlink to one too): a FIFO, a device or a socket is refused before it
is opened, and a file is read in pieces of :data:`PIECE` bytes up to ``max_bytes``
(:data:`MAX_BYTES` unless told), never further. A file that cannot be read is a
:class:`~edgewise.errors.InputError` naming the file and the reason (not a regular file, too large,
not UTF-8, binary, encrypted, damaged, no text); the caller reports it and goes on.

>>> import tempfile, pathlib
>>> p = pathlib.Path(tempfile.mkdtemp()) / "notes.md"
>>> _ = p.write_text("Intro line\\n\\n# Edge placement\\n\\nThe best chunks go first and last.\\n")
>>> doc = read_document(p)
>>> doc.title, doc.kind, doc.text.splitlines()[-1]
('Edge placement', 'md', 'The best chunks go first and last.')
"""

from __future__ import annotations

import bisect
import os
import re
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from ..errors import InputError, missing_extra

SUFFIXES = {".txt": "txt", ".md": "md", ".markdown": "md", ".html": "html", ".htm": "html", ".pdf": "pdf"}
MAX_BYTES = 200 * 1024 * 1024  # one file, unless told (--max-file-bytes); larger ones are refused, not read
PIECE = 1 << 20  # files are read and hashed this many bytes at a time
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)
_SKIP_TAGS = ("script", "style", "noscript", "nav", "header", "footer", "form", "template", "svg", "iframe")
_BLOCKS = ("p", "div", "li", "h1", "h2", "h3", "h4", "h5", "h6", "pre", "tr", "br", "section", "article",
           "blockquote", "dd", "dt", "figcaption", "table", "ul", "ol")


@dataclass(frozen=True)
class Document:
    """A file's text, title and kind; for a PDF, the character offset where each page starts."""

    path: Path
    text: str
    title: str
    kind: str
    pages: tuple[int, ...] = field(default=())

    def page_at(self, offset: int) -> int | None:
        """The 1-based page holding character ``offset`` (PDFs only)."""
        if not self.pages:
            return None
        return max(1, bisect.bisect_right(self.pages, offset))


def kind_of(path: Path) -> str | None:
    """The reader for ``path`` by its suffix, or None if it has none."""
    return SUFFIXES.get(path.suffix.lower())


_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def _not_regular(path: Path, mode: int) -> str:
    what = next((name for test, name in _KINDS if test(mode)), "not a regular file")
    link = f", through a symlink to {os.path.realpath(path)}" if path.is_symlink() else ""
    return f"only regular files are indexed, but this is {what}{link}"


def check_file(path: str | Path, max_bytes: int = MAX_BYTES) -> os.stat_result:
    """The file's status, or an :class:`InputError` if it is not a regular file (a symlink is
    followed) or holds more than ``max_bytes``: checked before the file is opened."""
    path = Path(path)
    try:
        st = os.stat(path)
    except OSError as exc:
        raise InputError(f"{path}: cannot read the file ({exc.strerror or exc})") from None
    if not stat.S_ISREG(st.st_mode):
        raise InputError(f"{path}: {_not_regular(path, st.st_mode)}")
    if st.st_size > max_bytes:
        raise InputError(f"{path}: files must be at most {max_bytes} bytes (--max-file-bytes), but this one is "
                         f"{st.st_size}")
    return st


@contextmanager
def open_regular(path: str | Path, max_bytes: int = MAX_BYTES) -> Iterator[IO[bytes]]:
    """``path`` opened for reading if it is a regular file within ``max_bytes`` (checked before the
    open and again on the open file, which is opened without blocking: a FIFO swapped in between
    cannot hang the reader)."""
    path = Path(path)
    check_file(path, max_bytes)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise InputError(f"{path}: cannot read the file ({exc.strerror or exc})") from None
    with os.fdopen(fd, "rb", buffering=0) as f:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise InputError(f"{path}: {_not_regular(path, mode)}")
        yield f


def read_pieces(path: str | Path, max_bytes: int = MAX_BYTES) -> Iterator[bytes]:
    """The bytes of a regular file, :data:`PIECE` at a time; an :class:`InputError` once they pass
    ``max_bytes`` (a file that grew after it was checked)."""
    path = Path(path)
    with open_regular(path, max_bytes) as f:
        total = 0
        try:
            while piece := f.read(min(PIECE, max_bytes + 1 - total)):
                total += len(piece)
                if total > max_bytes:
                    raise InputError(f"{path}: files must be at most {max_bytes} bytes (--max-file-bytes), but "
                                     "this one grew past that while it was read")
                yield piece
        except OSError as exc:
            raise InputError(f"{path}: cannot read the file ({exc.strerror or exc})") from None


def read_document(path: str | Path, max_bytes: int = MAX_BYTES) -> Document:
    """Read one file with the reader its suffix names."""
    path = Path(path)
    return parse_document(path, b"".join(read_pieces(_known(path), max_bytes)))


def _known(path: Path) -> Path:
    if kind_of(path) is None:
        raise InputError(f"{path}: unsupported file type {path.suffix or '(none)'!r}; edgewise index reads "
                         f"{', '.join(sorted(set(SUFFIXES)))}")
    return path


def parse_document(path: str | Path, data: bytes) -> Document:
    """The document in ``data``, the bytes of the file ``path`` (whose suffix names the reader)."""
    path = Path(path)
    kind = kind_of(_known(path))
    doc = {"txt": _text, "md": _markdown, "html": _html, "pdf": _pdf}[kind](path, data)
    if not doc.text.strip():
        raise InputError(f"{path}: no text to index (the file is empty or holds no extractable text)")
    return doc


def _decode(path: Path, data: bytes) -> str:
    if b"\x00" in data[:8192]:
        raise InputError(f"{path}: a text file must not hold NUL bytes; this looks like a binary file")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: text files must be UTF-8, but byte {exc.start} is not ({data[exc.start:exc.start + 1]!r})") from None
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _text(path: Path, data: bytes) -> Document:
    text = _decode(path, data)
    first_line = re.search(r"\S[^\n]*", text)
    first = first_line.group().strip() if first_line else ""
    title = first if len(first) <= 100 and first[-1:] not in ".!?:;," and "\n" in text.strip() else path.stem
    return Document(path, text, title, "txt")


def _markdown(path: Path, data: bytes) -> Document:
    text = _decode(path, data)
    if text.startswith("---\n"):  # YAML front matter: metadata, not prose
        end = text.find("\n---", 4)
        if end != -1:
            text = text[text.find("\n", end + 1) + 1:] if text.find("\n", end + 1) != -1 else ""
    heading = _HEADING.search(text)
    return Document(path, text, heading.group(1).strip() if heading else path.stem, "md")


def _html(path: Path, data: bytes) -> Document:
    try:
        from bs4 import BeautifulSoup
    except ImportError:
        raise missing_extra("reading HTML", "beautifulsoup4", "index") from None
    if b"\x00" in data[:8192]:
        raise InputError(f"{path}: an HTML file must not hold NUL bytes; this looks like a binary file")
    soup = BeautifulSoup(data, "html.parser")
    title = soup.title.get_text(" ", strip=True) if soup.title else ""
    raw, h1 = _visible_text(soup)
    lines = (" ".join(line.split()) for line in raw.splitlines())
    text = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
    return Document(path, text, title or (h1 if h1 is not None else path.stem), "html")


def _visible_text(soup: Any) -> tuple[str, str | None]:
    """The text a reader sees (a line break before and after each block; the skipped tags and the
    first ``<head>`` left out) and the text of the first ``<h1>`` outside them (None: no ``<h1>``).

    One walk of the tree with a stack of (tag, its children), so the work is linear in the
    elements however deep they nest (inserting the line breaks into the tree instead would re-walk a tag's
    descendants for each tag: quadratic in the nesting)."""
    from bs4 import CData, NavigableString, Tag

    texts = (NavigableString, CData)  # the strings get_text() reads: no comments, scripts, ruby notes
    parts: list[str] = []
    h1: list[str] | None = None
    h1_depth = 0  # the stack's height while inside the first <h1>
    head_seen = False
    stack: list[tuple[Any, Iterator[Any]]] = [(soup, iter(soup.contents))]
    while stack:
        tag, children = stack[-1]
        child = next(children, None)
        if child is None:
            stack.pop()
            if tag.name in _BLOCKS and tag is not soup:
                parts.append("\n")
            if len(stack) < h1_depth:
                h1_depth = 0  # left the first <h1>: its text is complete
        elif isinstance(child, Tag):
            if child.name in _SKIP_TAGS or (child.name == "head" and not head_seen):
                head_seen = head_seen or child.name == "head"
                continue
            if child.name in _BLOCKS:
                parts.append("\n")
            if h1 is None and child.name == "h1":
                h1, h1_depth = [], len(stack) + 1
            stack.append((child, iter(child.contents)))
        elif type(child) in texts:
            parts.append(child)
            if h1_depth and child.strip():
                h1.append(child.strip())
    return "".join(parts), (" ".join(h1) if h1 is not None else None)


def _pdf(path: Path, data: bytes) -> Document:
    try:
        import io

        from pypdf import PdfReader
        from pypdf.errors import PdfReadError
    except ImportError:
        raise missing_extra("reading PDF", "pypdf", "index") from None
    import logging

    logging.getLogger("pypdf").setLevel(logging.ERROR)  # pypdf logs every repaired object as a warning
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            raise InputError(f"{path}: the PDF is encrypted; edgewise index reads only unencrypted PDFs")
        pages = [page.extract_text() or "" for page in reader.pages]
        meta_title = (reader.metadata.title if reader.metadata else None) or ""
    except InputError:
        raise
    except (PdfReadError, ValueError, KeyError, TypeError, AttributeError, OSError, RecursionError) as exc:
        raise InputError(f"{path}: not a readable PDF ({type(exc).__name__}: {str(exc)[:120]})") from None
    starts, parts, at = [], [], 0
    for page in pages:
        page = page.replace("\r\n", "\n").replace("\r", "\n").strip()
        starts.append(at)
        parts.append(page)
        at += len(page) + 2
    text = "\n\n".join(parts)
    return Document(path, text, str(meta_title).strip() or path.stem, "pdf", tuple(starts))
