"""Each worked example under examples/ runs, and shows the behaviour it is there for."""

import importlib.util
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def run_example(name: str, engine) -> dict:
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / name / "run.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.main(engine)


def test_progress_note(engine):
    result = run_example("progress_note", engine)
    included = result["context"]["included"]
    assert {"personality.md"} == {i["filename"] for i in included if i["kind"] == "full"}
    chunk_files = {i["filename"] for i in included if i["kind"] == "chunk"}
    assert "lab_results_2026-11-20.md" in chunk_files and "soap_template.md" in chunk_files
    assert "other_patient_labs.md" not in chunk_files
    assert not result["abstained"] and "5.8" in result["answer"]
    assert "personality.md" in result["documents_referenced"]


def test_support_agent(engine):
    result = run_example("support_agent", engine)
    assert result["reindexed"] == ["unchanged", "unchanged"]
    answered = result["answered"]
    assert not answered["abstained"] and "30-day refund window" in answered["answer"]
    assert answered["sources"][0]["filename"] == "refunds.md" and answered["sources"][0]["source"].startswith("brand-a-help")
    refused = result["out_of_scope"]
    assert refused["abstained"] and "I don't have that information" in refused["answer"]
    assert all(i["filename"] != "brand_b_pricing.md" for i in refused["context"]["included"])


def test_chat_bot(engine):
    result = run_example("chat_bot", engine)
    included = result["context"]["included"]
    assert ("my_routine.md", "full") in {(i["filename"], i["kind"]) for i in included}
    assert any(i["filename"] == "collagen.md" and i["group"] == "kb:wellness" for i in included)
    assert not result["abstained"] and result["sources"]
