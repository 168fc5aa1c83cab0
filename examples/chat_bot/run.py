"""Seed 002, a chat bot: a kb searched with hybrid retrieval and the weighted
0.60/0.25/0.15 rerank, one enhanced query from the last 5 messages, and a file a user
dropped into the conversation.

    python examples/chat_bot/run.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from groundwork import Engine, domain, load_settings, pipeline
from groundwork.output import answer_json
from groundwork.types import DEFAULT_TENANT, ChatRequest, Message

FILES = Path(__file__).parent / "files"

USER_FILE = b"""# My routine

I take 10 grams of collagen every morning with orange juice and use a retinoid cream at night."""


def main(engine: Engine) -> dict:
    store, tenant = engine.store, DEFAULT_TENANT
    kb = store.create_kb(tenant, "wellness")
    pipeline.ingest_paths(engine, [FILES / "collagen.md", FILES / "skin_care.md"], kb_id=kb.id)
    bot = domain.create(store, tenant, "assistant", name="Wellness bot", kb_ids=[kb.id],
                        query_strategy="enhanced", fusion="weighted", top_k=5)
    dropped = pipeline.ingest_bytes(engine, USER_FILE, "my_routine.md").document_id
    messages = (Message("user", "I started taking collagen peptides."),
                Message("assistant", "Great, how much do you take?"),
                Message("user", "Is 10 grams a typical daily serving of collagen, and why does vitamin C matter?"))
    answer = pipeline.chat(engine, ChatRequest(messages=messages, assistant_id=bot.id,
                                               files=({"document_id": dropped, "mode": "full"},)))
    return answer_json(answer)


if __name__ == "__main__":
    home = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(".groundwork-example")
    print(json.dumps(main(Engine.open(load_settings(home=home))), indent=2))
