"""Seed 001, a support agent: structure-aware chunks in a kb per site, top_k 8, the
grounded prompt with citations, escalation when the answer is not there, per-site
scoping (Brand A's agent never sees Brand B's kb), incremental re-indexing.

    python examples/support_agent/run.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from groundwork import Engine, domain, load_settings, pipeline
from groundwork.output import answer_json
from groundwork.types import DEFAULT_TENANT, ChatRequest, Message

FILES = Path(__file__).parent / "files"


def main(engine: Engine) -> dict:
    store, tenant = engine.store, DEFAULT_TENANT
    brand_a = store.create_kb(tenant, "brand-a-help")
    brand_b = store.create_kb(tenant, "brand-b-help")
    pipeline.ingest_paths(engine, [FILES / "refunds.md", FILES / "shipping.md"], kb_id=brand_a.id)
    pipeline.ingest_paths(engine, [FILES / "brand_b_pricing.md"], kb_id=brand_b.id)
    again = pipeline.ingest_paths(engine, [FILES / "refunds.md", FILES / "shipping.md"], kb_id=brand_a.id)
    aria = domain.create(store, tenant, "assistant", name="Aria", top_k=8, kb_ids=[brand_a.id], escalation=True)

    def ask(text: str) -> dict:
        return answer_json(pipeline.chat(engine, ChatRequest(messages=(Message("user", text),),
                                                             assistant_id=aria.id)))

    return {"reindexed": [r.status for r in again],
            "answered": ask("What's your refund window if the item arrived damaged?"),
            "out_of_scope": ask("How much is the Brand B premium plan?")}


if __name__ == "__main__":
    home = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(".groundwork-example")
    print(json.dumps(main(Engine.open(load_settings(home=home))), indent=2))
