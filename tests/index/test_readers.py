"""Reading files for ``edgewise index`` and cutting them into chunks: every kind, every refusal, and
the chunk spans' properties."""

from __future__ import annotations

import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edgewise.errors import InputError
from edgewise.index.chunking import split_text
from edgewise.index.readers import read_document
from edgewise.tokens.tokenizers import get_tokenizer

from ..conftest import ROOT
from ..pdfs import EXAMPLE, constitution_pdf, pdf_bytes

pytest.importorskip("pypdf", reason="needs the index extra: pip install -e '.[index]'")
pytest.importorskip("bs4", reason="needs the index extra: pip install -e '.[index]'")

DOCS = ROOT / "examples" / "docs"


def test_the_bundled_pdf_is_the_one_tests_pdfs_makes():
    assert EXAMPLE.read_bytes() == constitution_pdf()


def test_each_bundled_document_reads_with_its_title_and_kind():
    got = {p.name: read_document(p) for p in sorted(DOCS.iterdir())}
    assert {n: (d.title, d.kind) for n, d in got.items()} == {
        "bill-of-rights.md": ("The Bill of Rights", "md"),
        "constitution.pdf": ("The Constitution of the United States (excerpts)", "pdf"),
        "declaration-of-independence.html": ("The Declaration of Independence (opening)", "html"),
        "gettysburg-address.txt": ("The Gettysburg Address", "txt"),
    }
    pdf = got["constitution.pdf"]
    assert len(pdf.pages) == 2 and pdf.pages[0] == 0
    assert pdf.text[pdf.pages[1]:].startswith("Article I, Section 3. The Senate")
    assert pdf.page_at(0) == 1 and pdf.page_at(pdf.pages[1]) == 2
    html = got["declaration-of-independence.html"].text
    assert html.startswith("The Declaration of Independence\n\nIn Congress, July 4, 1776.")
    for left_out in ("console.log", "Home", "Transcribed from", "font-family"):  # script, nav, footer, style
        assert left_out not in html
    assert got["gettysburg-address.txt"].text == (DOCS / "gettysburg-address.txt").read_text()


def test_markdown_front_matter_is_not_text(tmp_path):
    p = tmp_path / "a.md"
    p.write_text("---\ntitle: x\n---\nBody first.\n\n## Later heading\n")
    doc = read_document(p)
    assert (doc.text, doc.title) == ("Body first.\n\n## Later heading\n", "Later heading")


@pytest.mark.parametrize("name, data, message", [
    ("binary.txt", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "binary.txt: a text file must not hold NUL bytes; this looks like a binary file"),
    ("latin.md", "caf\xe9 au lait".encode("latin-1"), "latin.md: text files must be UTF-8, but byte 3 is not (b'\\xe9')"),
    ("empty.txt", b"  \n\n", "empty.txt: no text to index (the file is empty or holds no extractable text)"),
    ("broken.pdf", b"%PDF-1.4\nthis is not a pdf body", "broken.pdf: not a readable PDF"),
    ("blank.pdf", pdf_bytes([[""]]), "blank.pdf: no text to index (the file is empty or holds no extractable text)"),
    ("image.html", b"\x00\x01\x02<html>", "image.html: an HTML file must not hold NUL bytes; this looks like a binary file"),
    ("notes.docx", b"PK\x03\x04", "notes.docx: unsupported file type '.docx'; edgewise index reads .htm, .html, .markdown, .md, .pdf, .txt"),
])
def test_a_file_that_cannot_be_read_is_one_line_naming_it_and_why(tmp_path, name, data, message):
    p = tmp_path / name
    p.write_bytes(data)
    with pytest.raises(InputError) as err:
        read_document(p)
    assert str(err.value).startswith(str(tmp_path / message.split(":")[0]) + ":")
    assert str(err.value).removeprefix(str(tmp_path) + "/").startswith(message)
    assert "\n" not in str(err.value)


def test_an_encrypted_pdf_is_refused(tmp_path):
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter()
    writer.append(PdfReader(io.BytesIO(constitution_pdf())))
    writer.encrypt("secret")
    p = tmp_path / "locked.pdf"
    with open(p, "wb") as f:
        writer.write(f)
    with pytest.raises(InputError) as err:
        read_document(p)
    assert str(err.value) == f"{p}: the PDF is encrypted; edgewise index reads only unencrypted PDFs"


def test_chunks_of_a_document_are_exact_spans_within_size_with_overlap():
    tok = get_tokenizer("cl100k_base")
    text = read_document(DOCS / "bill-of-rights.md").text
    pieces = split_text(text, tok, size=120, overlap=60)
    assert [p.text for p in pieces] == [text[p.start:p.end] for p in pieces]
    assert all(p.tokens == tok.count(p.text) <= 120 for p in pieces)
    assert pieces[0].start == 0 and pieces[-1].end == len(text.rstrip())
    for a, b in zip(pieces, pieces[1:]):
        assert a.start < b.start <= a.end + 2  # consecutive chunks touch or overlap: nothing skipped
        assert b.start >= a.end or tok.count(text[b.start:a.end]) <= 60  # the shared sentences fit the overlap
    assert sum(b.start < a.end for a, b in zip(pieces, pieces[1:])) >= 2  # and overlap is used


def test_a_sentence_longer_than_a_chunk_is_cut_at_token_boundaries():
    tok = get_tokenizer("cl100k_base")
    text = "word " * 500 + "end."
    pieces = split_text(text, tok, size=64, overlap=8)
    assert all(p.tokens <= 64 for p in pieces)
    assert "".join(p.text.replace(" ", "") for p in pieces) == text.replace(" ", "")


def test_bad_chunk_sizes_are_errors():
    tok = get_tokenizer("words")
    with pytest.raises(InputError, match=r"^overlap_tokens must be smaller than chunk_tokens \(16\), but got 16$"):
        split_text("a b c", tok, size=16, overlap=16)
    with pytest.raises(InputError, match=r"^chunk_tokens must be >= 4, but got 2$"):
        split_text("a b c", tok, size=2, overlap=0)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=80),
                min_size=1, max_size=12).map(". ".join),
       st.integers(8, 60), st.integers(0, 7))
def test_chunk_properties(text, size, overlap):
    tok = get_tokenizer("cl100k_base")
    pieces = split_text(text, tok, size=size, overlap=overlap)
    for p in pieces:
        assert p.text == text[p.start:p.end] and p.text.strip() == p.text and p.text
        assert p.tokens == tok.count(p.text) <= size
    assert [p.start for p in pieces] == sorted({p.start for p in pieces})  # strictly advancing
    covered = set()
    for p in pieces:
        covered.update(range(p.start, p.end))
    assert all(i in covered for i, ch in enumerate(text) if not ch.isspace())  # no text is lost
