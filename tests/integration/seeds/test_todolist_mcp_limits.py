"""The todolist MCP server over HTTP has caps on what a client can make it hold, and, with
``TURNPLAN_AUTH_TOKENS`` set, bearer tokens and sessions bound to their user (issue 41).

Driven with the official SDK's streamable-HTTP client (and raw HTTP where a client would not
send what an attacker does) against ``turnplan mcp --transport http`` in a subprocess."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from agent.todolist.mcp_server import run_tool
from agent.todolist.sessions import SessionLists
from agent.todolist.validation import MAX_ITEMS, MAX_LIST_BYTES, TodoListError
from tests.integration.seeds.test_todolist_mcp import get_list, http_session, set_list, todo
from tests.todolist_server import http_server

pytestmark = pytest.mark.integration

TOKENS = {"token-alice": "alice", "token-bob": "bob"}
JSON_RPC = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def items(count: int, content: str = "Step") -> list[dict[str, str]]:
    return [todo(f"{content} {n}", "pending", f"Doing {n}") for n in range(count)]


def error_of(result: Any) -> dict[str, str]:
    assert result.isError, result
    error: dict[str, str] = json.loads(result.content[0].text)["error"]
    return error


async def test_a_list_past_the_item_or_byte_cap_is_refused_and_the_old_list_stays() -> None:
    async with http_server() as server, http_session(server.url) as session:
        await set_list(session, items(3))

        too_many = error_of(await set_list(session, items(MAX_ITEMS + 1)))
        too_big = error_of(await set_list(session, items(10, "x" * (MAX_LIST_BYTES // 10))))

        assert too_many["code"] == too_big["code"] == "list_too_large"
        assert f"at most {MAX_ITEMS}" in too_many["message"]
        assert f"at most {MAX_LIST_BYTES}" in too_big["message"]
        assert (await get_list(session))["todos"] == items(3)
        await set_list(session, items(MAX_ITEMS))  # the cap itself fits
        assert (await get_list(session))["summary"]["total"] == MAX_ITEMS


async def test_a_request_body_past_the_cap_is_refused_before_it_is_read() -> None:
    big = {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"pad": "x" * 300_000}}
    async with http_server() as server, httpx.AsyncClient() as client:
        response = await client.post(server.url, headers=JSON_RPC, json=big)

    assert response.status_code == 413


def test_the_open_sessions_share_one_memory_budget_and_a_closed_one_frees_its_share() -> None:
    sessions = SessionLists(max_bytes=MAX_LIST_BYTES + 1_000)
    full = items(20, "y" * (MAX_LIST_BYTES // 25))
    with sessions.open_session() as first:
        run_tool(first, "todolist__set", {"todos": full})
        with sessions.open_session() as second:
            with pytest.raises(TodoListError) as refused:
                run_tool(second, "todolist__set", {"todos": full})
            assert refused.value.code == "server_full"
            assert run_tool(second, "todolist__get", {})["todos"] == []
            run_tool(first, "todolist__set", {"todos": []})  # a shorter list frees its bytes
            run_tool(second, "todolist__set", {"todos": full})
    assert sessions.bytes == 0


@asynccontextmanager
async def user_session(url: str, token: str) -> AsyncIterator[tuple[ClientSession, str]]:
    """An SDK session opened with ``token``, and its session id."""
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx.AsyncClient(headers=headers) as client,
        streamable_http_client(url, http_client=client) as (read, write, session_id),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        found = session_id()
        assert found
        yield session, found


def call_as(session_id: str, token: str | None, name: str, arguments: dict[str, Any]) -> Any:
    headers = {**JSON_RPC, "mcp-session-id": session_id}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return {
        "headers": headers,
        "json": {
            "jsonrpc": "2.0",
            "id": 7,
            "method": "tools/call",
            "params": {"name": name, "arguments": arguments},
        },
    }


async def test_with_tokens_set_requests_need_one_and_a_session_is_its_users_alone() -> None:
    env = {"TURNPLAN_AUTH_TOKENS": json.dumps(TOKENS)}
    async with http_server(env=env) as server, httpx.AsyncClient() as raw:
        opening = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        anonymous = await raw.post(server.url, headers=JSON_RPC, json=opening)
        unknown = await raw.post(
            server.url, headers={**JSON_RPC, "Authorization": "Bearer nope"}, json=opening
        )
        assert anonymous.status_code == unknown.status_code == 401

        async with user_session(server.url, "token-alice") as (alice, alice_id):
            await set_list(alice, items(2, "Alice's"))
            overwrite = call_as(alice_id, "token-bob", "todolist__set", {"todos": []})
            read = call_as(alice_id, "token-bob", "todolist__get", {})
            no_token = call_as(alice_id, None, "todolist__get", {})

            assert (await raw.post(server.url, **overwrite)).status_code == 404
            assert (await raw.post(server.url, **read)).status_code == 404
            assert (await raw.post(server.url, **no_token)).status_code == 401
            assert (await get_list(alice))["todos"] == items(2, "Alice's")
            async with user_session(server.url, "token-bob") as (bob, _):
                assert (await get_list(bob))["todos"] == []  # a list of his own
