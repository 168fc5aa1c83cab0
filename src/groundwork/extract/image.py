"""PNG, JPEG and WebP images: the text is whatever OCR reads."""

from __future__ import annotations

import io

from groundwork.errors import ExtractError
from groundwork.extract.ocr import ocr_image
from groundwork.extract.text import paragraphs, stem
from groundwork.types import Block, Extracted


def extract_image(data: bytes, filename: str, content_type: str, *, ocr: bool) -> Extracted:
    if not ocr:
        raise ExtractError(f"{filename}: OCR is disabled, so text cannot be read from an image")
    from PIL import Image

    with Image.open(io.BytesIO(data)) as image:
        image.load()
        text = ocr_image(image, filename)
    blocks = tuple(Block("paragraph", p, page=1) for p in paragraphs(text, dehyphenate=True))
    return Extracted(stem(filename), blocks, content_type, page_count=1, ocr_pages=(1,))
