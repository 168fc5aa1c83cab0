"""Writers of small, real test files: born-digital and scanned PDFs, DOCX, HTML,
Markdown, text in several encodings, and images with text to OCR.

Every function writes one file at `path` and returns that path as a `Path`. The
defaults make a sensible document, so `make_docx(tmp_path / "plan.docx")` is enough;
the module constants are the text the defaults contain, for assertions.

    from filegen import make_pdf   # pytest puts tests/ on sys.path (no __init__.py)
    make_pdf(tmp_path / "a.pdf", [["Intro", "First paragraph."], ["Page two."]])
"""

from __future__ import annotations

import os
import textwrap
from collections.abc import Sequence
from pathlib import Path

SCAN_TEXT = (
    "Groundwork reads scanned pages with optical character recognition. "
    "The quick brown fox jumps over the lazy dog near the river bank."
)
IMAGE_TEXT = "Invoice number 4711 is due on Friday for the garden tools order"

DOCX_PARAGRAPHS = (
    "The committee approved the annual plan for the community garden.",
    "Work starts in April and finishes before the harvest festival.",
)
DOCX_TABLE = (("Item", "Cost", "Owner"), ("Seeds", "120", "Alice"), ("Tools", "340", "Bob"))
DOCX_BULLETS = ("Order compost", "Repair the fence")

HTML_PARAGRAPHS = (
    "Tomatoes need at least six hours of direct sunlight every day to produce a good harvest.",
    "Water deeply twice a week rather than a little every day, so the roots grow down into the soil.",
    "Check the undersides of leaves for aphids and whiteflies every few days during the season.",
)
# Phrases placed in the navigation, cookie banner, script and footer of `make_html`.
HTML_BOILERPLATE = (
    "Navigation home link",
    "We use cookies to improve your experience",
    "trackingPixelFunction",
    "Copyright 2026 Example Gardens Footer",
)

MARKDOWN = """\
# User Guide

Groundwork answers questions
about your documents.

## Install

Run the installer:

```bash
# this is a shell comment, not a heading
make install
```

| Option | Default |
|--------|---------|
| port   | 8000    |
| host   | 127.0.0.1 |

- first step
- second step
  continues here

### Notes

Last paragraph.
"""

# Text with characters that differ between encodings (all inside cp1252).
ACCENTED_TEXT = "Café crème brûlée — a naïve “façade” costs 5 €.\n\nDéjà vu, señor Müller."
LATIN1_TEXT = "Größe: 5 µm, 20 °C, ½ litre; naïve façade.\n\nÀ bientôt, Zoë."


def make_pdf(
    path: str | os.PathLike, pages: Sequence[Sequence[str]], title: str | None = None
) -> Path:
    """A born-digital PDF: one list of paragraphs per page, in Helvetica (latin-1 text
    only). Paragraphs are separated by a gap, as in real documents. `title` goes into
    the PDF metadata."""
    from fpdf import FPDF

    pdf = FPDF(format="A4")
    pdf.set_font("Helvetica", size=11)
    if title:
        pdf.set_title(title)
    for paragraphs in pages:
        pdf.add_page()
        for paragraph in paragraphs:
            pdf.multi_cell(0, 5.5, paragraph, new_x="LMARGIN", new_y="NEXT")
            pdf.ln(4)
    pdf.output(str(path))
    return Path(path)


