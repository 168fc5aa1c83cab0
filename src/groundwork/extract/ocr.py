"""OCR of one image with Tesseract (through pytesseract). Used for image files and
for PDF pages that have no text layer."""

from __future__ import annotations

from typing import TYPE_CHECKING

from groundwork.errors import ExtractError

if TYPE_CHECKING:
    from PIL.Image import Image

INSTALL_HINT = "OCR needs tesseract: apt-get install tesseract-ocr tesseract-ocr-eng"
LANG = "eng"
TIMEOUT_S = 120  # per image; a pathological image must not hang an ingest job
# Tesseract reads best when letters are 20+ pixels tall; screenshots and small scans
# are often below that, so images smaller than this are upscaled before OCR.
_MIN_SIDE = 1200
_MIN_OCR_SIDE = 16  # icons, rules and bullets: nothing to read


def ocr_image(image: Image, filename: str) -> str:
    """The text Tesseract reads in `image`, as it prints it (lines, blank lines
    between paragraphs). Raises ExtractError with an install hint if tesseract is
    missing."""
    try:
        import pytesseract
    except ImportError as exc:
        raise ExtractError(f"{filename}: OCR needs pytesseract: pip install pytesseract") from exc
    prepared = _prepare(image)
    if prepared is None:
        return ""
    try:
        return pytesseract.image_to_string(prepared, lang=LANG, timeout=TIMEOUT_S)
    except pytesseract.TesseractNotFoundError as exc:
        raise ExtractError(f"{filename}: {INSTALL_HINT}") from exc
    except pytesseract.TesseractError as exc:
        raise ExtractError(f"{filename}: OCR failed: {exc.message or exc}") from exc
    except RuntimeError as exc:  # pytesseract signals its timeout this way
        raise ExtractError(f"{filename}: OCR failed: {exc}") from exc


def _prepare(image: Image) -> Image | None:
    """Greyscale on white, upscaled if small. Transparent PNGs are flattened onto
    white first: their transparent pixels are often black underneath."""
    from PIL import Image as PILImage

    if min(image.size) < _MIN_OCR_SIDE:
        return None
    if image.mode in ("RGBA", "LA", "PA") or (image.mode == "P" and "transparency" in image.info):
        rgba = image.convert("RGBA")
        background = PILImage.new("RGBA", rgba.size, (255, 255, 255, 255))
        image = PILImage.alpha_composite(background, rgba)
    image = image.convert("L")
    longest = max(image.size)
    if longest < _MIN_SIDE:
        factor = min(3, -(-_MIN_SIDE // longest))
        image = image.resize((image.width * factor, image.height * factor), PILImage.LANCZOS)
    return image
