"""A scripted OpenAI-compatible chat server on 127.0.0.1, for wire-level tests.

Tests drive the real ``ChatOpenAI`` (and so the real ``openai`` client with its retries, timeouts
and streaming parser) against replies they script: plain text, tool calls, and faults (429, 5xx,
slow replies, malformed tool-call JSON, empty ``choices``). The server runs uvicorn in a
background thread, so sync tests, async tests and subprocesses (the LangGraph dev server) can all
reach it by URL.

Replies are served in order from a queue; when the queue is empty an optional responder (an
"oracle" computing each reply from the request) answers; an async responder may hold a request
(for example until other runs have caught up with it). With neither, the server answers 500
naming the unexpected request and telling the client not to retry, so the test fails loudly.

Usage numbers are deterministic (characters / 4, rounded up) so benchmarks can compare prompt
sizes across systems without a tokenizer.

This module is also a pytest plugin: ``pytest_plugins = ["tests.scripted_openai"]`` provides the
``scripted_openai`` fixture.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import math
import socket
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field, replace
from types import TracebackType
from typing import Any, Self

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

CREATED = 1_700_000_000
"""Fixed ``created`` timestamp: responses are byte-for-byte reproducible."""

STREAM_PIECE = 8
"""Characters per streamed content or argument delta, so clients really reassemble chunks."""


@dataclass(frozen=True, kw_only=True)
class Reply:
    """One scripted answer to one ``POST /v1/chat/completions``.

    Build these with the constructors below (``text``, ``tool_calls``, the faults) rather than
    directly; the fields are the union of what they need.
    """

    status: int = 200
    content: str | None = None
    tool_calls: tuple[tuple[str, str], ...] = ()
    """(name, raw JSON arguments): raw so a test can send arguments that do not parse."""
    headers: dict[str, str] = field(default_factory=dict)
    error: str | None = None
    """Error message for a non-200 reply (OpenAI's ``{"error": {...}}`` body)."""
    delay: float = 0.0
    """Seconds to wait before answering: how a test provokes a client timeout."""
    empty_choices: bool = False
    no_usage: bool = False
    """Leave ``usage`` out of the answer, as some servers do (the graph then estimates it)."""


def text(content: str) -> Reply:
    """An assistant message with plain text and no tool calls."""
    return Reply(content=content)


def tool_calls(*calls: tuple[str, dict[str, Any]], content: str | None = None) -> Reply:
    """An assistant message calling tools, e.g. ``tool_calls(("create_todo", {"items": []}))``."""
    return Reply(
        content=content,
        tool_calls=tuple((name, json.dumps(args)) for name, args in calls),
    )


def without_usage(reply: Reply) -> Reply:
    """``reply`` with no ``usage`` in the answer (llama.cpp builds and some proxies send none)."""
    return replace(reply, no_usage=True)


def malformed_tool_call(name: str, raw_arguments: str) -> Reply:
    """A tool call whose ``arguments`` string is sent verbatim (e.g. truncated JSON)."""
    return Reply(tool_calls=((name, raw_arguments),))


def rate_limited(retry_after: float = 0) -> Reply:
    """A 429 with ``Retry-After`` (seconds) and ``retry-after-ms``.

    The openai client honours a positive delay; with 0 it falls back to its own backoff.
    """
    return Reply(
        status=429,
        error="Rate limit reached (scripted).",
        headers={
            "retry-after": str(math.ceil(retry_after)),
            "retry-after-ms": str(round(retry_after * 1000)),
        },
    )


def server_error(status: int = 500) -> Reply:
    """A 5xx (or any status) with an OpenAI-style error body."""
    return Reply(status=status, error=f"Scripted server error {status}.")


def slow(seconds: float, then: Reply) -> Reply:
    """``then``, answered only after ``seconds``: longer than the client's timeout, a timeout."""
    return replace(then, delay=seconds)


def empty_choices() -> Reply:
    """A 200 whose ``choices`` list is empty, as some compatible servers send on errors."""
    return Reply(empty_choices=True)


def _tokens(payload: Any) -> int:
    """Deterministic token estimate: characters of the canonical JSON / 4, rounded up."""
    return math.ceil(len(json.dumps(payload, sort_keys=True, ensure_ascii=False)) / 4)


def _usage(body: dict[str, Any], reply: Reply) -> dict[str, int]:
    prompt = _tokens({"messages": body.get("messages", []), "tools": body.get("tools", [])})
    completion = _tokens({"content": reply.content or "", "tool_calls": list(reply.tool_calls)})
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def _tool_call_dicts(reply: Reply, request_number: int) -> list[dict[str, Any]]:
    return [
        {
            "id": f"call_{request_number}_{index}",
            "type": "function",
            "function": {"name": name, "arguments": arguments},
        }
        for index, (name, arguments) in enumerate(reply.tool_calls)
    ]


def _finish_reason(reply: Reply) -> str:
    return "tool_calls" if reply.tool_calls else "stop"


def _completion(body: dict[str, Any], reply: Reply, request_number: int) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if reply.tool_calls:
        message["tool_calls"] = _tool_call_dicts(reply, request_number)
    choices = (
        []
        if reply.empty_choices
        else [{"index": 0, "message": message, "finish_reason": _finish_reason(reply)}]
    )
    return {
        "id": f"chatcmpl-scripted-{request_number}",
        "object": "chat.completion",
        "created": CREATED,
        "model": body.get("model", "scripted"),
        "choices": choices,
        **({} if reply.no_usage else {"usage": _usage(body, reply)}),
    }


def _pieces(value: str) -> list[str]:
    return [value[i : i + STREAM_PIECE] for i in range(0, len(value), STREAM_PIECE)] or [""]


def _stream_chunks(
    body: dict[str, Any], reply: Reply, request_number: int
) -> Iterator[dict[str, Any]]:
    """The chunks OpenAI streams for ``reply``: role, content deltas, tool-call deltas, finish."""
    base = {
        "id": f"chatcmpl-scripted-{request_number}",
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": body.get("model", "scripted"),
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    if not reply.empty_choices:
        yield chunk({"role": "assistant", "content": ""})
        if reply.content:
            for piece in _pieces(reply.content):
                yield chunk({"content": piece})
        for index, call in enumerate(_tool_call_dicts(reply, request_number)):
            function = call["function"]
            yield chunk(
                {
                    "tool_calls": [
                        {
                            "index": index,
                            "id": call["id"],
                            "type": "function",
                            "function": {"name": function["name"], "arguments": ""},
                        }
                    ]
                }
            )
            for piece in _pieces(function["arguments"]):
                yield chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
        yield chunk({}, _finish_reason(reply))
    if (body.get("stream_options") or {}).get("include_usage") and not reply.no_usage:
        yield {**base, "choices": [], "usage": _usage(body, reply)}


def _error_response(status: int, message: str, headers: dict[str, str]) -> JSONResponse:
    kind = "rate_limit_error" if status == 429 else "server_error"
    return JSONResponse(
        {"error": {"message": message, "type": kind, "param": None, "code": None}},
        status_code=status,
        headers=headers,
    )


Responder = Callable[[dict[str, Any]], Reply | Awaitable[Reply]]
"""Computes the reply to a request body; may be async."""


class ScriptedOpenAIServer:
    """OpenAI-compatible chat server whose answers a test scripts. See the module docstring."""

    base_path = "/v1"
    """What ``base_url`` ends with: where the client under test is pointed."""

    def __init__(self) -> None:
        self.base_url = ""
        self.requests: list[dict[str, Any]] = []
        self._replies: deque[Reply] = deque()
        self._responder: Responder | None = None
        self._lock = threading.Lock()
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._socket: socket.socket | None = None

    # -- scripting ---------------------------------------------------------------------------

    def reply(self, *replies: Reply) -> None:
        """Queue replies; each request takes the next one, in order."""
        with self._lock:
            self._replies.extend(replies)

    def respond_with(self, fn: Responder) -> None:
        """Answer every request the queue does not cover with ``fn(request_body)``, awaited if
        it returns an awaitable (it then runs on the server's event loop)."""
        with self._lock:
            self._responder = fn

    def _next_reply(self, body: dict[str, Any]) -> tuple[int, Reply | Awaitable[Reply] | None]:
        with self._lock:
            self.requests.append(body)
            number = len(self.requests)
            if self._replies:
                return number, self._replies.popleft()
            responder = self._responder
        if responder is None:
            return number, None
        return number, responder(body)

    # -- HTTP --------------------------------------------------------------------------------

    async def _received(self, request: Request) -> tuple[dict[str, Any], int, Reply] | Response:
        """The request's body, its number and the reply to send after its delay; or the response
        that ends it here: the client gone, no reply queued, or a queued error status. Shared by
        every wire format the server speaks."""
        try:
            body = await request.json()
        except ClientDisconnect:  # the client died mid-request (a killed worker): nobody to answer
            return Response(status_code=499)
        number, next_reply = self._next_reply(body)
        reply = await next_reply if inspect.isawaitable(next_reply) else next_reply
        if reply is None:
            last = (body.get("messages") or [{}])[-1]
            return _error_response(
                500,
                f"{type(self).__name__}: no reply queued for request #{number} "
                f"(last message: {json.dumps(last)[:300]}). Queue one with reply() "
                "or set respond_with().",
                # The openai and anthropic clients obey this header: fail once, loudly.
                {"x-should-retry": "false"},
            )
        if reply.delay:
            await asyncio.sleep(reply.delay)
        if reply.status != 200:
            return _error_response(reply.status, reply.error or "error", reply.headers)
        return body, number, reply

    async def _chat_completions(self, request: Request) -> Response:
        received = await self._received(request)
        if isinstance(received, Response):
            return received
        body, number, reply = received
        if not body.get("stream"):
            return JSONResponse(_completion(body, reply, number), headers=reply.headers)

        async def events() -> AsyncIterator[str]:
            for chunk in _stream_chunks(body, reply, number):
                yield f"data: {json.dumps(chunk)}\n\n"
            yield "data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream", headers=reply.headers)

    async def _models(self, request: Request) -> Response:
        return JSONResponse(
            {
                "object": "list",
                "data": [{"id": "scripted", "object": "model", "owned_by": "turnplan-tests"}],
            }
        )

    def routes(self) -> list[Route]:
        """The endpoints served; a server speaking another provider's API replaces them."""
        return [
            Route("/v1/chat/completions", self._chat_completions, methods=["POST"]),
            Route("/v1/models", self._models, methods=["GET"]),
        ]

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        """Bind a free port on 127.0.0.1 and serve in a daemon thread until ``stop()``."""
        if self._server is not None:
            return
        app = Starlette(routes=self.routes())
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        config = uvicorn.Config(
            app, log_level="warning", access_log=False, lifespan="off", ws="none", http="h11"
        )
        server = uvicorn.Server(config)
        thread = threading.Thread(
            target=server.run,
            kwargs={"sockets": [sock]},
            name=type(self).__name__,
            daemon=True,
        )
        thread.start()
        deadline = time.monotonic() + 10
        while not server.started and thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.01)
        if not server.started:
            server.should_exit = True
            sock.close()
            raise RuntimeError(f"{type(self).__name__} did not start within 10 s")
        self._server, self._thread, self._socket = server, thread, sock
        self.base_url = f"http://127.0.0.1:{port}{self.base_path}"

    def stop(self) -> None:
        """Stop at once: slow replies still sleeping are abandoned, not awaited."""
        if self._server is None or self._thread is None:
            return
        self._server.should_exit = True
        self._server.force_exit = True
        self._thread.join(timeout=10)
        if self._socket is not None:
            self._socket.close()
        self._server, self._thread, self._socket = None, None, None

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


@pytest.fixture
def scripted_openai() -> Iterator[ScriptedOpenAIServer]:
    """A started scripted server, stopped after the test."""
    with ScriptedOpenAIServer() as server:
        yield server
