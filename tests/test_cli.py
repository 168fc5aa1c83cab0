"""The CLI's commands and JSON shapes (ARCHITECTURE §4), run in-process on a real
SQLite data directory with the real model."""

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from groundwork.cli import app

runner = CliRunner()

DOCS = {
    "refunds.md": "# Refunds\n\nWe offer a 30-day refund window from the date of delivery.\n\n"
                  "## Damaged items\n\nDamaged-on-arrival claims must be filed within 48 hours.",
    "hours.txt": "Our office hours are 9 to 6 IST, Monday to Friday.",
}


def invoke(*args):
    result = runner.invoke(app, [str(a) for a in args])
    return result


def lines(output: str) -> list[dict]:
    return [json.loads(line) for line in output.splitlines() if line.startswith("{")]


@pytest.fixture(scope="module")
def data(tmp_path_factory, local_embedder):
    root = tmp_path_factory.mktemp("cli")
    docs = root / "docs" / "nested"
    docs.mkdir(parents=True)
    for name, text in DOCS.items():
        (docs / name).write_text(text)
    (docs / "broken.pdf").write_bytes(b"%PDF-1.4 truncated")
    home = root / "home"
    first = invoke("ingest", root / "docs", "--kb", "support", "--data-dir", home, "--json")
    return root, home, first


def test_ingest_is_recursive_reports_failures_and_is_idempotent(data):
    root, home, first = data
    assert first.exit_code == 1  # one file failed, the rest ingested
    reports = {r["filename"]: r for r in lines(first.stdout)}
    assert reports["refunds.md"]["status"] == "ready" and reports["refunds.md"]["chunks"] == 2
    assert reports["broken.pdf"]["status"] == "failed" and "broken.pdf" in reports["broken.pdf"]["error"]
    again = invoke("ingest", root / "docs" / "nested" / "refunds.md", root / "docs" / "nested" / "hours.txt",
                   "--kb", "support", "--data-dir", home, "--json")
    assert again.exit_code == 0
    assert {r["status"] for r in lines(again.stdout)} == {"unchanged"}
    assert {r["embedded"] for r in lines(again.stdout)} == {0}


def test_search_json_shape(data):
    _, home, _ = data
    result = invoke("search", "when can I call you", "--kb", "support", "--data-dir", home, "--json", "--top-k", "2")
    assert result.exit_code == 0, result.output
    (payload,) = lines(result.stdout)
    assert len(payload["results"]) == 2
    top = payload["results"][0]
    assert set(top) >= {"document_id", "filename", "chunk_index", "score", "text"}
    assert top["filename"] == "hours.txt"


def test_search_batch_from_jsonl(data, tmp_path):
    _, home, _ = data
    queries = tmp_path / "q.jsonl"
    queries.write_text('{"id": "q1", "text": "refund window"}\n\n{"id": 2, "text": "office hours"}\n')
    result = invoke("search", "--kb", "support", "--queries", queries, "--top-k", "1", "--data-dir", home)
    assert result.exit_code == 0, result.output
    out = lines(result.stdout)
    assert [o["id"] for o in out] == ["q1", 2]
    assert out[0]["results"][0]["filename"] == "refunds.md" and out[1]["results"][0]["filename"] == "hours.txt"


def test_ask_json_shape_and_abstention(data, tmp_path):
    _, home, _ = data
    result = invoke("ask", "How long is the refund window?", "--kb", "support", "--data-dir", home, "--json")
    assert result.exit_code == 0, result.output
    (answer,) = lines(result.stdout)
    assert set(answer) >= {"answer", "abstained", "sources", "documents_referenced", "usage", "context"}
    assert "30-day" in answer["answer"] and not answer["abstained"]
    source = answer["sources"][0]
    assert set(source) >= {"number", "document_id", "filename", "chunk_index", "page", "score", "text"}
    assert answer["documents_referenced"] == ["refunds.md"]
    assert answer["usage"] == {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}
    questions = tmp_path / "questions.jsonl"
    questions.write_text('{"id": "a", "text": "What is the capital of Peru?"}\n')
    batch = invoke("ask", "--kb", "support", "--questions", questions, "--data-dir", home)
    (item,) = lines(batch.stdout)
    assert item["id"] == "a" and item["abstained"] and "I don't have that information" in item["answer"]
    assert item["sources"] == []


def test_chat_request_and_object_commands(data, tmp_path):
    _, home, _ = data
    created = invoke("assistant", "create", '{"name": "Aria", "kb_ids": ["support"], "top_k": 3}', "--data-dir", home)
    assert created.exit_code == 0, created.output
    assistant = lines(created.stdout)[0]
    assert assistant["top_k"] == 3 and assistant["kb_ids"] == ["support"]
    updated = invoke("assistant", "update", assistant["id"], '{"top_k": 2}', "--data-dir", home)
    assert lines(updated.stdout)[0]["top_k"] == 2
    request = tmp_path / "request.json"
    request.write_text(json.dumps({"assistant_id": assistant["id"],
                                   "messages": [{"role": "user", "content": "Damaged parcel, what now?"}]}))
    result = invoke("chat", "--request", request, "--json", "--data-dir", home)
    assert result.exit_code == 0, result.output
    (answer,) = lines(result.stdout)
    assert answer["conversation_id"] and len(answer["context"]["included"]) <= 2
    assert all(i["group"] == "kb:support" for i in answer["context"]["included"])


def test_errors_are_one_line_messages(data):
    _, home, _ = data
    result = subprocess.run([sys.executable, "-c", "from groundwork.cli import main; main()",
                             "search", "x", "--kb", "nope", "--data-dir", str(home)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    assert result.stderr.strip() == "error: knowledge base 'nope' not found"
    assert result.stdout == ""
