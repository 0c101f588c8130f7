"""Documents from files: ``.txt``, ``.md``, ``.html``/``.htm`` and ``.pdf``, as text with a title.

- ``.txt`` and ``.md``: UTF-8 text, read as is (an LLM reads Markdown well; rendering it would lose
  code fences and lists). The title is the first Markdown heading (``.md``) or a short first line
  that is not a sentence (``.txt``), else the file's stem.
- ``.html``: BeautifulSoup (``beautifulsoup4``, with the standard library's ``html.parser``): the
  ``<title>``, then the visible text, one line per block; scripts, styles, navigation, headers,
  footers, forms and templates are left out.
- ``.pdf``: pypdf (``pypdf``), page by page; pages are joined by a blank line and each page's
  offset is kept (``Document.pages``), so a chunk can say which page it came from.

A file that cannot be read is a :class:`~edgewise.errors.InputError` naming the file and the reason
(not UTF-8, binary, encrypted, damaged, no text); the caller reports it and goes on.

>>> import tempfile, pathlib
>>> p = pathlib.Path(tempfile.mkdtemp()) / "notes.md"
>>> _ = p.write_text("Intro line\\n\\n# Edge placement\\n\\nThe best chunks go first and last.\\n")
>>> doc = read_document(p)
>>> doc.title, doc.kind, doc.text.splitlines()[-1]
('Edge placement', 'md', 'The best chunks go first and last.')
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import InputError, missing_extra

SUFFIXES = {".txt": "txt", ".md": "md", ".markdown": "md", ".html": "html", ".htm": "html", ".pdf": "pdf"}
MAX_BYTES = 200 * 1024 * 1024  # one file; larger ones are refused, not read into memory
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
        n = 0
        for i, start in enumerate(self.pages):
            if start <= offset:
                n = i
        return n + 1


def kind_of(path: Path) -> str | None:
    """The reader for ``path`` by its suffix, or None if it has none."""
    return SUFFIXES.get(path.suffix.lower())


def read_document(path: str | Path) -> Document:
    """Read one file with the reader its suffix names."""
    path = Path(path)
    kind = kind_of(path)
    if kind is None:
        raise InputError(f"{path}: unsupported file type {path.suffix or '(none)'!r}; edgewise index reads "
                         f"{', '.join(sorted(set(SUFFIXES)))}")
    try:
        size = path.stat().st_size
        if size > MAX_BYTES:
            raise InputError(f"{path}: files must be at most {MAX_BYTES} bytes, but this one is {size}")
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"{path}: cannot read the file ({exc.strerror or exc})") from None
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
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
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
    for tag in soup(_SKIP_TAGS):
        tag.decompose()
    if soup.head:
        soup.head.decompose()
    for tag in soup.find_all(_BLOCKS):
        tag.insert_before("\n")
        tag.insert_after("\n")
    lines = (" ".join(line.split()) for line in soup.get_text().splitlines())
    text = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
    if not title:
        h1 = soup.find("h1")
        title = h1.get_text(" ", strip=True) if h1 else path.stem
    return Document(path, text, title, "html")


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
