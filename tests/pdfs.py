"""A minimal PDF writer for the tests and the bundled example: text pages in Helvetica, nothing else.

It writes what the PDF 1.4 reference requires of a file with text pages (a catalog, a page tree,
one content stream per page, a Type1 font, an info dictionary with the title, a cross-reference
table with exact byte offsets), so pypdf reads it as any other PDF. ``examples/docs/constitution.pdf``
is made with it: ``python tests/pdfs.py`` re-makes it, and a test holds the committed file to it.
"""

from __future__ import annotations

import textwrap
from pathlib import Path


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def pdf_bytes(pages: list[list[str]], title: str = "") -> bytes:
    """A PDF with one page per list of paragraphs (wrapped at 90 characters, 12 pt Helvetica)."""
    objects: list[bytes] = []
    n_pages = len(pages)
    page_ids = [4 + 2 * i for i in range(n_pages)]
    objects.append(b"<< /Type /Catalog /Pages 2 0 R >>")
    kids = " ".join(f"{i} 0 R" for i in page_ids)
    objects.append(f"<< /Type /Pages /Kids [{kids}] /Count {n_pages} >>".encode())
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>")
    for paragraphs in pages:
        lines: list[str] = []
        for para in paragraphs:
            lines.extend(textwrap.wrap(para, 90) or [""])
            lines.append("")
        ops = ["BT", "/F1 11 Tf", "14 TL", "56 760 Td"]
        ops += [f"({_escape(line)}) Tj T*" for line in lines]
        ops.append("ET")
        stream = "\n".join(ops).encode("latin-1")
        content_id = len(objects) + 2
        objects.append(f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> "
                       f"/Contents {content_id} 0 R >>".encode())
        objects.append(b"<< /Length " + str(len(stream)).encode() + b" >>\nstream\n" + stream + b"\nendstream")
    objects.append(f"<< /Title ({_escape(title)}) /Producer (edgewise tests/pdfs.py) >>".encode("latin-1"))
    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for n, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += f"{n} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n".encode() + b"0000000000 65535 f \n"
    out += b"".join(f"{o:010d} 00000 n \n".encode() for o in offsets)
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R /Info {len(objects)} 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)


CONSTITUTION = [
    [
        "The Constitution of the United States (excerpts)",
        "We the People of the United States, in Order to form a more perfect Union, establish Justice, insure "
        "domestic Tranquility, provide for the common defence, promote the general Welfare, and secure the "
        "Blessings of Liberty to ourselves and our Posterity, do ordain and establish this Constitution for the "
        "United States of America.",
        "Article I, Section 1. All legislative Powers herein granted shall be vested in a Congress of the United "
        "States, which shall consist of a Senate and House of Representatives.",
        "Article I, Section 2. The House of Representatives shall be composed of Members chosen every second Year "
        "by the People of the several States, and the Electors in each State shall have the Qualifications "
        "requisite for Electors of the most numerous Branch of the State Legislature.",
        "No Person shall be a Representative who shall not have attained to the Age of twenty five Years, and been "
        "seven Years a Citizen of the United States, and who shall not, when elected, be an Inhabitant of that "
        "State in which he shall be chosen.",
    ],
    [
        "Article I, Section 3. The Senate of the United States shall be composed of two Senators from each State, "
        "chosen by the Legislature thereof, for six Years; and each Senator shall have one Vote.",
        "No Person shall be a Senator who shall not have attained to the Age of thirty Years, and been nine Years a "
        "Citizen of the United States, and who shall not, when elected, be an Inhabitant of that State for which "
        "he shall be chosen.",
        "Article II, Section 1. No Person except a natural born Citizen, or a Citizen of the United States, at the "
        "time of the Adoption of this Constitution, shall be eligible to the Office of President; neither shall "
        "any Person be eligible to that Office who shall not have attained to the Age of thirty five Years, and "
        "been fourteen Years a Resident within the United States.",
    ],
]
EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "docs" / "constitution.pdf"


def constitution_pdf() -> bytes:
    return pdf_bytes(CONSTITUTION, "The Constitution of the United States (excerpts)")


if __name__ == "__main__":
    EXAMPLE.write_bytes(constitution_pdf())
    print(f"wrote {EXAMPLE}")
