"""Turn an original file into structured text: `extract(data, filename) -> Extracted`.

The content type comes from the bytes (`sniff`), never from the name alone; a declared
type that the bytes contradict is refused (`ensure_matches`). Each format has its own
module, imported only when a file of that format arrives, so importing this package
stays fast. Third-party failures become `ExtractError("<filename>: ...")` here, once.
"""

from __future__ import annotations

import codecs
import io
import re
import zipfile
from pathlib import PurePath

from groundwork.errors import ExtractError, GroundworkError, UnsupportedFile
from groundwork.types import Extracted

PDF = "application/pdf"
DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
HTML = "text/html"
MARKDOWN = "text/markdown"
PLAIN = "text/plain"
PNG = "image/png"
JPEG = "image/jpeg"
WEBP = "image/webp"
ZIP = "application/zip"
BINARY = "application/octet-stream"

SUPPORTED_TYPES: tuple[str, ...] = (PDF, DOCX, HTML, MARKDOWN, PLAIN, PNG, JPEG, WEBP)

__all__ = ["SUPPORTED_TYPES", "ensure_matches", "extract", "sniff"]

_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", PNG),
    (b"\xff\xd8\xff", JPEG),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
    (b"II*\x00", "image/tiff"),
    (b"MM\x00*", "image/tiff"),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "application/x-ole-storage"),  # .doc, .xls
    (b"\x1f\x8b", "application/gzip"),
    (b"7z\xbc\xaf\x27\x1c", "application/x-7z-compressed"),
    (b"Rar!\x1a\x07", "application/vnd.rar"),
    (b"\x7fELF", "application/x-executable"),
)
_TEXT_EXTENSIONS = {
    ".md": MARKDOWN,
    ".markdown": MARKDOWN,
    ".txt": PLAIN,
    ".html": HTML,
    ".htm": HTML,
}
_EXTENSION_TYPES = {
    **_TEXT_EXTENSIONS,
    ".pdf": PDF,
    ".docx": DOCX,
    ".png": PNG,
    ".jpg": JPEG,
    ".jpeg": JPEG,
    ".webp": WEBP,
}
_ALIASES = {
    "image/jpg": JPEG,
    "image/pjpeg": JPEG,
    "application/x-pdf": PDF,
    "text/x-markdown": MARKDOWN,
    "application/xhtml+xml": HTML,
}
# What browsers declare for text files such as .json, .xml or .sh.
_TEXTUAL_APPLICATION = frozenset(
    ("json", "xml", "javascript", "x-javascript", "yaml", "x-yaml", "toml", "sql", "x-sh", "csv")
)
_HTML_START = re.compile(
    rb"^\s*(?:<!--.*?-->\s*)*<(?:!doctype\s+html|html|head|body)[\s>]", re.IGNORECASE | re.DOTALL
)
_SNIFF_BYTES = 65536
# Share of control characters above which decodable bytes are still not text.
_MAX_CONTROL_SHARE = 0.02


def sniff(data: bytes, filename: str) -> str:
    """The content type of `data`, from magic numbers first; bytes that are text get
    their type from HTML markers, else the extension (.md, .txt, .html), else
    text/plain. Anything else is `application/octet-stream` or a specific type we do
    not support (zip, gif...), which `extract` refuses."""
    head = data[:16]
    if head.lstrip(b"\x00\t\n\r\f ").startswith(b"%PDF-"):
        return PDF
    if b"%PDF-" in data[:1024] and not _is_text(data):  # readers allow junk before the header
        return PDF
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        return _zip_type(data)
    if head.startswith(b"RIFF") and data[8:12] == b"WEBP":
        return WEBP
    for magic, content_type in _MAGIC:
        if head.startswith(magic):
            return content_type
    if not _is_text(data):
        return BINARY
    if _HTML_START.match(_ascii_head(data)):
        return HTML
    return _TEXT_EXTENSIONS.get(PurePath(filename).suffix.lower(), PLAIN)


def ensure_matches(filename: str, declared: str | None, data: bytes) -> str:
    """The sniffed content type, after checking it against the declared type (or, if
    none was declared, the one the file name implies). Raises UnsupportedFile when they
    disagree, e.g. a `.pdf` that is really a zip. Text types may stand in for one
    another, as may image types: the bytes cannot tell Markdown from plain text, and a
    PNG named `.jpg` is harmless. If the bytes only say "some text", a declared
    Markdown or HTML type is believed."""
    sniffed = sniff(data, filename)
    claim = _normalise(declared) if declared else None
    if claim is None:
        claim = _EXTENSION_TYPES.get(PurePath(filename).suffix.lower())
    if claim is None or claim == sniffed:
        return sniffed
    if _family(claim) == _family(sniffed) and _family(claim) in ("text", "image"):
        return claim if sniffed == PLAIN and claim in (MARKDOWN, HTML) else sniffed
    if claim == ZIP and sniffed == DOCX:
        return sniffed
    raise UnsupportedFile(f"{filename}: declared {claim} but the content is {sniffed}")


