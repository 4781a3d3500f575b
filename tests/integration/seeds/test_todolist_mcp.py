"""``turnplan mcp`` as MCP clients see it: the real command in a subprocess, driven by the
official SDK's ``ClientSession`` over stdio and over streamable HTTP on 127.0.0.1."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from tests.todolist_server import COMMAND, http_server

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]

# The schemas exactly as seed 001 writes them.
SEED_SCHEMAS = {
    "todolist__get": (
        """{
  "type": "object",
  "additionalProperties": false,
  "properties": {}
}""",
        """{
  "type": "object",
  "properties": {
    "todos": {
      "type": "array",
      "items": {
        "type": "object",
        "properties": {
          "content": { "type": "string" },
          "status": { "type": "string", "enum": ["pending", "in_progress", "completed"] },
          "activeForm": { "type": "string" }
        }
      }
    },
    "summary": {
      "type": "object",
      "properties": {
        "total": { "type": "integer" },
        "pending": { "type": "integer" },
        "in_progress": { "type": "integer" },
        "completed": { "type": "integer" }
      }
    }
  }
}""",
    ),
    "todolist__set": (
        """{
  "type": "object",
  "required": ["todos"],
  "additionalProperties": false,
  "properties": {
    "todos": {
      "type": "array",
      "items": {
        "type": "object",
        "required": ["content", "status", "activeForm"],
        "additionalProperties": false,
        "properties": {
          "content": {
            "type": "string",
            "minLength": 1
          },
          "status": {
            "type": "string",
            "enum": ["pending", "in_progress", "completed"]
          },
          "activeForm": {
            "type": "string",
            "minLength": 1
          }
        }
      }
    }
  }
}""",
        """{
  "type": "object",
  "properties": {
    "summary": {
      "type": "object",
      "properties": {
        "total": { "type": "integer" },
        "pending": { "type": "integer" },
        "in_progress": { "type": "integer" },
        "completed": { "type": "integer" }
      }
    }
  }
}""",
    ),
}


def todo(content: str, status: str, active_form: str) -> dict[str, str]:
    return {"content": content, "status": status, "activeForm": active_form}


def plan(*statuses: str) -> list[dict[str, str]]:
    """The seed's three-item example, in the given statuses."""
    names = [("Run build", "Running build"), ("Fix errors", "Fixing errors")]
    names.append(("Run tests", "Running tests"))
    return [todo(c, s, a) for (c, a), s in zip(names, statuses, strict=True)]


def summary(total: int, pending: int, in_progress: int, completed: int) -> dict[str, int]:
    return {
        "total": total,
        "pending": pending,
        "in_progress": in_progress,
        "completed": completed,
    }


def payload(result: types.CallToolResult) -> Any:
    """The structured content, after checking the text content carries the same JSON."""
    [text] = result.content
    assert isinstance(text, types.TextContent)
    assert json.loads(text.text) == result.structuredContent
    return result.structuredContent


async def set_list(session: ClientSession, todos: Any) -> types.CallToolResult:
    return await session.call_tool("todolist__set", {"todos": todos})


async def get_list(session: ClientSession) -> Any:
    result = await session.call_tool("todolist__get", {})
    assert not result.isError
    return payload(result)


@asynccontextmanager
async def stdio_session() -> AsyncIterator[ClientSession]:
    server = StdioServerParameters(command=COMMAND[0], args=COMMAND[1:], cwd=REPO)
    async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


