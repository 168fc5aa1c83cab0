"""JSON shapes shared by the CLI and the HTTP API (ARCHITECTURE §4)."""

from __future__ import annotations

from dataclasses import asdict

from .types import Answer, Citation, ContextItem, Hit


def hit_json(hit: Hit) -> dict:
    return {"document_id": hit.document.id, "filename": hit.document.filename,
            "chunk_index": hit.chunk.index, "page": hit.chunk.page, "score": round(hit.score, 6),
            "heading_path": list(hit.chunk.heading_path), "text": hit.chunk.text}


def citation_json(citation: Citation) -> dict:
    return {"number": citation.number, "source": citation.source, "document_id": citation.document_id,
            "filename": citation.filename, "chunk_index": citation.chunk_index, "page": citation.page,
            "score": round(citation.score, 6), "relevance_score": round(citation.score, 6),
            "text": citation.text, "url": citation.url, "verified": citation.verified}


def manifest_item_json(item: ContextItem) -> dict:
    data = asdict(item)
    if data["score"] is not None:
        data["score"] = round(data["score"], 6)
    return data


def usage_json(answer: Answer) -> dict:
    return {"input_tokens": answer.usage.input_tokens, "output_tokens": answer.usage.output_tokens,
            "total_tokens": answer.usage.total_tokens}


def answer_json(answer: Answer) -> dict:
    context = answer.context
    return {
        "answer": answer.text,
        "abstained": answer.abstained,
        "escalate": answer.escalate,
        "sources": [citation_json(c) for c in answer.citations],
        "documents_referenced": list(answer.documents_referenced),
        "dropped_markers": list(answer.dropped_markers),
        "usage": usage_json(answer),
        "context": {
            "budget_chars": context.budget_chars if context else 0,
            "included": [manifest_item_json(i) for i in context.included] if context else [],
            "dropped": [manifest_item_json(i) for i in context.dropped] if context else [],
        },
    }