def extract(
    data: bytes, filename: str, content_type: str | None = None, *, ocr: bool = True
) -> Extracted:
    """Structured text of one original. `content_type` is what the uploader declared
    (checked against the bytes); `ocr=False` skips OCR of scanned PDF pages and
    refuses images."""
    kind = None
    try:
        kind = ensure_matches(filename, content_type, data)
        match kind:
            case "application/pdf":
                from groundwork.extract.pdf import extract_pdf

                return extract_pdf(data, filename, ocr=ocr)
            case "application/vnd.openxmlformats-officedocument.wordprocessingml.document":
                from groundwork.extract.docx import extract_docx

                return extract_docx(data, filename)
            case "text/html":
                from groundwork.extract.html import extract_html

                return extract_html(data, filename)
            case "text/markdown":
                from groundwork.extract.text import extract_markdown

                return extract_markdown(data, filename)
            case "text/plain":
                from groundwork.extract.text import extract_plain

                return extract_plain(data, filename)
            case "image/png" | "image/jpeg" | "image/webp":
                from groundwork.extract.image import extract_image

                return extract_image(data, filename, kind, ocr=ocr)
            case _:
                raise UnsupportedFile(f"{filename}: unsupported file type {kind}")
    except GroundworkError:
        raise
    except MemoryError:
        raise
    except Exception as exc:
        label = _LABELS.get(kind or "", "file")
        raise ExtractError(f"{filename}: could not read the {label}: {_describe(exc)}") from exc


_LABELS = {
    PDF: "PDF",
    DOCX: "DOCX",
    HTML: "HTML",
    MARKDOWN: "Markdown",
    PLAIN: "text",
    PNG: "PNG image",
    JPEG: "JPEG image",
    WEBP: "WebP image",
}


def _describe(exc: Exception) -> str:
    message = " ".join(str(exc).split())[:300]
    return message or type(exc).__name__


def _normalise(content_type: str) -> str | None:
    base = content_type.split(";", 1)[0].strip().lower()
    if not base or base == BINARY:  # browsers send this when they do not know
        return None
    return _ALIASES.get(base, base)


def _family(content_type: str) -> str:
    """"text" for every textual type, also those registered under application/."""
    family, _, subtype = content_type.partition("/")
    if family == "application" and (
        subtype in _TEXTUAL_APPLICATION or subtype.endswith(("+json", "+xml"))
    ):
        return "text"
    return family


def _zip_type(data: bytes) -> str:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            names = set(archive.namelist())
    except (zipfile.BadZipFile, ValueError, EOFError):
        return ZIP
    return DOCX if "word/document.xml" in names else ZIP


def _ascii_head(data: bytes) -> bytes:
    """The first bytes as ASCII-compatible text, so UTF-16 HTML is recognised too."""
    from groundwork.extract.text import bom_encoding

    encoding = bom_encoding(data)
    if encoding and encoding != "utf-8-sig":
        return data[:2048].decode(encoding, errors="ignore").encode("ascii", errors="ignore")
    return data[:1024].removeprefix(codecs.BOM_UTF8)


def _is_text(data: bytes) -> bool:
    """Whether the start of `data` decodes as text with few control characters."""
    from groundwork.extract.text import bom_encoding, guess_encoding

    sample = data[:_SNIFF_BYTES]
    encoding = bom_encoding(sample)
    if encoding is None and b"\x00" in sample:
        return False
    try:
        # Incremental, so a multi-byte character cut off by the sample is not an error.
        text = codecs.getincrementaldecoder(encoding or "utf-8")().decode(sample, final=False)
    except UnicodeDecodeError:
        if encoding:
            return False
        guessed = guess_encoding(sample)
        if guessed is None:
            return False
        text = sample.decode(guessed, errors="replace")
    if not text:
        return not data  # an empty file is empty text; undecodable bytes are not
    controls = sum(1 for ch in text if ord(ch) < 32 and ch not in "\t\n\r\f" or ch == "\ufffd")
    return controls / len(text) <= _MAX_CONTROL_SHARE
