"""The two ``todolist__*`` tools on the MCP SDK's low-level server.

The low-level ``Server`` rather than ``FastMCP``: FastMCP derives schemas from type hints, and
those would differ from the seed's (titles, ``required`` lists); here ``tools/list`` returns the
seed's schemas as written, and every call result is built by hand so errors carry the seed's
envelope.

The SDK enters a server's ``lifespan`` once per ``Server.run``, that is once per session: the
single session of a stdio process, and each streamable-HTTP session
(``StreamableHTTPSessionManager`` runs the server per session and ends that run on DELETE, idle
timeout or shutdown). So the lifespan is where a session's list is opened and forgotten, and
handlers find it in ``request_context.lifespan_context``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from importlib import metadata
from typing import Any

from mcp import types
from mcp.server.lowlevel import Server

from agent.todolist.schemas import (
    GET_DESCRIPTION,
    GET_INPUT_SCHEMA,
    GET_OUTPUT_SCHEMA,
    GET_TOOL,
    INSTRUCTIONS,
    SET_DESCRIPTION,
    SET_INPUT_SCHEMA,
    SET_OUTPUT_SCHEMA,
    SET_TOOL,
)
from agent.todolist.sessions import SessionLists, TodoList
from agent.todolist.validation import (
    ErrorCode,
    TodoListError,
    parse_get_arguments,
    parse_set_arguments,
)

SERVER_NAME = "todolist"

TodoListServer = Server[TodoList, Any]

TOOLS: list[types.Tool] = [
    types.Tool(
        name=GET_TOOL,
        description=GET_DESCRIPTION,
        inputSchema=GET_INPUT_SCHEMA,
        outputSchema=GET_OUTPUT_SCHEMA,
        annotations=types.ToolAnnotations(readOnlyHint=True, openWorldHint=False),
    ),
    types.Tool(
        name=SET_TOOL,
        description=SET_DESCRIPTION,
        inputSchema=SET_INPUT_SCHEMA,
        outputSchema=SET_OUTPUT_SCHEMA,
        annotations=types.ToolAnnotations(
            readOnlyHint=False, destructiveHint=True, idempotentHint=True, openWorldHint=False
        ),
    ),
]


def build_server(sessions: SessionLists) -> TodoListServer:
    """A server whose every session gets its own list from ``sessions``."""

    @asynccontextmanager
    async def session_list(_: TodoListServer) -> AsyncIterator[TodoList]:
        with sessions.open_session() as todo_list:
            yield todo_list

    server: TodoListServer = Server(
        SERVER_NAME, version=_version(), instructions=INSTRUCTIONS, lifespan=session_list
    )

    async def list_tools() -> list[types.Tool]:
        return TOOLS

    async def call_tool(name: str, arguments: dict[str, Any] | None) -> types.CallToolResult:
        todo_list = server.request_context.lifespan_context
        try:
            return _success(run_tool(todo_list, name, arguments))
        except TodoListError as error:
            return _failure(error)

    server.list_tools()(list_tools)  # type: ignore[no-untyped-call]  # the SDK leaves it untyped
    # The SDK's schema check is off: validation.py reports every problem with the seed's codes.
    server.call_tool(validate_input=False)(call_tool)
    return server


def run_tool(todo_list: TodoList, name: str, arguments: Mapping[str, Any] | None) -> dict[str, Any]:
    """One tool call on one session's list: its structured result, or ``TodoListError``."""
    if name == GET_TOOL:
        parse_get_arguments(arguments)
        return dict(todo_list.state())
    if name == SET_TOOL:
        summary = todo_list.replace(parse_set_arguments(arguments))
        return {"summary": summary}
    raise TodoListError.single(
        ErrorCode.UNKNOWN_TOOL, f"There is no tool {name!r}; use {GET_TOOL} or {SET_TOOL}"
    )


def _success(payload: dict[str, Any]) -> types.CallToolResult:
    """Structured content for clients that read it, the same JSON as text for those that don't."""
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=_dumps(payload))],
        structuredContent=payload,
    )


def _failure(error: TodoListError) -> types.CallToolResult:
    envelope = error.envelope()
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=_dumps(envelope))],
        structuredContent=envelope,
        isError=True,
    )


def _dumps(payload: dict[str, Any]) -> str:
    return json.dumps(payload, ensure_ascii=False)


def _version() -> str | None:
    """turnplan's version for the client's ``serverInfo`` (None lets the SDK fill in its own)."""
    try:
        return metadata.version("turnplan")
    except metadata.PackageNotFoundError:
        return None