@asynccontextmanager
async def http_session(
    url: str, *, terminate_on_close: bool = True
) -> AsyncIterator[ClientSession]:
    async with (
        streamable_http_client(url, terminate_on_close=terminate_on_close) as (read, write, _),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


async def test_tools_list_gives_the_seeds_schemas_exactly() -> None:
    async with stdio_session() as session:
        tools = (await session.list_tools()).tools

    assert [tool.name for tool in tools] == ["todolist__get", "todolist__set"]
    for tool in tools:
        input_schema, output_schema = SEED_SCHEMAS[tool.name]
        assert tool.inputSchema == json.loads(input_schema)
        assert tool.outputSchema == json.loads(output_schema)
        assert tool.description


async def test_the_seeds_example_session_over_stdio() -> None:
    async with stdio_session() as session:
        assert await get_list(session) == {"todos": [], "summary": summary(0, 0, 0, 0)}
        steps = [
            (("pending", "pending", "pending"), summary(3, 3, 0, 0)),
            (("in_progress", "pending", "pending"), summary(3, 2, 1, 0)),
            (("completed", "in_progress", "pending"), summary(3, 1, 1, 1)),
            (("completed", "completed", "in_progress"), summary(3, 0, 1, 2)),
            (("completed", "completed", "completed"), summary(3, 0, 0, 3)),
        ]
        for statuses, expected in steps:
            result = await set_list(session, plan(*statuses))
            assert not result.isError
            assert payload(result) == {"summary": expected}
            # After every set, get returns exactly the list that was set.
            assert await get_list(session) == {"todos": plan(*statuses), "summary": expected}


REJECTED_SETS: list[tuple[str, dict[str, Any], str, str]] = [
    # (what, arguments, code, a part of the message)
    (
        "two in progress",
        {"todos": plan("in_progress", "in_progress", "pending")},
        "multiple_in_progress",
        "todos[0] and todos[1]",
    ),
    (
        "empty content",
        {"todos": [*plan("pending", "pending", "pending"), todo("", "pending", "Doing")]},
        "empty_content",
        "todos[3].content",
    ),
    (
        "whitespace content",
        {"todos": [todo("   ", "pending", "Doing")]},
        "empty_content",
        "todos[0].content",
    ),
    (
        "whitespace activeForm",
        {"todos": [todo("Deploy", "pending", " \t")]},
        "empty_active_form",
        "todos[0].activeForm",
    ),
    (
        "unknown status",
        {"todos": [todo("Deploy", "done", "Deploying")]},
        "invalid_status",
        'todos[0].status is "done"',
    ),
    ("missing todos", {}, "invalid_arguments", "'todos' is required"),
    ("todos not a list", {"todos": "Run build"}, "invalid_arguments", "must be an array"),
    (
        "extra top-level key",
        {"todos": [], "replace": True},
        "invalid_arguments",
        "'replace'",
    ),
    (
        "missing field",
        {"todos": [{"content": "Deploy", "status": "pending"}]},
        "invalid_arguments",
        "todos[0] is missing 'activeForm'",
    ),
    (
        "extra field",
        {"todos": [{**todo("Deploy", "pending", "Deploying"), "id": 3}]},
        "invalid_arguments",
        "todos[0] has unknown field(s) 'id'",
    ),
    (
        "content not a string",
        {
            "todos": [
                todo("Deploy", "pending", "Deploying"),
                {**todo("x", "pending", "y"), "content": 5},
            ]
        },
        "invalid_arguments",
        "todos[1].content must be a string",
    ),
    (
        "item not an object",
        {"todos": [["Deploy"]]},
        "invalid_arguments",
        "todos[0] must be an object",
    ),
]


async def test_a_rejected_set_changes_nothing_and_names_the_item_to_fix() -> None:
    kept = plan("completed", "in_progress", "pending")
    async with stdio_session() as session:
        assert not (await set_list(session, kept)).isError
        for what, arguments, code, part in REJECTED_SETS:
            result = await session.call_tool("todolist__set", arguments)

            assert result.isError, what
            error = payload(result)
            assert error == {"error": {"code": code, "message": error["error"]["message"]}}, what
            assert part in error["error"]["message"], what
            assert await get_list(session) == {"todos": kept, "summary": summary(3, 1, 1, 1)}, what


async def test_get_with_arguments_and_an_unknown_tool_get_error_envelopes() -> None:
    async with stdio_session() as session:
        with_arguments = await session.call_tool("todolist__get", {"verbose": True})
        unknown = await session.call_tool("todolist__add", {"content": "Deploy"})

    assert with_arguments.isError and unknown.isError
    assert payload(with_arguments)["error"]["code"] == "invalid_arguments"
    assert payload(unknown)["error"]["code"] == "unknown_tool"


async def test_each_stdio_process_is_its_own_session() -> None:
    async with stdio_session() as first, stdio_session() as second:
        await set_list(first, plan("in_progress", "pending", "pending"))

        assert (await get_list(second))["todos"] == []
        assert (await get_list(first))["summary"] == summary(3, 2, 1, 0)

    async with stdio_session() as later:
        assert (await get_list(later))["todos"] == []


async def test_two_http_clients_at_once_have_their_own_lists_forgotten_when_they_close() -> None:
    async with http_server() as server:
        assert server.url.startswith("http://127.0.0.1:")
        async with http_session(server.url) as first:
            await set_list(first, plan("in_progress", "pending", "pending"))
            async with http_session(server.url) as second:
                await set_list(second, [todo("Write report", "pending", "Writing report")])
                await server.wait_for_log("session opened (2 open)")

                assert (await get_list(first))["todos"] == plan("in_progress", "pending", "pending")
                assert (await get_list(second))["todos"] == [
                    todo("Write report", "pending", "Writing report")
                ]

            await server.wait_for_log("session closed (1 open)")
            assert (await get_list(first))["summary"] == summary(3, 2, 1, 0)
        await server.wait_for_log("session closed (0 open)")

        async with http_session(server.url) as later:
            assert (await get_list(later))["todos"] == []

    # Clients closing their sessions is routine: the operator's log shows no errors for it.
    assert not [line for line in server.log if "Traceback" in line or "ERROR" in line], server.log


async def test_an_http_session_left_idle_is_forgotten() -> None:
    async with http_server("--idle-timeout", "1") as server:
        # The client goes away without ending its session (no DELETE), as a crashed one would.
        async with http_session(server.url, terminate_on_close=False) as session:
            await set_list(session, plan("pending", "pending", "pending"))
            await server.wait_for_log("session opened (1 open)")

        await server.wait_for_log("session closed (0 open)")


async def test_sigterm_stops_the_http_server_with_sessions_open() -> None:
    async with http_server() as server, http_session(server.url) as session:
        await set_list(session, plan("pending", "pending", "pending"))

        assert await server.stop() == 0
        await server.wait_for_log("Todolist MCP server stopped.")
        assert not any("Traceback" in line for line in server.log), server.log


async def test_the_http_server_refuses_requests_naming_another_host() -> None:
    """A web page cannot reach the local server through DNS rebinding."""
    async with http_server() as server, httpx.AsyncClient() as client:
        response = await client.post(
            server.url,
            headers={"Host": "attacker.example", "Accept": "application/json, text/event-stream"},
            json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
        )

    assert response.status_code == 421
