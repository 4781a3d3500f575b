"""A scripted Anthropic Messages-API server on 127.0.0.1, for wire-level tests of a provider
that is not OpenAI.

Tests drive the real ``ChatAnthropic`` (langchain-anthropic, and so the real ``anthropic`` client
with its retries, timeouts and streaming parser) against replies they script, pointed here by
``ANTHROPIC_BASE_URL`` (or ``base_url``). It is ``tests.scripted_openai``'s server speaking
``POST /v1/messages`` instead: the same ``Reply`` values (``text``, ``tool_calls``,
``server_error``, ``rate_limited``, ``slow``), the same queue and responders (an oracle reading
the request body), the same loud 500 for an unscripted request, the same deterministic usage.
So an oracle written for one provider's wire runs on the other's: ``tests.fakes.plan_view``
reads an Anthropic body's ``messages`` as it reads an OpenAI one's.

What it speaks: a message with ``text`` and ``tool_use`` content blocks (``stop_reason``
``end_turn`` or ``tool_use``), Anthropic's error body (``{"type": "error", "error": {...}}``),
and, when the request asks to stream, the server-sent events ``message_start``,
``content_block_start`` / ``_delta`` (``text_delta``, ``input_json_delta``) / ``_stop``,
``message_delta`` and ``message_stop``. Requests are kept as sent (``requests``: system prompt,
messages, tools and ``tool_choice`` in Anthropic's shapes) with their headers (``headers``: the
key arrives as ``authorization: Bearer ...`` from ``anthropic`` 2, as ``x-api-key`` from older
clients).

This module is also a pytest plugin: ``pytest_plugins = ["tests.scripted_anthropic"]`` provides
the ``scripted_anthropic`` fixture.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tests.scripted_openai import STREAM_PIECE, Reply, ScriptedOpenAIServer, _tokens

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    429: "rate_limit_error",
    529: "overloaded_error",
}
"""Anthropic's error ``type`` by status; any other status is an ``api_error``."""


def _usage(body: dict[str, Any], reply: Reply) -> dict[str, int]:
    prompt = {
        "system": body.get("system", ""),
        "messages": body.get("messages", []),
        "tools": body.get("tools", []),
    }
    completion = {"content": reply.content or "", "tool_calls": list(reply.tool_calls)}
    return {"input_tokens": _tokens(prompt), "output_tokens": _tokens(completion)}


def _content_blocks(reply: Reply, request_number: int) -> list[dict[str, Any]]:
    """The reply's text (if any) and one ``tool_use`` block per call, inputs parsed (Anthropic
    sends an object; a call whose arguments do not parse is refused when scripted)."""
    blocks: list[dict[str, Any]] = []
    if reply.content:
        blocks.append({"type": "text", "text": reply.content})
    for index, (name, arguments) in enumerate(reply.tool_calls):
        blocks.append(
            {
                "type": "tool_use",
                "id": f"toolu_{request_number}_{index}",
                "name": name,
                "input": json.loads(arguments),
            }
        )
    return blocks


def _stop_reason(reply: Reply) -> str:
    return "tool_use" if reply.tool_calls else "end_turn"


def _message(body: dict[str, Any], reply: Reply, request_number: int) -> dict[str, Any]:
    return {
        "id": f"msg_scripted_{request_number}",
        "type": "message",
        "role": "assistant",
        "model": body.get("model", "scripted"),
        "content": _content_blocks(reply, request_number),
        "stop_reason": _stop_reason(reply),
        "stop_sequence": None,
        "usage": _usage(body, reply),
    }


def _pieces(value: str) -> list[str]:
    return [value[i : i + STREAM_PIECE] for i in range(0, len(value), STREAM_PIECE)] or [""]


def _stream_events(
    body: dict[str, Any], reply: Reply, request_number: int
) -> Iterator[tuple[str, dict[str, Any]]]:
    """(event name, data) as Anthropic streams ``reply``: text and tool input in pieces."""
    usage = _usage(body, reply)
    start = _message(body, reply, request_number)
    start.update(
        content=[],
        stop_reason=None,
        usage={"input_tokens": usage["input_tokens"], "output_tokens": 1},
    )
    yield "message_start", {"type": "message_start", "message": start}
    for index, block in enumerate(_content_blocks(reply, request_number)):
        if block["type"] == "text":
            opening: dict[str, Any] = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": piece} for piece in _pieces(block["text"])]
        else:
            opening = {**block, "input": {}}
            deltas = [
                {"type": "input_json_delta", "partial_json": piece}
                for piece in _pieces(json.dumps(block["input"]))
            ]
        yield (
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": opening},
        )
        for delta in deltas:
            yield (
                "content_block_delta",
                {"type": "content_block_delta", "index": index, "delta": delta},
            )
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
    yield (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": _stop_reason(reply), "stop_sequence": None},
            "usage": {"output_tokens": usage["output_tokens"]},
        },
    )
    yield "message_stop", {"type": "message_stop"}


def _error_response(status: int, message: str, headers: dict[str, str]) -> JSONResponse:
    kind = ERROR_TYPES.get(status, "api_error")
    return JSONResponse(
        {"type": "error", "error": {"type": kind, "message": message}},
        status_code=status,
        headers=headers,
    )


class ScriptedAnthropicServer(ScriptedOpenAIServer):
    """Anthropic Messages-API server whose answers a test scripts. See the module docstring."""

    base_path = ""
    """The ``anthropic`` client adds ``/v1/messages`` to its base URL itself."""

    def __init__(self) -> None:
        super().__init__()
        self.headers: list[dict[str, str]] = []
        """Each request's HTTP headers, in order (the key, ``anthropic-version``)."""

    def routes(self) -> list[Route]:
        return [Route("/v1/messages", self._messages, methods=["POST"])]

    async def _messages(self, request: Request) -> Response:
        self.headers.append(dict(request.headers))
        received = await self._received(request)
        if isinstance(received, Response):
            return received
        body, number, reply = received
        if not body.get("stream"):
            return JSONResponse(_message(body, reply, number), headers=reply.headers)

        async def events() -> AsyncIterator[str]:
            for event, data in _stream_events(body, reply, number):
                yield f"event: {event}\ndata: {json.dumps(data)}\n\n"

        return StreamingResponse(events(), media_type="text/event-stream", headers=reply.headers)


@pytest.fixture
def scripted_anthropic() -> Iterator[ScriptedAnthropicServer]:
    """A started scripted Anthropic server, stopped after the test."""
    with ScriptedAnthropicServer() as server:
        yield server
