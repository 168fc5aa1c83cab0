"""Any OpenAI-compatible chat API (OpenAI, OpenRouter, Azure, Gemini's compatible endpoint,
Ollama, vLLM, llama.cpp) through the official `openai` SDK.

SDK exceptions are translated here, once, into `LLMError` with a one-line message that
names the base URL and the model, never the API key. The SDK exception is not chained
(`from None`): some servers echo the key back in their error body."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from groundwork.errors import LLMError
from groundwork.generate import ESCALATE_TOOL_NAME
from groundwork.types import Generation, Usage

HANDOFF_TEXT = "I'm passing this conversation to a human colleague who can help further."


class OpenAICompatLLM:
    """`LLM` over `POST {base_url}/chat/completions`. `api_key=None` suits local servers
    that ignore it (a placeholder is sent, the SDK insists on one)."""

    def __init__(self, base_url: str, model: str, api_key: str | None = None, *,
                 timeout: float = 60, max_retries: int = 2,
                 http_client: Any | None = None) -> None:
        try:
            import openai
        except ImportError as exc:  # pragma: no cover - openai is a core dependency
            raise LLMError("the 'openai' package is missing: pip install openai") from exc
        self._openai = openai
        self.base_url = base_url.rstrip("/")
        self.model = model
        self._secret = api_key or ""
        self._client = openai.OpenAI(
            base_url=self.base_url, api_key=api_key or "not-needed", timeout=timeout,
            max_retries=max_retries, http_client=http_client,
        )

    def complete(self, messages: list[dict], *, tools: list[dict] | None = None) -> Generation:
        extra: dict[str, Any] = {"tools": tools} if tools else {}
        try:
            response = self._client.chat.completions.create(
                model=self.model, messages=messages, **extra)
        except self._openai.OpenAIError as exc:
            raise self._translate(exc) from None
        if not getattr(response, "choices", None):
            raise LLMError(f"{self._where()}: the response had no choices")
        message = response.choices[0].message
        calls = [c for c in (message.tool_calls or [])
                 if getattr(getattr(c, "function", None), "name", None) == ESCALATE_TOOL_NAME]
        text = (message.content or "").strip()
        if calls and not text:
            text = HANDOFF_TEXT
        usage = response.usage
        return Generation(
            text=text,
            usage=Usage(input_tokens=getattr(usage, "prompt_tokens", 0) or 0,
                        output_tokens=getattr(usage, "completion_tokens", 0) or 0),
            escalate=bool(calls),
        )

    def stream(self, messages: list[dict]) -> Iterator[str]:
        """Yield text deltas as they arrive (for server-sent events)."""
        try:
            # `with` closes the HTTP response even when the consumer stops early.
            with self._client.chat.completions.create(
                    model=self.model, messages=messages, stream=True) as chunks:
                for chunk in chunks:
                    for choice in chunk.choices or ():
                        delta = getattr(choice.delta, "content", None)
                        if delta:
                            yield delta
        except self._openai.OpenAIError as exc:
            raise self._translate(exc) from None

    def _where(self) -> str:
        return f"LLM at {self.base_url} (model {self.model!r})"

    def _translate(self, exc: Exception) -> LLMError:
        o = self._openai
        if isinstance(exc, o.APITimeoutError):
            return LLMError(f"{self._where()} timed out")
        if isinstance(exc, o.APIConnectionError):
            return LLMError(f"{self._where()} is unreachable: {self._detail(exc)}")
        if isinstance(exc, o.AuthenticationError):
            return LLMError(f"{self._where()} rejected the API key (HTTP 401)")
        if isinstance(exc, o.PermissionDeniedError):
            return LLMError(f"{self._where()} denied access (HTTP 403): {self._detail(exc)}")
        if isinstance(exc, o.NotFoundError):
            return LLMError(f"{self._where()} answered 404 (wrong base URL or unknown model): "
                            f"{self._detail(exc)}")
        if isinstance(exc, o.RateLimitError):
            return LLMError(f"{self._where()} is rate limiting requests (HTTP 429)")
        if isinstance(exc, o.APIStatusError):
            return LLMError(f"{self._where()} failed with HTTP {exc.status_code}: "
                            f"{self._detail(exc)}")
        return LLMError(f"{self._where()} failed: {self._detail(exc)}")

    def _detail(self, exc: Exception) -> str:
        """The server's message on one line, shortened, with the key blanked out."""
        body = getattr(exc, "body", None)
        text = ""
        if isinstance(body, dict):
            err = body.get("error", body)
            text = err.get("message", "") if isinstance(err, dict) else str(err)
        text = " ".join((text or str(exc) or type(exc).__name__).split())
        if self._secret:
            text = text.replace(self._secret, "***")
        return text[:200]

