"""A local fake of the OpenAI chat completions API, speaking the real wire protocol, for
tests that drive the real `openai` SDK.

    with serve_fake_openai() as server:           # server is the base URL (a str)
        llm = OpenAICompatLLM(server, "fake-model", None)
        ...
        server.requests[-1]["messages"]            # JSON bodies received, in order

Behaviour of `POST /v1/chat/completions`:
- wrong key (when `api_key` is given) -> 401 with an OpenAI-style error body;
- `server.fail_with = 500` (or a last user message containing "[[500]]") -> that status;
- `tools` offered and the last user message mentions "human" -> a tool call to
  `escalate_to_human`;
- `"stream": true` -> server-sent `chat.completion.chunk` events, then `data: [DONE]`;
- otherwise JSON with `choices[0].message.content` and `usage`. The content comes from
  `reply_fn(body)`; the default names the `[n]` markers found in the system message.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ReplyFn = Callable[[dict], str]


class FakeOpenAI(str):
    """The base URL, carrying the server's state for assertions."""

    requests: list[dict]
    headers: list[dict]
    fail_with: int | None

    @property
    def base_url(self) -> str:
        return str(self)


def default_reply(body: dict) -> str:
    system = next((m.get("content") or "" for m in body.get("messages", [])
                   if m.get("role") == "system"), "")
    markers = re.findall(r"^(\[\d+\]) Source:", system, flags=re.M)
    if not markers:
        return "I don't have that information."
    return "The context has sources " + " ".join(markers) + "."


def _last_user(body: dict) -> str:
    users = [m.get("content") or "" for m in body.get("messages", []) if m.get("role") == "user"]
    return users[-1] if users and isinstance(users[-1], str) else ""


def _usage(body: dict, reply: str) -> dict:
    prompt = sum(len(str(m.get("content") or "").split()) for m in body.get("messages", []))
    completion = len(reply.split())
    return {"prompt_tokens": prompt, "completion_tokens": completion,
            "total_tokens": prompt + completion}


def _handler(server_state: FakeOpenAI, reply_fn: ReplyFn, api_key: str | None):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:  # keep test output quiet
            pass

        def _json(self, status: int, payload: dict) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _error(self, status: int, message: str, kind: str) -> None:
            self._json(status, {"error": {"message": message, "type": kind, "code": None,
                                          "param": None}})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            server_state.requests.append(body)
            server_state.headers.append({k.lower(): v for k, v in self.headers.items()})
            if self.path.rstrip("/") not in ("/v1/chat/completions", "/v1/embeddings"):
                return self._error(404, f"unknown path {self.path}", "invalid_request_error")
            sent = self.headers.get("Authorization", "")
            if api_key is not None and sent != f"Bearer {api_key}":
                key = sent.removeprefix("Bearer ")
                # Real servers echo (part of) the wrong key; the client must not repeat it.
                return self._error(401, f"Incorrect API key provided: {key}.",
                                   "invalid_request_error")
            if self.path.rstrip("/") == "/v1/embeddings":
                return self._embeddings(body)
            status = server_state.fail_with or (500 if "[[500]]" in _last_user(body) else None)
            if status:
                return self._error(status, "The server had an error while processing "
                                   "your request.", "server_error")
            model = body.get("model", "fake-model")
            tools = [t.get("function", {}).get("name") for t in body.get("tools") or []]
            if "escalate_to_human" in tools and "human" in _last_user(body).lower():
                return self._tool_call(body, model)
            reply = reply_fn(body)
            if body.get("stream"):
                return self._stream(model, reply)
            self._json(200, {
                "id": "chatcmpl-fake", "object": "chat.completion", "created": int(time.time()),
                "model": model,
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": reply}}],
                "usage": _usage(body, reply),
            })

        def _embeddings(self, body: dict) -> None:
            """Deterministic bag-of-words vectors (hashed words), so texts that share
            words are similar, as with a real embedding model. Honours `dimensions`."""
            dims = int(body.get("dimensions") or 64)
            inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
            data = []
            for index, text in enumerate(inputs):
                vector = [0.0] * dims
                for word in re.findall(r"\w+", str(text).lower()):
                    vector[int(hashlib.sha256(word.encode()).hexdigest(), 16) % dims] += 1.0
                data.append({"object": "embedding", "index": index, "embedding": vector})
            data.reverse()  # real servers may answer out of order; clients sort by index
            tokens = sum(len(str(t).split()) for t in inputs)
            self._json(200, {"object": "list", "data": data, "model": body.get("model"),
                             "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})

        def _tool_call(self, body: dict, model: str) -> None:
            arguments = json.dumps({"reason": "The user asked for a human."})
            self._json(200, {
                "id": "chatcmpl-fake", "object": "chat.completion", "created": int(time.time()),
                "model": model,
                "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                    "role": "assistant", "content": None,
                    "tool_calls": [{"id": "call_1", "type": "function", "function": {
                        "name": "escalate_to_human", "arguments": arguments}}]}}],
                "usage": _usage(body, ""),
            })

        def _stream(self, model: str, reply: str) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.end_headers()
            pieces = re.findall(r"\S+\s*", reply)
            deltas = [{"role": "assistant", "content": ""}] + [{"content": p} for p in pieces]
            for i, delta in enumerate(deltas + [{}]):
                event = {"id": "chatcmpl-fake", "object": "chat.completion.chunk",
                         "created": int(time.time()), "model": model,
                         "choices": [{"index": 0, "delta": delta,
                                      "finish_reason": "stop" if i == len(deltas) else None}]}
                self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
                self.wfile.flush()
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()

    return Handler


@contextmanager
def serve_fake_openai(reply_fn: ReplyFn | None = None, *,
                      api_key: str | None = None) -> Iterator[FakeOpenAI]:
    """Serve on 127.0.0.1, a free port, in a thread; yield the base URL (`.../v1`).
    With `api_key` set, any other bearer token gets a 401."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    httpd.daemon_threads = True
    state = FakeOpenAI(f"http://127.0.0.1:{httpd.server_address[1]}/v1")
    state.requests, state.headers, state.fail_with = [], [], None
    # The handler needs the state, the state needs the port: bind first, then plug it in.
    httpd.RequestHandlerClass = _handler(state, reply_fn or default_reply, api_key)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)
