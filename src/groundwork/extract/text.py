"""Plain text and Markdown, plus the text helpers every extractor shares: decoding,
whitespace normalisation and paragraph splitting."""

from __future__ import annotations

import codecs
import re
from pathlib import PurePath

from groundwork.types import Block, Extracted

_BOMS = (  # UTF-32 before UTF-16: the UTF-32-LE BOM starts with the UTF-16-LE one
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
# C0 controls other than tab, newline, carriage return and form feed, plus DEL.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0e-\x1f\x7f]")
_BLANK_LINE = re.compile(r"\n[ \t\f\v]*\n|\f")
_TITLE_MAX = 200


def bom_encoding(data: bytes) -> str | None:
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            return encoding
    return None


def decode(data: bytes) -> str:
    """Bytes to text: a BOM decides, else strict UTF-8, else charset-normalizer's guess.
    Newlines come back as "\\n" and stray control characters are dropped."""
    encoding = bom_encoding(data)
    if encoding:
        text = data.decode(encoding)
    else:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            text = data.decode(guess_encoding(data) or "cp1252", errors="replace")
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return _CONTROL.sub("", text)


def guess_encoding(data: bytes) -> str | None:
    """charset-normalizer's best guess for non-UTF-8 bytes, or None if nothing fits.

    On short Western text it often prefers cp1250/cp1257, which turn "é" or "—" into
    other letters; cp1252 is by far the likelier legacy encoding, so it wins whenever
    it decodes about as cleanly as the best candidate."""
    from charset_normalizer import from_bytes

    matches = list(from_bytes(data))
    if not matches:
        return None
    best = matches[0]
    for match in matches:
        if match.encoding == "cp1252" and match.chaos <= best.chaos + 0.1:
            return "cp1252"
    return best.encoding


def clean(text: str) -> str:
    """Collapse every run of whitespace (newlines included) to one space."""
    return " ".join(text.split())


def join_lines(lines: list[str], *, dehyphenate: bool = False) -> str:
    """Join hard-wrapped lines into one paragraph. With `dehyphenate`, a word broken
    as "exam-" / "ple" at a line end is rejoined (for PDF and OCR text)."""
    out = ""
    for line in (ln.strip() for ln in lines):
        if not line:
            continue
        if (
            dehyphenate
            and out.endswith("-")
            and len(out) > 1
            and out[-2].isalpha()
            and line[0].islower()
        ):
            out = out[:-1] + line
        else:
            out = f"{out} {line}" if out else line
    return clean(out)


def paragraphs(text: str, *, dehyphenate: bool = False) -> list[str]:
    """Split on blank lines (or form feeds); join the lines inside each paragraph."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    parts = (join_lines(p.split("\n"), dehyphenate=dehyphenate) for p in _BLANK_LINE.split(text))
    return [p for p in parts if p]


def title_from(blocks: list[Block] | tuple[Block, ...], filename: str) -> str:
    """The first heading, else the first line of the first block, else the file stem."""
    for block in blocks:
        if block.kind == "heading":
            return block.text[:_TITLE_MAX]
    for block in blocks:
        line = block.text.strip().split("\n", 1)[0].strip()
        if line:
            return line[:_TITLE_MAX]
    return stem(filename)


def stem(filename: str) -> str:
    return PurePath(filename).stem or filename


def extract_plain(data: bytes, filename: str) -> Extracted:
    text = decode(data)
    blocks = [Block("paragraph", p) for p in paragraphs(text)]
    return Extracted(title_from(blocks, filename), tuple(blocks), "text/plain")


def extract_markdown(data: bytes, filename: str) -> Extracted:
    text = decode(data)
    front_title, text = _front_matter(text)
    blocks = markdown_blocks(text)
    return Extracted(front_title or title_from(blocks, filename), tuple(blocks), "text/markdown")


# --- Markdown ----------------------------------------------------------------------

_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d{1,9}[.)])\s+\S")
_INTERRUPTS = re.compile(r"^\s*(?:[-*+]|1[.)])\s+\S")  # list starts that may end a paragraph
_THEMATIC = re.compile(r"^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_TABLE_DELIM = re.compile(r"^\s*\|?\s*:?-+:?\s*(?:\|\s*:?-+:?\s*)*\|?\s*$")
_QUOTE = re.compile(r"^ {0,3}> ?")


def markdown_blocks(text: str) -> list[Block]:
    """Parse the block structure of Markdown: ATX and setext headings, fenced code,
    pipe tables, list runs and paragraphs. Inline markup is left as written."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    blocks: list[Block] = []
    para: list[str] = []

    def flush() -> None:
        if para:
            joined = join_lines(para)
            if joined:
                blocks.append(Block("paragraph", joined))
            para.clear()

    i = 0
    while i < len(lines):
        line = lines[i]
        if fence := _FENCE.match(line):
            flush()
            marker = fence.group(1)
            body: list[str] = []
            i += 1
            while i < len(lines) and not (
                lines[i].strip().startswith(marker[0] * len(marker))
                and not lines[i].strip().strip(marker[0])
            ):
                body.append(lines[i].rstrip())
                i += 1
            code = "\n".join(body).strip("\n")
            if code.strip():
                blocks.append(Block("code", code))
            i += 1  # the closing fence (or the end of the text)
            continue
        if heading := _ATX.match(line):
            flush()
            if content := clean(heading.group(2) or ""):
                blocks.append(Block("heading", content, level=len(heading.group(1))))
            i += 1
            continue
        if para and (setext := _SETEXT.match(line)) and not _LIST_ITEM.match(line):
            content = join_lines(para)
            para.clear()
            blocks.append(Block("heading", content, level=1 if setext.group(1)[0] == "=" else 2))
            i += 1
            continue
        if not line.strip() or _THEMATIC.match(line):
            flush()
            i += 1
            continue
        if "|" in line and i + 1 < len(lines) and _is_delimiter_row(lines[i + 1]):
            flush()
            rows = [line]
            i += 2
            while i < len(lines) and "|" in lines[i] and lines[i].strip():
                rows.append(lines[i])
                i += 1
            blocks.append(Block("table", "\n".join(_table_row(r) for r in rows)))
            continue
        if _LIST_ITEM.match(line) and (not para or _INTERRUPTS.match(line)):
            flush()
            items, i = _list_run(lines, i)
            outer = min(indent for indent, _ in items)  # nested items keep their indent
            blocks.append(Block("list", "\n".join(" " * (n - outer) + t for n, t in items)))
            continue
        para.append(_QUOTE.sub("", line))
        i += 1
    flush()
    return blocks


def _is_delimiter_row(line: str) -> bool:
    return "|" in line and "-" in line and _TABLE_DELIM.match(line) is not None


def _table_row(line: str) -> str:
    cells = line.strip()
    if cells.startswith("|"):
        cells = cells[1:]
    if cells.endswith("|") and not cells.endswith("\\|"):
        cells = cells[:-1]
    return " | ".join(clean(c) for c in cells.split("|"))


def _list_run(lines: list[str], i: int) -> tuple[list[tuple[int, str]], int]:
    """Consecutive list items (with their continuation lines) as (indent, text). A
    single blank line between items keeps the run going."""
    items: list[tuple[int, str]] = []
    while i < len(lines):
        line = lines[i]
        if _LIST_ITEM.match(line):
            indent = len(line.expandtabs(4)) - len(line.expandtabs(4).lstrip())
            items.append((min(indent, 8), clean(line)))
        elif line.strip() and items and not _ATX.match(line) and not _FENCE.match(line):
            indent, text = items[-1]  # a wrapped or lazy continuation line
            items[-1] = (indent, f"{text} {clean(line)}")
        elif not line.strip() and i + 1 < len(lines) and _LIST_ITEM.match(lines[i + 1]):
            pass
        else:
            break
        i += 1
    return items, i


def _front_matter(text: str) -> tuple[str | None, str]:
    """Drop a leading YAML front-matter block, returning its `title:` if it has one."""
    if not text.startswith("---\n"):
        return None, text
    end = text.find("\n---", 4)
    if end == -1:
        return None, text
    title = None
    for line in text[4:end].split("\n"):
        key, _, value = line.partition(":")
        if key.strip().lower() == "title" and value.strip():
            title = value.strip().strip("\"'")[:_TITLE_MAX]
    rest = text[end + 4 :]
    return title, rest.split("\n", 1)[1] if "\n" in rest else ""
