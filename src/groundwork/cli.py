"""`groundwork`: one command per verb, each a thin layer over `pipeline`."""


import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Optional

import typer

from .errors import GroundworkError

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Groundwork: attachment-aware retrieval-augmented generation.")
kb_app = typer.Typer(no_args_is_help=True, help="Create, list and delete knowledge bases.")
app.add_typer(kb_app, name="kb")

DataDir = Annotated[Optional[Path], typer.Option("--data-dir", help="Overrides GROUNDWORK_HOME.")]
KbName = Annotated[str, typer.Option("--kb", help="Knowledge base name.")]
AsJson = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]


def _engine(data_dir: Path | None):
    from .config import load_settings
    from .engine import Engine

    overrides = {"home": data_dir} if data_dir else {}
    return Engine.open(load_settings(**overrides))


def _scope(engine, kb: str, create: bool = False):
    from .errors import NotFound
    from .types import DEFAULT_TENANT, Scope

    try:
        found = engine.store.get_kb(DEFAULT_TENANT, kb)
    except NotFound:
        if not create:
            raise
        found = engine.store.create_kb(DEFAULT_TENANT, kb)
    return found, Scope(tenant=DEFAULT_TENANT, kb_ids=(found.id,))


def _jsonl(path: Path) -> Iterator[dict]:
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if line.strip():
                try:
                    item = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise GroundworkError(f"{path}:{number}: not JSON ({exc.msg})") from None
                if "text" not in item:
                    raise GroundworkError(f"{path}:{number}: missing \"text\"")
                yield item


def _emit(data: dict) -> None:
    sys.stdout.write(json.dumps(data, ensure_ascii=False) + "\n")


