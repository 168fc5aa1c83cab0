"""Settings: the only module that reads the environment (and `.env`).

Everything else takes a `Settings` (or plain arguments). Unknown or out-of-range values
fail at start-up with a message naming the variable; `RAG_CHUNK_LIMIT` is the one
exception the seeds require: it is clamped to 1..500 (and logged), never rejected.
"""

from __future__ import annotations

import logging
import os
import re
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from .errors import ConfigError

log = logging.getLogger(__name__)

CHUNK_LIMIT_MIN, CHUNK_LIMIT_MAX = 1, 500
MODEL_BUDGET_PREFIX = "RAG_CONTEXT_MAX_CHARS_"


def model_env_suffix(model: str) -> str:
    """How a model name maps to its budget variable: upper-case, every run of
    characters other than A-Z/0-9 becomes one "_" (gpt-4o-mini -> GPT_4O_MINI,
    openai/gpt-4.1 -> OPENAI_GPT_4_1)."""
    return re.sub(r"[^A-Z0-9]+", "_", model.upper()).strip("_")


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_file=".env", env_file_encoding="utf-8",
                                      extra="ignore", populate_by_name=True)

    home: Path = Field(Path(".groundwork"), validation_alias="GROUNDWORK_HOME")
    database_url: str | None = Field(None, validation_alias="GROUNDWORK_DATABASE_URL")

    embedder: Literal["local", "openai"] = Field("local", validation_alias="GROUNDWORK_EMBEDDER")
    embed_model: str = Field("text-embedding-3-small", validation_alias="GROUNDWORK_EMBED_MODEL")
    embed_base_url: str | None = Field(None, validation_alias="GROUNDWORK_EMBED_BASE_URL")
    embed_api_key: str | None = Field(None, validation_alias="GROUNDWORK_EMBED_API_KEY")
    embed_dimensions: int | None = Field(None, ge=1, le=8192,
                                         validation_alias="GROUNDWORK_EMBED_DIMENSIONS")
    embed_batch_size: int = Field(32, ge=1, le=2048, validation_alias="GROUNDWORK_EMBED_BATCH_SIZE")
    threads: int = Field(0, ge=0, le=256, validation_alias="GROUNDWORK_THREADS")

    llm_base_url: str | None = Field(None, validation_alias="GROUNDWORK_LLM_BASE_URL")
    llm_model: str | None = Field(None, validation_alias="GROUNDWORK_LLM_MODEL")
    llm_api_key: str | None = Field(
        None, validation_alias=AliasChoices("GROUNDWORK_LLM_API_KEY", "OPENAI_API_KEY"))

    chunk_unit: Literal["tokens", "chars"] = Field("tokens", validation_alias="GROUNDWORK_CHUNK_UNIT")
    chunk_size: int | None = Field(None, ge=16, le=100_000, validation_alias="GROUNDWORK_CHUNK_SIZE")
    chunk_overlap: int | None = Field(None, ge=0, le=10_000, validation_alias="GROUNDWORK_CHUNK_OVERLAP")

    top_k: int = Field(8, ge=1, le=1000, validation_alias="GROUNDWORK_TOP_K")
    rag_chunk_limit: int = Field(
        50, validation_alias=AliasChoices("RAG_CHUNK_LIMIT", "SOLR_RAG_CHUNK_LIMIT"))
    rag_context_max_chars: int = Field(24_000, ge=100, le=10_000_000,
                                       validation_alias="RAG_CONTEXT_MAX_CHARS")
    model_context_max_chars: dict[str, int] = Field(default_factory=dict)

    max_upload_files: int = Field(5, ge=1, le=1000, validation_alias="GROUNDWORK_MAX_UPLOAD_FILES")
    max_upload_bytes: int = Field(50 * 1024 * 1024, ge=1, validation_alias="GROUNDWORK_MAX_UPLOAD_BYTES")

    # originals storage: a local directory under GROUNDWORK_HOME, or S3-compatible object
    # storage (credentials from these fields, else boto3's usual chain); the quota caps
    # the bytes of originals one tenant may keep (checked before an upload is stored).
    storage: Literal["local", "s3"] = Field("local", validation_alias="GROUNDWORK_STORAGE")
    s3_bucket: str | None = Field(None, validation_alias="GROUNDWORK_S3_BUCKET")
    s3_prefix: str = Field("originals/", validation_alias="GROUNDWORK_S3_PREFIX")
    s3_endpoint_url: str | None = Field(None, validation_alias="GROUNDWORK_S3_ENDPOINT_URL")
    s3_region: str | None = Field(None, validation_alias="GROUNDWORK_S3_REGION")
    s3_access_key_id: str | None = Field(None, validation_alias="GROUNDWORK_S3_ACCESS_KEY_ID")
    s3_secret_access_key: str | None = Field(None, validation_alias="GROUNDWORK_S3_SECRET_ACCESS_KEY")
    tenant_quota_bytes: int = Field(5 * 1024 ** 3, ge=1, validation_alias="GROUNDWORK_TENANT_QUOTA_BYTES")

    # PostgreSQL (used only with a postgresql:// GROUNDWORK_DATABASE_URL): connections per
    # process; HNSW build parameters (apply to a model's index when it is created);
    # search-time candidates and pgvector's iterative scans for filtered searches; scopes
    # of at most `pg_exact_below` chunks are ranked exactly (0: always use the index).
    pg_pool_size: int = Field(8, ge=1, le=1000, validation_alias="GROUNDWORK_PG_POOL_SIZE")
    pg_hnsw_m: int = Field(16, ge=2, le=100, validation_alias="GROUNDWORK_PG_HNSW_M")
    pg_hnsw_ef_construction: int = Field(64, ge=4, le=1000,
                                         validation_alias="GROUNDWORK_PG_HNSW_EF_CONSTRUCTION")
    pg_ef_search: int = Field(100, ge=1, le=1000, validation_alias="GROUNDWORK_PG_EF_SEARCH")
    pg_iterative_scan: Literal["off", "relaxed_order", "strict_order"] = Field(
        "relaxed_order", validation_alias="GROUNDWORK_PG_ITERATIVE_SCAN")
    pg_max_scan_tuples: int = Field(20_000, ge=1, validation_alias="GROUNDWORK_PG_MAX_SCAN_TUPLES")
    pg_exact_below: int = Field(1000, ge=0, validation_alias="GROUNDWORK_PG_EXACT_BELOW")

    @field_validator("rag_chunk_limit", mode="after")
    @classmethod
    def _clamp_chunk_limit(cls, value: int) -> int:
        clamped = min(max(value, CHUNK_LIMIT_MIN), CHUNK_LIMIT_MAX)
        if clamped != value:
            log.warning("RAG_CHUNK_LIMIT=%s clamped to %s (allowed %s..%s)",
                        value, clamped, CHUNK_LIMIT_MIN, CHUNK_LIMIT_MAX)
        return clamped

    @property
    def data_dir(self) -> Path:
        return Path(self.home)

    @property
    def llm_configured(self) -> bool:
        return bool(self.llm_base_url or self.llm_api_key) and bool(self.llm_model)

    def context_max_chars(self, model: str | None) -> int:
        """The context budget for `model`: RAG_CONTEXT_MAX_CHARS_<MODEL> when set (see
        `model_env_suffix`), else RAG_CONTEXT_MAX_CHARS."""
        if model:
            override = self.model_context_max_chars.get(model_env_suffix(model))
            if override is not None:
                return override
        return self.rag_context_max_chars

    def effective_chunking(self, max_tokens: int) -> tuple[str, int, int]:
        """(unit, size, overlap). Token defaults leave room for the heading prefix
        inside the embedder's input; the chars mode is seed 000's 1,500 characters."""
        if self.chunk_unit == "chars":
            size = self.chunk_size or 1500
            overlap = self.chunk_overlap if self.chunk_overlap is not None else 200
        else:
            size = self.chunk_size or min(180, max_tokens)
            overlap = self.chunk_overlap if self.chunk_overlap is not None else 30
        if overlap >= size:
            raise ConfigError(f"GROUNDWORK_CHUNK_OVERLAP ({overlap}) must be smaller than "
                              f"GROUNDWORK_CHUNK_SIZE ({size})")
        return self.chunk_unit, size, overlap


