"""groundwork.extract on real small files written by tests/filegen.py. OCR runs the
real Tesseract on one short page per fixture (module-scoped, so once each)."""

from __future__ import annotations

import io
import random
import re
import subprocess
import sys
import zipfile

import filegen
import pytest

from groundwork.errors import ExtractError, UnsupportedFile
from groundwork.extract import SUPPORTED_TYPES, ensure_matches, extract, sniff
from groundwork.extract.docx import CONTENT_TYPE as DOCX

needs_tesseract = pytest.mark.skipif(
    subprocess.run(["sh", "-c", "command -v tesseract"], capture_output=True).returncode != 0,
    reason="tesseract is not installed (make install adds it)",
)


def words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower()))


def recall(expected: str, got: str) -> float:
    """Share of the expected words (case-insensitive) that appear in `got`."""
    want = re.findall(r"[a-z0-9]+", expected.lower())
    found = words(got)
    return sum(w in found for w in want) / len(want)


def read(path) -> bytes:
    return path.read_bytes()


# --- sniffing and declared types -----------------------------------------------------


def test_sniff_recognises_every_supported_format(tmp_path):
    files = {
        "application/pdf": filegen.make_pdf(tmp_path / "a.pdf", [["Hello."]]),
        DOCX: filegen.make_docx(tmp_path / "a.docx"),
        "image/png": filegen.make_png(tmp_path / "a.png", "x"),
        "image/jpeg": filegen.make_image(tmp_path / "a.jpg", "x", "JPEG"),
        "image/webp": filegen.make_image(tmp_path / "a.webp", "x", "WEBP"),
        "text/html": filegen.make_html(tmp_path / "a.html"),
        "text/markdown": filegen.make_markdown(tmp_path / "a.md"),
        "text/plain": filegen.make_text(tmp_path / "a.txt"),
    }
    assert set(files) == set(SUPPORTED_TYPES)
    for expected, path in files.items():
        # The bytes decide, not the name: every binary format is found without its extension.
        name = path.name if expected.startswith("text/") else "upload"
        assert sniff(read(path), name) == expected, path.name


def test_sniff_text_types_use_markers_then_extension():
    assert sniff(b"<!DOCTYPE html><html><body>x</body></html>", "page.txt") == "text/html"
    assert sniff("<html><body>hi</body></html>".encode("utf-16"), "page") == "text/html"
    assert sniff(b"<p>fragment</p>", "frag.htm") == "text/html"
    assert sniff(b"# Title", "notes.markdown") == "text/markdown"
    assert sniff(b"# Title", "notes") == "text/plain"
    assert sniff(b"", "empty.txt") == "text/plain"


def test_binary_garbage_is_not_text():
    garbage = random.Random(0).randbytes(4096)
    assert sniff(garbage, "notes.txt") == "application/octet-stream"
    no_nul = bytes(b or 1 for b in garbage)
    assert sniff(no_nul, "notes.txt") == "application/octet-stream"
    with pytest.raises(UnsupportedFile, match=r"^notes\.txt: "):
        extract(garbage, "notes.txt")
    with pytest.raises(UnsupportedFile, match=r"^blob: unsupported file type application/octet-stream"):
        extract(b"\x00\x01\x02\x03" * 100, "blob")


def test_unsupported_formats_are_refused(tmp_path):
    gif = read(filegen.make_image(tmp_path / "a.gif", "x", "GIF"))
    with pytest.raises(UnsupportedFile, match=r"^a\.gif: unsupported file type image/gif$"):
        extract(gif, "a.gif")


