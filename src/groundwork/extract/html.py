"""HTML with trafilatura: the main text without navigation, footers, cookie banners or
scripts, keeping headings, lists and tables. Tiny pages that trafilatura rejects fall
back to the visible text of the body."""

from __future__ import annotations

import re
from html import unescape
from typing import Any

from groundwork.errors import ExtractError
from groundwork.extract.text import clean, decode, stem, title_from
from groundwork.types import Block, Extracted

_XML_DECLARATION = re.compile(r"^\s*<\?xml[^>]*\?>")
_HEADING_TAGS = {f"h{n}": n for n in range(1, 7)}
_FALLBACK_TAGS = (*_HEADING_TAGS, "p", "li", "pre", "blockquote", "td", "th", "dd", "dt")
_BOILERPLATE_TAGS = (
    "script", "style", "noscript", "template", "nav", "header", "footer", "aside", "form"
)


def extract_html(data: bytes, filename: str) -> Extracted:
    try:
        import trafilatura
    except ImportError as exc:
        raise ExtractError(
            f"{filename}: HTML extraction needs trafilatura and lxml_html_clean: "
            "pip install trafilatura lxml_html_clean"
        ) from exc
    # lxml refuses a str that still carries an XML encoding declaration.
    html = _XML_DECLARATION.sub("", decode(data))
    if not html.strip():
        return Extracted(stem(filename), (), "text/html")

    xml = trafilatura.extract(
        html,
        output_format="xml",
        include_tables=True,
        include_formatting=False,
        include_comments=False,
        include_links=False,
        include_images=False,
    )
    blocks = _xml_blocks(xml) if xml else []
    if not blocks:
        blocks = _fallback_blocks(html)
    title = _title(trafilatura, html) or title_from(blocks, filename)
    return Extracted(title, tuple(blocks), "text/html")


def _xml_blocks(xml: str) -> list[Block]:
    """Map trafilatura's XML (<head rend="h2">, <p>, <list>, <table>, <code>...) to
    blocks, in document order."""
    from lxml import etree

    root = etree.fromstring(xml.encode("utf-8"))
    main = root.find("main")
    if main is None:
        main = root
    blocks: list[Block] = []
    for element in main:
        tag = element.tag if isinstance(element.tag, str) else ""
        if tag == "head":
            level = _HEADING_TAGS.get(element.get("rend", ""), 2)
            if text := clean(_text(element)):
                blocks.append(Block("heading", text, level=level))
        elif tag == "list":
            items = [clean(_text(item)) for item in element.findall("item")]
            if lines := [f"- {item}" for item in items if item]:
                blocks.append(Block("list", "\n".join(lines)))
        elif tag == "table":
            rows = []
            for row in element.iter("row"):
                cells = [clean(_text(cell)) for cell in row.findall("cell")]
                if any(cells):
                    rows.append(" | ".join(cells))
            if rows:
                blocks.append(Block("table", "\n".join(rows)))
        elif tag == "code":
            if code := _text(element).strip("\n"):
                blocks.append(Block("code", code))
        elif text := clean(_text(element)):
            blocks.append(Block("paragraph", text))
    return blocks


def _text(element: Any) -> str:
    return "".join(element.itertext())


def _fallback_blocks(html: str) -> list[Block]:
    """Visible text of the body, block by block, for pages too small for trafilatura."""
    import lxml.html

    try:
        root = lxml.html.document_fromstring(html)
    except Exception:  # the parser refuses some fragments; there is nothing to read
        return []
    for bad in root.xpath("|".join(f"//{tag}" for tag in _BOILERPLATE_TAGS)):
        bad.drop_tree()
    body = root.find("body")
    if body is None:
        body = root
    blocks: list[Block] = []
    for element in body.iter(*_FALLBACK_TAGS):
        if any(a.tag in _FALLBACK_TAGS for a in element.iterancestors()):
            continue  # its text is already part of an enclosing block
        if element.tag == "pre":
            if code := element.text_content().strip("\n"):
                blocks.append(Block("code", code))
        elif text := clean(element.text_content()):
            level = _HEADING_TAGS.get(element.tag)
            if level:
                blocks.append(Block("heading", text, level=level))
            else:
                blocks.append(Block("paragraph", text))
    if not blocks and (text := clean(body.text_content())):
        blocks.append(Block("paragraph", text))
    return blocks


def _title(trafilatura: Any, html: str) -> str:
    """The page's <title> (trafilatura cleans site-name suffixes off it)."""
    try:
        metadata = trafilatura.extract_metadata(html)
    except Exception:  # metadata is a nicety; the text is what matters
        metadata = None
    title = getattr(metadata, "title", None) if metadata else None
    if not title:
        match = re.search(r"<title[^>]*>(.*?)</title>", html, re.IGNORECASE | re.DOTALL)
        title = unescape(match.group(1)) if match else ""
    return clean(title)[:200]
