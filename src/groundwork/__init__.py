"""Groundwork: attachment-aware retrieval-augmented generation.

    from groundwork import Engine, load_settings, pipeline
    engine = Engine.open(load_settings(home="./.groundwork"))
    report = pipeline.ingest_bytes(engine, data, "refunds.pdf", kb_id=kb.id)

The base import is light; models and parsers load when first used.
"""

from .config import Settings, get_settings, load_settings
from .engine import Engine
from .errors import GroundworkError
from .types import Answer, Chunk, Citation, Context, Document, Hit, Message, Scope

__version__ = "0.1.0"
__all__ = ["Answer", "Chunk", "Citation", "Context", "Document", "Engine", "GroundworkError", "Hit",
           "Message", "Scope", "Settings", "get_settings", "load_settings", "__version__"]
