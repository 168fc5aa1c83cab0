"""Seed 000, clinical progress notes: a personality file in full, a template retrieved
(RAG only), a patient's lab results (always RAG, scoped to that patient), multi-query
retrieval over every message of the conversation.

    python examples/progress_note/run.py            # uses ./.groundwork-example
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

    def add(name: str, record_id: str | None = None) -> str:
        path = FILES / name
        return pipeline.ingest_bytes(engine, path.read_bytes(), name, record_id=record_id,
                                     source_key=f"example:{name}").document_id

    patient = domain.create(store, tenant, "record", name="Patient 0042")
    other = domain.create(store, tenant, "record", name="Patient 0043")
    domain.update(store, tenant, "record", patient.id, files=[add("lab_results_2026-11-20.md", patient.id)])
    domain.update(store, tenant, "record", other.id, files=[add("other_patient_labs.md", other.id)])
    personality = domain.create(store, tenant, "assistant", name="Dr. Vega's scribe", query_strategy="multi",
                                files=[{"document_id": add("personality.md"), "mode": "full"}])
    template = domain.create(store, tenant, "template", name="SOAP",
                             files=[{"document_id": add("soap_template.md"), "mode": "rag"}])
    conversation = (
        Message("user", "Patient reports feeling tired, sleeping poorly, pain 3 out of 10."),
        Message("assistant", "Noted. Any new results?"),
        Message("user", "What did the latest potassium and creatinine show?"),
    )
    answer = pipeline.chat(engine, ChatRequest(messages=conversation, assistant_id=personality.id,
                                               template_id=template.id, record_id=patient.id))
    return answer_json(answer)


if __name__ == "__main__":
    home = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(".groundwork-example")
    print(json.dumps(main(Engine.open(load_settings(home=home))), indent=2))