def make_scanned_pdf(path: str | os.PathLike, text: str = SCAN_TEXT, dpi: int = 200) -> Path:
    """A one-page PDF with no text layer: `text` rendered to a greyscale image at
    `dpi` (12 pt type), saved as a PDF by Pillow, like a scanner would."""
    width = int(8.27 * dpi)  # A4 width; the height only fits the text, to keep OCR fast
    image = _render(text, width=width, font_px=int(12 / 72 * dpi), margin=dpi // 2)
    image.save(str(path), "PDF", resolution=dpi)
    return Path(path)


def make_png(path: str | os.PathLike, text: str = IMAGE_TEXT, font_px: int = 32) -> Path:
    """A PNG of black `text` on white, like a screenshot."""
    _render(text, width=1000, font_px=font_px, margin=40).save(str(path), "PNG")
    return Path(path)


def make_image(path: str | os.PathLike, text: str = IMAGE_TEXT, fmt: str = "JPEG") -> Path:
    """Like `make_png` in another Pillow format ("JPEG", "WEBP", "GIF"...)."""
    image = _render(text, width=1000, font_px=32, margin=40)
    image.save(str(path), fmt)
    return Path(path)


def make_docx(
    path: str | os.PathLike,
    heading: str = "Garden Plan",
    paragraphs: Sequence[str] = DOCX_PARAGRAPHS,
    table: Sequence[Sequence[str]] = DOCX_TABLE,
    *,
    subheading: str = "Budget",
    bullets: Sequence[str] = DOCX_BULLETS,
) -> Path:
    """A DOCX in this order: `heading` (Heading 1), paragraphs[0], `subheading`
    (Heading 2), `table` (first row is the header), paragraphs[1:], then `bullets`
    (List Bullet style)."""
    import docx

    document = docx.Document()
    document.add_heading(heading, level=1)
    if paragraphs:
        document.add_paragraph(paragraphs[0])
    document.add_heading(subheading, level=2)
    if table:
        grid = document.add_table(rows=len(table), cols=len(table[0]))
        for r, row in enumerate(table):
            for c, value in enumerate(row):
                grid.cell(r, c).text = value
    for paragraph in paragraphs[1:]:
        document.add_paragraph(paragraph)
    for bullet in bullets:
        document.add_paragraph(bullet, style="List Bullet")
    document.save(str(path))
    return Path(path)


def make_html(
    path: str | os.PathLike,
    title: str = "Growing Tomatoes",
    paragraphs: Sequence[str] = HTML_PARAGRAPHS,
    *,
    boilerplate: bool = True,
) -> Path:
    """An article page: <h1>`title`</h1>, then each paragraph under its own <h2>
    ("Section 1", "Section 2"...), and a small table (Variety | Days; Roma | 75).
    With `boilerplate`, a nav bar, cookie banner, script and footer around it carry
    the phrases in HTML_BOILERPLATE."""
    nav, cookie, script, footer = HTML_BOILERPLATE
    sections = "\n".join(
        f"<h2>Section {n}</h2>\n<p>{text}</p>" for n, text in enumerate(paragraphs, start=1)
    )
    around = boilerplate
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title} | Example Gardens</title>
{"<script>function " + script + "() { return 1; }</script>" if around else ""}
<style>body {{ font-family: sans-serif; }}</style></head>
<body>
{f'<nav><ul><li><a href="/">{nav}</a></li><li><a href="/about">About us</a></li></ul></nav>' if around else ""}
{f'<div id="cookie-banner" class="cookie-consent"><p>{cookie}. Accept all cookies.</p></div>' if around else ""}
<main><article>
<h1>{title}</h1>
{sections}
<table><tr><th>Variety</th><th>Days</th></tr><tr><td>Roma</td><td>75</td></tr></table>
</article></main>
{f"<footer><p>{footer}. All rights reserved.</p></footer>" if around else ""}
</body></html>
"""
    Path(path).write_text(page, encoding="utf-8")
    return Path(path)


def make_markdown(path: str | os.PathLike, text: str = MARKDOWN) -> Path:
    """Markdown, UTF-8. The default has ATX headings (levels 1-3), a fenced code block
    containing a `#` line, a pipe table, a list and wrapped paragraphs."""
    Path(path).write_text(text, encoding="utf-8")
    return Path(path)


def make_text(path: str | os.PathLike, text: str = ACCENTED_TEXT, encoding: str = "utf-8") -> Path:
    """`text` encoded with `encoding`: "utf-8", "utf-8-sig" (with BOM), "utf-16" (with
    BOM), "cp1252", "latin-1"..."""
    Path(path).write_bytes(text.encode(encoding))
    return Path(path)


def font_path() -> str | None:
    """A TrueType font on this machine (DejaVu Sans on Debian), or None."""
    for candidate in (
        "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
        "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
        "/usr/share/fonts/TTF/DejaVuSans.ttf",
    ):
        if os.path.exists(candidate):
            return candidate
    return None


def _render(text: str, *, width: int, font_px: int, margin: int):
    """Black text on a white greyscale canvas, wrapped to `width`."""
    from PIL import Image, ImageDraw, ImageFont

    found = font_path()
    # Pillow >= 10.1 ships a scalable default font when no TrueType font is installed.
    font = ImageFont.truetype(found, font_px) if found else ImageFont.load_default(size=font_px)
    chars_per_line = max(10, int((width - 2 * margin) / (font_px * 0.55)))
    lines = textwrap.wrap(text, chars_per_line) or [""]
    line_height = int(font_px * 1.5)
    height = 2 * margin + line_height * len(lines)
    image = Image.new("L", (width, height), 255)
    draw = ImageDraw.Draw(image)
    for n, line in enumerate(lines):
        draw.text((margin, margin + n * line_height), line, fill=0, font=font)
    return image
