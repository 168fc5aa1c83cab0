"""DOCX with python-docx: headings from paragraph styles, list runs, tables, all in
body order."""

from __future__ import annotations

import io
import re
from typing import Any

from groundwork.extract.text import clean, stem, title_from
from groundwork.types import Block, Extracted

CONTENT_TYPE = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
_HEADING = re.compile(r"^heading\s*(\d)$", re.IGNORECASE)
_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"


def extract_docx(data: bytes, filename: str) -> Extracted:
    import docx

    document = docx.Document(io.BytesIO(data))
    blocks: list[Block] = []
    list_items: list[str] = []

    def flush_list() -> None:
        if list_items:
            blocks.append(Block("list", "\n".join(list_items)))
            list_items.clear()

    for kind, item in _body_items(document):
        if kind == "table":
            flush_list()
            if text := _table_text(item):
                blocks.append(Block("table", text))
            continue
        text = clean(item.text)
        if not text:
            continue
        level = _heading_level(item)
        if level is None and _is_list(item):
            list_items.append(f"- {text}")
            continue
        flush_list()
        if level is not None:
            blocks.append(Block("heading", text, level=level))
        else:
            blocks.append(Block("paragraph", text))
    flush_list()

    title = clean(document.core_properties.title or "")[:200]
    title = title or title_from(blocks, filename) or stem(filename)
    return Extracted(title, tuple(blocks), CONTENT_TYPE)


def _body_items(document: Any) -> list[tuple[str, Any]]:
    """Paragraphs and tables in the order they appear, descending into content
    controls (`w:sdt`, e.g. a table of contents) that wrap them."""
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    items: list[tuple[str, Any]] = []

    def walk(parent: Any) -> None:
        for child in parent.iterchildren():
            if child.tag == f"{_W}p":
                items.append(("paragraph", Paragraph(child, document)))
            elif child.tag == f"{_W}tbl":
                items.append(("table", Table(child, document)))
            elif child.tag == f"{_W}sdt":
                content = child.find(f"{_W}sdtContent")
                if content is not None:
                    walk(content)

    walk(document.element.body)
    return items


def _heading_level(paragraph: Any) -> int | None:
    name = _style_name(paragraph)
    if name.lower() == "title":
        return 1
    if match := _HEADING.match(name):
        return max(1, int(match.group(1)))
    return None


def _is_list(paragraph: Any) -> bool:
    if _style_name(paragraph).lower().startswith("list"):
        return True
    ppr = paragraph._p.pPr  # direct numbering, without a list style
    return ppr is not None and ppr.numPr is not None


def _style_name(paragraph: Any) -> str:
    try:
        style = paragraph.style
    except (KeyError, ValueError):  # a style id the styles part does not define
        return ""
    return (style.name or "") if style is not None else ""


def _table_text(table: Any) -> str:
    """One line per row, cells joined by " | ". A merged cell is listed once."""
    lines = []
    for row in table.rows:
        cells, seen = [], set()
        for cell in row.cells:
            if cell._tc in seen:
                continue
            seen.add(cell._tc)
            cells.append(clean(cell.text))
        if any(cells):
            lines.append(" | ".join(cells))
    return "\n".join(lines)