def _model_budgets(environ: dict[str, str]) -> dict[str, int]:
    budgets = {}
    for key, raw in environ.items():
        if key.upper().startswith(MODEL_BUDGET_PREFIX) and len(key) > len(MODEL_BUDGET_PREFIX):
            try:
                value = int(raw)
            except ValueError:
                raise ConfigError(f"{key} must be an integer, got {raw!r}") from None
            if value < 100:
                raise ConfigError(f"{key} must be at least 100, got {value}")
            budgets[model_env_suffix(key[len(MODEL_BUDGET_PREFIX):])] = value
    return budgets


def load_settings(**overrides) -> Settings:
    """Build settings from the environment, turning validation errors into one
    ConfigError that names each offending variable."""
    try:
        settings = Settings(**overrides)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            name = str(err["loc"][0]) if err["loc"] else "?"
            problems.append(f"{_env_name(name)}: {err['msg']} (got {err.get('input')!r})")
        raise ConfigError("invalid configuration: " + "; ".join(problems)) from None
    if "model_context_max_chars" not in overrides:
        settings = settings.model_copy(update={"model_context_max_chars": _model_budgets(dict(os.environ))})
    return settings


def _env_name(field: str) -> str:
    info = Settings.model_fields.get(field)
    alias = info.validation_alias if info else None
    if isinstance(alias, str):
        return alias
    if isinstance(alias, AliasChoices):
        return str(alias.choices[0])
    return field


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return load_settings()
