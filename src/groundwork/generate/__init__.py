"""Generators: chat messages -> Generation.

One narrow protocol. `openai_compat.OpenAICompatLLM` talks to any OpenAI-compatible chat
API; with no LLM configured, `extractive.extractive_answer` quotes the best supporting
sentences instead (it needs the hits, not messages, so it is a function, not an LLM)."""

from __future__ import annotations

from typing import Protocol

from groundwork.types import Generation


class LLM(Protocol):
    model: str

    def complete(self, messages: list[dict], *, tools: list[dict] | None = None) -> Generation:
        """One chat completion over OpenAI-format messages."""
        ...


ESCALATE_TOOL_NAME = "escalate_to_human"

# OpenAI function-tool schema the grounded prompt's "offer to escalate" can call.
ESCALATE_TOOL: dict = {
    "type": "function",
    "function": {
        "name": ESCALATE_TOOL_NAME,
        "description": (
            "Hand the conversation to a human agent when the context does not contain "
            "the answer or the user asks for a person."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "reason": {
                    "type": "string",
                    "description": "Why a human is needed, in one sentence.",
                },
            },
            "required": ["reason"],
        },
    },
}