def zip_bytes(files: dict[str, str]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return buffer.getvalue()


def test_ensure_matches_refuses_a_pdf_that_is_a_zip():
    data = zip_bytes({"readme.txt": "hello"})
    message = "report.pdf: declared application/pdf but the content is application/zip"
    with pytest.raises(UnsupportedFile, match=f"^{re.escape(message)}$"):
        ensure_matches("report.pdf", None, data)
    with pytest.raises(UnsupportedFile, match=re.escape(message)):
        ensure_matches("report.pdf", "application/pdf", data)
    with pytest.raises(UnsupportedFile):
        extract(data, "report.pdf")


def test_ensure_matches_accepts_consistent_and_compatible_claims(tmp_path):
    pdf = read(filegen.make_pdf(tmp_path / "a.pdf", [["Hello."]]))
    png = read(filegen.make_png(tmp_path / "a.png", "x"))
    assert ensure_matches("a.pdf", "application/pdf; charset=binary", pdf) == "application/pdf"
    assert ensure_matches("a.pdf", "application/octet-stream", pdf) == "application/pdf"
    assert ensure_matches("photo.jpg", None, png) == "image/png"  # misnamed image: harmless
    assert ensure_matches("notes.md", "text/plain", b"# Hi") == "text/markdown"
    assert ensure_matches("data.json", "application/json", b'{"a": 1}') == "text/plain"
    # Text without a telling extension: the declared Markdown is believed.
    assert ensure_matches("pasted", "text/markdown", b"# Hi") == "text/markdown"
    with pytest.raises(UnsupportedFile, match="declared application/pdf but the content is text/plain"):
        ensure_matches("pasted", "application/pdf", b"just text")
    with pytest.raises(UnsupportedFile, match="declared image/png but the content is application/pdf"):
        ensure_matches("a.png", None, pdf)


# --- PDF -----------------------------------------------------------------------------

LONG = (
    "The garden committee met on Tuesday to review the spring planting schedule, the budget "
    "for new tools and the rota for watering during the summer holidays."
)


def test_pdf_paragraphs_carry_page_numbers(tmp_path):
    path = filegen.make_pdf(
        tmp_path / "minutes.pdf",
        [["Meeting Minutes", LONG, "Second item: the compost heap needs turning."], ["Next meeting in May."]],
        title="Garden Minutes",
    )
    result = extract(read(path), "minutes.pdf")
    assert result.title == "Garden Minutes"
    assert result.content_type == "application/pdf"
    assert result.page_count == 2
    assert result.ocr_pages == ()
    assert [(b.kind, b.page, b.text) for b in result.blocks] == [
        ("paragraph", 1, "Meeting Minutes"),
        ("paragraph", 1, LONG),  # wrapped lines joined back into one paragraph
        ("paragraph", 1, "Second item: the compost heap needs turning."),
        ("paragraph", 2, "Next meeting in May."),
    ]


def test_pdf_title_falls_back_to_first_line(tmp_path):
    path = filegen.make_pdf(tmp_path / "untitled.pdf", [["Planting Guide", "Sow in spring."]])
    assert extract(read(path), "untitled.pdf").title == "Planting Guide"


def test_corrupt_pdf_raises_extract_error_naming_the_file(tmp_path):
    data = read(filegen.make_pdf(tmp_path / "a.pdf", [[LONG], [LONG]]))
    for cut in (len(data) // 2, 40):
        with pytest.raises(ExtractError, match=r"^report\.pdf: "):
            extract(data[:cut], "report.pdf")


def test_password_protected_pdf_raises_extract_error(tmp_path):
    from fpdf import FPDF

    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("Helvetica")
    pdf.cell(text="Secret plans")
    pdf.set_encryption(owner_password="owner", user_password="letmein")
    path = tmp_path / "locked.pdf"
    pdf.output(str(path))
    with pytest.raises(ExtractError, match=r"^locked\.pdf: .*password"):
        extract(read(path), "locked.pdf")


@pytest.fixture(scope="module")
def scanned_pdf(tmp_path_factory) -> bytes:
    return read(filegen.make_scanned_pdf(tmp_path_factory.mktemp("scan") / "scan.pdf"))


@needs_tesseract
def test_scanned_pdf_is_ocrd(scanned_pdf):
    result = extract(scanned_pdf, "scan.pdf")
    assert result.page_count == 1
    assert result.ocr_pages == (1,)
    assert result.blocks and all(b.page == 1 and b.kind == "paragraph" for b in result.blocks)
    assert recall(filegen.SCAN_TEXT, result.text) >= 0.9, result.text


def test_scanned_pdf_without_ocr_has_no_text(scanned_pdf):
    result = extract(scanned_pdf, "scan.pdf", ocr=False)
    assert result.blocks == ()
    assert result.ocr_pages == ()
    assert result.title == "scan"


# --- DOCX ----------------------------------------------------------------------------


def test_docx_headings_table_and_lists_in_body_order(tmp_path):
    path = filegen.make_docx(tmp_path / "plan.docx")
    result = extract(read(path), "plan.docx")
    assert result.content_type == DOCX
    assert result.title == "Garden Plan"
    assert [(b.kind, b.level, b.text) for b in result.blocks] == [
        ("heading", 1, "Garden Plan"),
        ("paragraph", 0, filegen.DOCX_PARAGRAPHS[0]),
        ("heading", 2, "Budget"),
        ("table", 0, "Item | Cost | Owner\nSeeds | 120 | Alice\nTools | 340 | Bob"),
        ("paragraph", 0, filegen.DOCX_PARAGRAPHS[1]),
        ("list", 0, "- Order compost\n- Repair the fence"),
    ]
    assert all(b.page is None for b in result.blocks)


def test_corrupt_docx_raises_extract_error():
    data = zip_bytes({"[Content_Types].xml": "x", "word/document.xml": "<not xml"})
    assert sniff(data, "bad.docx") == DOCX
    with pytest.raises(ExtractError, match=r"^bad\.docx: could not read the DOCX"):
        extract(data, "bad.docx")


# --- HTML ----------------------------------------------------------------------------


def test_html_keeps_main_text_and_headings_without_boilerplate(tmp_path):
    path = filegen.make_html(tmp_path / "tomatoes.html")
    result = extract(read(path), "tomatoes.html")
    assert result.title == "Growing Tomatoes"
    headings = [(b.level, b.text) for b in result.blocks if b.kind == "heading"]
    assert headings == [(1, "Growing Tomatoes"), (2, "Section 1"), (2, "Section 2"), (2, "Section 3")]
    paragraphs = [b.text for b in result.blocks if b.kind == "paragraph"]
    assert paragraphs == list(filegen.HTML_PARAGRAPHS)
    assert [b.text for b in result.blocks if b.kind == "table"] == ["Variety | Days\nRoma | 75"]
    for phrase in filegen.HTML_BOILERPLATE:
        assert phrase.lower() not in result.text.lower()


def test_tiny_html_page_still_extracts():
    result = extract(b"<p>Short page</p>", "tiny.html")
    assert result.text == "Short page"
    result = extract(b"<html><head><title>T &amp; C</title></head><body>Hi</body></html>", "t.html")
    assert "Hi" in result.text
    assert result.title == "T & C"


# --- Markdown and plain text ---------------------------------------------------------


def test_markdown_structure(tmp_path):
    result = extract(read(filegen.make_markdown(tmp_path / "guide.md")), "guide.md")
    assert result.title == "User Guide"
    assert [(b.kind, b.level, b.text) for b in result.blocks] == [
        ("heading", 1, "User Guide"),
        ("paragraph", 0, "Groundwork answers questions about your documents."),
        ("heading", 2, "Install"),
        ("paragraph", 0, "Run the installer:"),
        ("code", 0, "# this is a shell comment, not a heading\nmake install"),
        ("table", 0, "Option | Default\nport | 8000\nhost | 127.0.0.1"),
        ("list", 0, "- first step\n- second step continues here"),
        ("heading", 3, "Notes"),
        ("paragraph", 0, "Last paragraph."),
    ]


def test_markdown_front_matter_and_setext_headings():
    text = "---\ntitle: From Front Matter\ntags: [a]\n---\nIntro\n=====\n\nBody text.\n\nPart\n----\n"
    result = extract(text.encode(), "doc.md")
    assert result.title == "From Front Matter"
    assert [(b.kind, b.level, b.text) for b in result.blocks] == [
        ("heading", 1, "Intro"),
        ("paragraph", 0, "Body text."),
        ("heading", 2, "Part"),
    ]


@pytest.mark.parametrize("encoding", ["utf-8", "utf-8-sig", "utf-16", "cp1252"])
def test_text_encodings_decode_exactly(tmp_path, encoding):
    path = filegen.make_text(tmp_path / "notes.txt", filegen.ACCENTED_TEXT, encoding)
    result = extract(read(path), "notes.txt")
    assert result.content_type == "text/plain"
    assert result.text == filegen.ACCENTED_TEXT
    assert [b.kind for b in result.blocks] == ["paragraph", "paragraph"]


def test_latin1_text_decodes_exactly(tmp_path):
    path = filegen.make_text(tmp_path / "notes.txt", filegen.LATIN1_TEXT, "latin-1")
    assert extract(read(path), "notes.txt").text == filegen.LATIN1_TEXT


def test_plain_text_paragraphs_are_normalised():
    data = b"  First   line\r\nwraps here.\r\n\r\n\r\n\tSecond\x07 paragraph.  \n   \n"
    result = extract(data, "n.txt")
    assert [b.text for b in result.blocks] == ["First line wraps here.", "Second paragraph."]
    assert result.title == "First line wraps here."


# --- images --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def png(tmp_path_factory) -> bytes:
    return read(filegen.make_png(tmp_path_factory.mktemp("png") / "invoice.png"))


@needs_tesseract
def test_png_is_ocrd(png):
    result = extract(png, "invoice.png")
    assert result.content_type == "image/png"
    assert result.ocr_pages == (1,)
    assert result.page_count == 1
    assert all(b.page == 1 for b in result.blocks)
    assert recall(filegen.IMAGE_TEXT, result.text) >= 0.9, result.text


def test_images_need_ocr_enabled(png):
    with pytest.raises(ExtractError, match=r"^invoice\.png: OCR is disabled"):
        extract(png, "invoice.png", ocr=False)


def test_missing_tesseract_gives_an_install_hint(png, monkeypatch):
    import pytesseract

    monkeypatch.setattr(pytesseract.pytesseract, "tesseract_cmd", "/nonexistent/tesseract")
    with pytest.raises(ExtractError, match=r"^invoice\.png: OCR needs tesseract: apt-get install"):
        extract(png, "invoice.png")


def test_truncated_image_raises_extract_error(png):
    with pytest.raises(ExtractError, match=r"^invoice\.png: could not read the PNG image"):
        extract(png[:200], "invoice.png")


# --- every block is clean; the package imports light ---------------------------------


def test_blocks_are_stripped_and_never_empty(tmp_path):
    files = [
        filegen.make_pdf(tmp_path / "a.pdf", [["  Spaced   out  ", LONG]]),
        filegen.make_docx(tmp_path / "a.docx", paragraphs=("  padded  text ", "")),
        filegen.make_html(tmp_path / "a.html"),
        filegen.make_markdown(tmp_path / "a.md"),
        filegen.make_text(tmp_path / "a.txt", "\n\n  a  \n\n\n b \n"),
    ]
    for path in files:
        for block in extract(read(path), path.name).blocks:
            assert block.text and block.text == block.text.strip(), (path.name, block)
            if block.kind in ("paragraph", "heading"):
                assert "  " not in block.text and "\n" not in block.text, (path.name, block)


def test_import_does_not_load_heavy_libraries():
    heavy = ("pypdf", "docx", "trafilatura", "PIL", "pytesseract", "lxml", "charset_normalizer")
    code = f"import sys, groundwork.extract; print([m for m in {heavy!r} if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
