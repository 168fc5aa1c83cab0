"""PDF with pypdf: paragraphs per page from the text layer; pages without one are
OCR'd from their images."""

from __future__ import annotations

import io
from typing import Any

from groundwork.errors import ExtractError
from groundwork.extract.text import clean, join_lines, paragraphs, stem
from groundwork.types import Block, Extracted

# A vertical step this much larger than the page's usual line spacing starts a new
# paragraph; pypdf's plain text has no blank lines between paragraphs.
_PARAGRAPH_GAP = 1.3
_BULLETS = tuple("•◦▪▫●○■□‣⁃")  # a bulleted item starts its own paragraph
_SINGLE_SPACING = 1.5  # line step in font sizes; ordinary leading is 1.15-1.45
_FONT_CHANGE = 0.15  # a heading in a larger font is its own paragraph
_MIN_SCAN_SIDE = 200  # smaller images are logos or figures, not scanned text

Line = tuple[str, float | None, float | None]  # text, baseline y, font size


def extract_pdf(data: bytes, filename: str, *, ocr: bool) -> Extracted:
    from pypdf import PdfReader

    reader = PdfReader(io.BytesIO(data))
    if reader.is_encrypted:
        _unlock(reader, filename)
    pages = reader.pages
    if len(pages) == 0:
        raise ExtractError(f"{filename}: the PDF has no pages")

    blocks: list[Block] = []
    ocr_pages: list[int] = []
    for number, page in enumerate(pages, start=1):
        texts = _page_paragraphs(page)
        if not texts and ocr:
            scanned = _ocr_page(page, filename)
            if scanned is not None:
                ocr_pages.append(number)
                texts = paragraphs(scanned, dehyphenate=True)
        blocks.extend(Block("paragraph", t, page=number) for t in texts)

    return Extracted(
        title=_metadata_title(reader) or _first_line(blocks) or stem(filename),
        blocks=tuple(blocks),
        content_type="application/pdf",
        page_count=len(pages),
        ocr_pages=tuple(ocr_pages),
    )


def _unlock(reader: Any, filename: str) -> None:
    """Many PDFs are encrypted only to restrict printing, with an empty user password;
    those open. Anything else needs a password we do not have."""
    from pypdf.errors import DependencyError

    try:
        opened = reader.decrypt("")
    except DependencyError as exc:  # AES without the optional crypto package
        raise ExtractError(
            f"{filename}: the PDF is AES-encrypted; reading it needs the cryptography "
            "package: pip install cryptography"
        ) from exc
    except Exception:  # an unknown security handler: as good as locked
        opened = 0
    if not opened:
        raise ExtractError(f"{filename}: the PDF is encrypted with a password")


def _page_paragraphs(page: Any) -> list[str]:
    lines = _page_lines(page)
    spacing = _line_spacing(lines)
    out: list[str] = []
    current: list[str] = []
    previous: Line | None = None
    for line in lines:
        if not line[0].strip():
            if current:
                out.append(join_lines(current, dehyphenate=True))
                current = []
            previous = None
            continue
        if current and previous is not None and _breaks(previous, line, spacing):
            out.append(join_lines(current, dehyphenate=True))
            current = []
        current.append(line[0])
        previous = line
    if current:
        out.append(join_lines(current, dehyphenate=True))
    return [p for p in out if p]


def _step(previous: Line, line: Line) -> float | None:
    """How far down the page `line` is from `previous`, in units of its font size."""
    _, y0, _ = previous
    _, y1, size = line
    if y0 is None or y1 is None:
        return None
    return (y0 - y1) / (size or 1.0)


def _line_spacing(lines: list[Line]) -> float | None:
    """The page's ordinary line-to-line step: a low quantile of the downward steps, as
    on a short page the gaps between paragraphs can outnumber the lines within them.
    With only a few steps (a page of one-line paragraphs) there is nothing to learn
    from, so the step is capped at ordinary single spacing."""
    steps = sorted(s for a, b in zip(lines, lines[1:]) if (s := _step(a, b)) is not None and s > 0)
    if not steps:
        return None
    spacing = steps[len(steps) // 4]
    return min(spacing, _SINGLE_SPACING) if len(steps) < 4 else spacing


def _breaks(previous: Line, line: Line, spacing: float | None) -> bool:
    """Whether `line` starts a new paragraph after `previous`."""
    if line[0].lstrip().startswith(_BULLETS):
        return True
    step = _step(previous, line)
    if spacing and step is not None:
        if step > spacing * _PARAGRAPH_GAP or step < -spacing * 0.5:  # < 0: next column
            return True
    size0, size1 = previous[2], line[2]
    if size0 and size1 and abs(size0 - size1) > _FONT_CHANGE * max(size0, size1):
        return True
    return False


def _page_lines(page: Any) -> list[Line]:
    """pypdf's text, line by line, each with the position and font size it was drawn
    at (from the extraction visitor, whose pieces add up to the extracted text)."""
    pieces: list[tuple[str, float, float]] = []

    def visit(text: str, cm: list[float], tm: list[float], font: Any, size: float) -> None:
        y = tm[4] * cm[1] + tm[5] * cm[3] + cm[5]
        scale = abs(tm[3] * cm[3]) or 1.0
        pieces.append((text, y, (size or 0.0) * scale))

    page.extract_text(visitor_text=visit)
    lines: list[Line] = []
    parts: list[str] = []
    y: float | None = None
    size: float | None = None
    widest = 0  # a line's font size is that of its longest piece, not of a bullet glyph
    for text, piece_y, piece_size in pieces:
        for k, part in enumerate(text.split("\n")):
            if k:
                lines.append(("".join(parts), y, size))
                parts, y, size, widest = [], None, None, 0
            if part.strip():
                if y is None:
                    y = piece_y
                if len(part.strip()) > widest:
                    size, widest = piece_size, len(part.strip())
            parts.append(part)
    lines.append(("".join(parts), y, size))
    return lines


def _ocr_page(page: Any, filename: str) -> str | None:
    """OCR the page's images in the order they are drawn. None if the page has no
    image big enough to be a scan (a truly blank page)."""
    from groundwork.extract.ocr import ocr_image

    texts = []
    for image_file in page.images:
        image = image_file.image
        if image is None or min(image.size) < _MIN_SCAN_SIDE:
            continue
        texts.append(ocr_image(image, filename))
    if not texts:
        return None
    return "\n\n".join(texts)


def _metadata_title(reader: Any) -> str:
    try:
        title = reader.metadata.title if reader.metadata else None
    except Exception:  # a malformed info dictionary is not worth failing the file for
        return ""
    return clean(str(title))[:200] if title else ""


def _first_line(blocks: list[Block]) -> str:
    return blocks[0].text[:200] if blocks else ""