@app.command()
def ingest(paths: Annotated[list[str], typer.Argument(help="Files, directories or URLs.")],
           kb: KbName,
           mode: Annotated[Optional[str], typer.Option(
               help="How chats over this kb use these documents: rag (retrieved chunks, the default), "
                    "full (whole text) or auto (whole if it fits the budget).")] = None,
           data_dir: DataDir = None, as_json: AsJson = False) -> None:
    """Ingest files (directories recursively) and URLs into a knowledge base."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from . import pipeline

    if mode not in (None, "rag", "full", "auto"):
        raise GroundworkError(f"--mode must be rag, full or auto, got {mode!r}")
    engine = _engine(data_dir)
    knowledge_base, _ = _scope(engine, kb, create=True)
    urls = [p for p in paths if p.startswith(("http://", "https://"))]
    files = pipeline.iter_files([Path(p) for p in paths if p not in urls])
    reports = []
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), disable=as_json or not sys.stderr.isatty(),
                  console=None) as progress:
        task = progress.add_task("ingesting", total=len(files) + len(urls))

        def done(report) -> None:
            reports.append(report)
            progress.advance(task)
            if not as_json:
                detail = report.error if report.status == "failed" else \
                    f"{report.chunks} chunks, {report.embedded} embedded"
                typer.echo(f"{report.status:9} {report.filename}: {detail}", err=report.status == "failed")

        pipeline.ingest_paths(engine, files, kb_id=knowledge_base.id, mode=mode, on_file=done)
        for url in urls:
            done(pipeline.ingest_url(engine, url, kb_id=knowledge_base.id, mode=mode))
    if as_json:
        for r in reports:
            _emit({"filename": r.filename, "document_id": r.document_id, "status": r.status,
                   "chunks": r.chunks, "embedded": r.embedded, "error": r.error})
    failed = sum(r.status == "failed" for r in reports)
    if failed:
        typer.echo(f"{failed} of {len(reports)} failed", err=True)
        raise typer.Exit(1)


@app.command()
def search(query: Annotated[Optional[str], typer.Argument()] = None, kb: KbName = ...,
           top_k: Annotated[int, typer.Option("--top-k")] = 0,
           mode: Annotated[str, typer.Option(help="hybrid | vector | text")] = "hybrid",
           queries: Annotated[Optional[Path], typer.Option(help="JSONL of {id, text}.")] = None,
           data_dir: DataDir = None, as_json: AsJson = False) -> None:
    """Search a knowledge base: one query, or a batch from --queries."""
    from . import pipeline
    from .output import hit_json

    if mode not in ("hybrid", "vector", "text"):
        raise GroundworkError(f"--mode must be hybrid, vector or text, got {mode!r}")
    if (query is None) == (queries is None):
        raise GroundworkError("give either a QUERY or --queries FILE.jsonl")
    engine = _engine(data_dir)
    _, scope = _scope(engine, kb)
    k = top_k or engine.settings.top_k
    if queries is not None:
        for item in _jsonl(queries):
            hits = pipeline.search(engine, item["text"], scope=scope, top_k=k, mode=mode)
            _emit({"id": item.get("id"), "results": [hit_json(h) for h in hits]})
        return
    hits = pipeline.search(engine, query, scope=scope, top_k=k, mode=mode)
    if as_json:
        _emit({"query": query, "results": [hit_json(h) for h in hits]})
        return
    for rank, hit in enumerate(hits, start=1):
        where = f"p.{hit.chunk.page}" if hit.chunk.page else f"chunk {hit.chunk.index}"
        typer.echo(f"{rank:2}. {hit.score:.3f}  {hit.document.filename} ({where})")
        typer.echo("    " + " ".join(hit.chunk.text.split())[:200])


@app.command()
def ask(question: Annotated[Optional[str], typer.Argument()] = None, kb: KbName = ...,
        top_k: Annotated[int, typer.Option("--top-k")] = 0,
        questions: Annotated[Optional[Path], typer.Option(help="JSONL of {id, text}.")] = None,
        data_dir: DataDir = None, as_json: AsJson = False) -> None:
    """Answer a question from a knowledge base, with citations."""
    from . import pipeline
    from .output import answer_json

    if (question is None) == (questions is None):
        raise GroundworkError("give either a QUESTION or --questions FILE.jsonl")
    engine = _engine(data_dir)
    _, scope = _scope(engine, kb)
    if questions is not None:
        for item in _jsonl(questions):
            answer = pipeline.ask(engine, item["text"], scope=scope, top_k=top_k or None)
            _emit({"id": item.get("id"), **answer_json(answer)})
        return
    answer = pipeline.ask(engine, question, scope=scope, top_k=top_k or None)
    if as_json:
        _emit(answer_json(answer))
        return
    typer.echo(answer.text)
    for c in answer.citations:
        page = f", page {c.page}" if c.page else ""
        typer.echo(f"  [{c.number}] {c.filename} (chunk {c.chunk_index}{page})")


@app.command()
def serve(host: Annotated[str, typer.Option()] = "127.0.0.1",
          port: Annotated[int, typer.Option()] = 8000, data_dir: DataDir = None,
          workers: Annotated[int, typer.Option(help="Ingestion worker threads (0: run `groundwork worker`).")] = 2
          ) -> None:
    """Serve the HTTP API and the web UI. On a loopback address with no API key
    created, it serves one local tenant without keys; otherwise every request needs
    `Authorization: Bearer <key>` (`groundwork keys create`)."""
    import uvicorn

    from .api.app import create_app
    from .api.deps import is_loopback

    app = create_app(_engine(data_dir), open_access=is_loopback(host), start_workers=workers > 0,
                     workers=max(workers, 1))
    uvicorn.run(app, host=host, port=port, log_level="info")


@app.command(name="eval")
def evaluate(dataset: Annotated[Path, typer.Argument(help="A BEIR-format folder.")],
             split: Annotated[str, typer.Option()] = "test",
             modes: Annotated[str, typer.Option(help="Comma-separated.")] = "vector,text,hybrid",
             limit: Annotated[int, typer.Option(help="Evaluate the first N queries (0 = all).")] = 0,
             data_dir: DataDir = None, as_json: AsJson = False) -> None:
    """nDCG@10, Recall@10, Recall@100 and MRR@10 on a BEIR dataset."""
    from .evaluate import evaluate_beir, format_table

    engine = _engine(data_dir)
    results = evaluate_beir(engine, dataset, split=split, modes=modes.split(","), limit=limit,
                            log=lambda line: typer.echo(line, err=True))
    if as_json:
        _emit({"dataset": str(dataset), "split": split, "results": results})
    else:
        typer.echo(format_table(results))


@app.command()
def chat(request: Annotated[Path, typer.Option("--request", help="A JSON chat request (the HTTP body).")],
         data_dir: DataDir = None, as_json: AsJson = False) -> None:
    """One chat turn from a JSON request: messages, assistant, template, record, kbs, files."""
    from . import pipeline
    from .output import answer_json
    from .requests import chat_request

    try:
        body = json.loads(request.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise GroundworkError(f"{request}: cannot read a JSON request ({exc})") from None
    engine = _engine(data_dir)
    answer = pipeline.chat(engine, chat_request(engine.store, body))
    if as_json:
        _emit({"conversation_id": answer.conversation_id, **answer_json(answer)})
        return
    typer.echo(answer.text)
    for c in answer.citations:
        typer.echo(f"  [{c.number}] {c.source} chunk {c.chunk_index}" + (f", page {c.page}" if c.page else ""))


def _object_command(kind: str, fields_help: str):
    sub = typer.Typer(no_args_is_help=True, help=f"Create, update, show and list {kind}s.")

    @sub.command("create")
    def create(spec: Annotated[str, typer.Argument(help=f"JSON object: {fields_help}")],
               data_dir: DataDir = None) -> None:
        """Create from a JSON object (or @file.json)."""
        from . import domain
        from .types import DEFAULT_TENANT

        engine = _engine(data_dir)
        obj = domain.create(engine.store, DEFAULT_TENANT, kind, **_spec(spec))
        _emit(domain.to_json(obj))

    @sub.command("update")
    def update(object_id: str, spec: Annotated[str, typer.Argument(help="JSON object of fields to change")],
               data_dir: DataDir = None) -> None:
        """Change some fields (JSON object or @file.json)."""
        from . import domain
        from .types import DEFAULT_TENANT

        engine = _engine(data_dir)
        _emit(domain.to_json(domain.update(engine.store, DEFAULT_TENANT, kind, object_id, **_spec(spec))))

    @sub.command("show")
    def show(object_id: str, data_dir: DataDir = None) -> None:
        from . import domain
        from .types import DEFAULT_TENANT

        _emit(domain.to_json(domain.get(_engine(data_dir).store, DEFAULT_TENANT, kind, object_id)))

    @sub.command("list")
    def list_(data_dir: DataDir = None) -> None:
        from . import domain
        from .types import DEFAULT_TENANT

        for obj in domain.list_all(_engine(data_dir).store, DEFAULT_TENANT, kind):
            _emit(domain.to_json(obj))

    app.add_typer(sub, name=kind)


def _spec(spec: str) -> dict:
    text = Path(spec[1:]).read_text(encoding="utf-8") if spec.startswith("@") else spec
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise GroundworkError(f"not a JSON object: {exc.msg}") from None
    if not isinstance(data, dict):
        raise GroundworkError("expected a JSON object")
    return data


_object_command("assistant", '{"name", "system_prompt", "model", "top_k", "kb_ids", "files": '
                             '[{"document_id", "mode"}] or [ids], "query_strategy", "fusion", "escalation"}')
_object_command("template", '{"name", "body", "files"}')
_object_command("record", '{"name", "files"}')


@app.command()
def add(paths: Annotated[list[Path], typer.Argument(help="Files to store (no kb): attach them by id.")],
        record: Annotated[Optional[str], typer.Option(help="Ingest as files of this record.")] = None,
        data_dir: DataDir = None) -> None:
    """Ingest files outside any kb, to attach to assistants, templates, records or chats.
    With --record, the files are added to that record (always retrieved, never full)."""
    from . import domain, pipeline
    from .types import DEFAULT_TENANT

    engine = _engine(data_dir)
    if record:
        domain.get(engine.store, DEFAULT_TENANT, "record", record)
    reports = pipeline.ingest_paths(engine, pipeline.iter_files(paths), record_id=record)
    for r in reports:
        _emit({"filename": r.filename, "document_id": r.document_id, "status": r.status, "error": r.error})
    ok = [r.document_id for r in reports if r.status != "failed"]
    if record and ok:
        current = domain.get(engine.store, DEFAULT_TENANT, "record", record)
        files = [*(f.document_id for f in current.files), *(d for d in ok if d not in {f.document_id for f in current.files})]
        domain.update(engine.store, DEFAULT_TENANT, "record", record, files=files)
    if len(ok) < len(reports):
        raise typer.Exit(1)


@kb_app.command("list")
def kb_list(data_dir: DataDir = None) -> None:
    from .types import DEFAULT_TENANT

    engine = _engine(data_dir)
    for item in engine.store.list_kbs(DEFAULT_TENANT):
        count = len(engine.store.list_documents(DEFAULT_TENANT, item.id))
        typer.echo(f"{item.name}\t{count} documents\t{item.id}")


@kb_app.command("create")
def kb_create(name: str, description: str = "", data_dir: DataDir = None) -> None:
    from .types import DEFAULT_TENANT

    typer.echo(_engine(data_dir).store.create_kb(DEFAULT_TENANT, name, description).id)


@kb_app.command("delete")
def kb_delete(name: str, data_dir: DataDir = None) -> None:
    from .types import DEFAULT_TENANT

    engine = _engine(data_dir)
    found = engine.store.get_kb(DEFAULT_TENANT, name)
    for document in engine.store.list_documents(DEFAULT_TENANT, found.id):
        engine.storage.delete(DEFAULT_TENANT, document.id)
    engine.store.delete_kb(DEFAULT_TENANT, found.id)


keys_app = typer.Typer(no_args_is_help=True, help="API keys: one or more per tenant.")
app.add_typer(keys_app, name="keys")


@keys_app.command("create")
def keys_create(tenant: Annotated[str, typer.Option("--tenant", help="The tenant the key acts as.")],
                data_dir: DataDir = None) -> None:
    """Create a key and print it (once: only its hash is stored)."""
    from .access import create_api_key

    key_id, key = create_api_key(_engine(data_dir).store, tenant)
    typer.echo(f"key id {key_id} for tenant {tenant}:", err=True)
    typer.echo(key)


@keys_app.command("list")
def keys_list(data_dir: DataDir = None, as_json: AsJson = False) -> None:
    """Key ids and tenants (never the keys)."""
    from .access import list_api_keys

    for item in list_api_keys(_engine(data_dir).store):
        if as_json:
            _emit(item)
        else:
            typer.echo(f"{item['id']}\t{item['tenant']}")


@keys_app.command("revoke")
def keys_revoke(key_id: Annotated[str, typer.Argument(help="Key id (or its first 8+ characters).")],
                data_dir: DataDir = None) -> None:
    from .access import revoke_api_key

    tenant = revoke_api_key(_engine(data_dir).store, key_id)
    typer.echo(f"revoked {key_id} (tenant {tenant})", err=True)


@app.command()
def worker(data_dir: DataDir = None,
           threads: Annotated[int, typer.Option(help="Worker threads.")] = 2,
           once: Annotated[bool, typer.Option(help="Process what is due, then exit.")] = False) -> None:
    """Run the ingestion workers without the API (next to `serve --workers 0`)."""
    import signal
    import threading

    from .jobs import WorkerPool, open_queue

    engine = _engine(data_dir)
    pool = WorkerPool(engine, open_queue(engine), workers=threads)
    # Load the model before taking jobs: a worker that cannot must not use up their attempts.
    engine.embedder  # noqa: B018
    if once:
        pool.recover()
        pool.drain()
        return
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    pool.start()
    typer.echo(f"worker {pool.owner}: {threads} threads; Ctrl-C to stop", err=True)
    stop.wait()
    pool.stop()


def _settings(data_dir: Path | None):
    from .config import load_settings

    return load_settings(**({"home": data_dir} if data_dir else {}))


def _redacted(url: str) -> str:
    import re

    return re.sub(r"://([^:/@]*):[^@/]*@", r"://\1:***@", url)


@app.command()
def migrate(data_dir: DataDir = None) -> None:
    """Apply pending schema migrations to the configured database (GROUNDWORK_DATABASE_URL,
    else the SQLite file under GROUNDWORK_HOME) and print what was applied."""
    from .store import open_store

    settings = _settings(data_dir)
    store = open_store(settings)  # opening a store applies what is pending
    applied = store.applied_migrations
    store.close()
    where = (_redacted(settings.database_url) if settings.database_url
             else str(Path(settings.home) / "groundwork.db"))
    for name in applied:
        typer.echo(f"applied {name}")
    typer.echo(f"{where}: {len(applied)} migrations applied" if applied else f"{where}: up to date")


@app.command(name="copy")
def copy_(source: Annotated[str, typer.Option("--from", help="A GROUNDWORK_HOME folder (embedded SQLite and its "
                                                             "originals), sqlite:///FILE or postgresql://...")],
          target: Annotated[str, typer.Option("--to", help="The same forms. With a URL, originals go to the "
                                                           "configured storage (GROUNDWORK_STORAGE, --data-dir).")],
          kbs: Annotated[Optional[list[str]], typer.Option("--kb", help="Only this knowledge base (repeatable); "
                                                           "objects are then not copied.")] = None,
          tenants: Annotated[Optional[list[str]], typer.Option(
              "--tenant", help="Only this tenant (repeatable; default: the default tenant and every tenant "
                               "with an API key).")] = None,
          data_dir: DataDir = None) -> None:
    """Copy knowledge bases with their documents, chunks, embeddings (of every model),
    assistants/templates/records/conversations and originals to another store, under the
    same ids and without re-embedding. Safe to run again."""
    from .transfer import copy_data, open_side

    base = _settings(data_dir)
    src = open_side(base, source, must_exist=True)
    try:
        dst = open_side(base, target)
        try:
            report = copy_data(src, dst, tenants=tenants or None, kb_names=kbs or (),
                               log=lambda line: typer.echo(line, err=True))
        finally:
            dst.close()
    finally:
        src.close()
    vectors = ", ".join(f"{n} {model}" for model, n in report.embeddings.items()) or "none"
    typer.echo(f"copied {report.kbs} knowledge bases, {report.documents} documents, {report.chunks} chunks, "
               f"{report.objects} objects, {report.originals} originals; vectors: {vectors}")
    if report.missing_originals:
        typer.echo(f"{len(report.missing_originals)} documents had no original in the source", err=True)
    if report.unfinished:
        typer.echo(f"{len(report.unfinished)} documents were still being ingested in the source; "
                   "submit them again on the target", err=True)


def main() -> None:
    try:
        app()
    except GroundworkError as exc:
        typer.echo(f"error: {exc.message}", err=True)
        sys.exit(1)
