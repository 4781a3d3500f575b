"""Plan approval through ``langgraph dev`` and the real ``langgraph_sdk`` client: the run pauses
with the plan as an interrupt, and ``command={"resume": ...}`` (approve, edit, reject, or a
malformed value) or the user's next message decides it."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from typing import Any

import pytest
from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient

from tests.dev_server import DevServer
from tests.http_asking import approval_aware_model

pytestmark = pytest.mark.integration

REQUEST = {"messages": [{"role": "user", "content": "add bread and milk"}]}


def titles(server: DevServer) -> list[str]:
    with closing(sqlite3.connect(server.database)) as connection:
        return sorted(t for (t,) in connection.execute("SELECT title FROM tasks"))


async def paused(client: LangGraphClient, server: DevServer) -> str:
    server.model.respond_with(approval_aware_model)
    before = titles(server) if server.database.exists() else []
    thread = await client.threads.create()
    await client.runs.wait(
        thread["thread_id"], "supervisor", input=REQUEST, context={"approve_plan": True}
    )
    state = await client.threads.get_state(thread["thread_id"])
    (pause,) = state["interrupts"]
    assert pause["value"]["type"] == "plan_approval", server.log_tail()
    assert [item["title"] for item in pause["value"]["items"]] == ["Add bread", "Add milk"]
    assert titles(server) == before  # nothing is worked before the approval
    return str(thread["thread_id"])


async def resume(client: LangGraphClient, thread: str, value: Any) -> dict[str, Any]:
    result = await client.runs.wait(thread, "supervisor", command={"resume": value})
    assert isinstance(result, dict)
    return result


async def test_approve_and_a_malformed_value_over_the_sdk(dev_server: DevServer) -> None:
    async with get_client(url=dev_server.url) as client:
        thread = await paused(client, dev_server)
        await resume(client, thread, {"action": "perhaps"})
        again = await client.threads.get_state(thread)
        (pause,) = again["interrupts"]
        assert "Resume with" in pause["value"]["error"]
        assert titles(dev_server) == []

        done = await resume(client, thread, {"action": "approve"})

    assert done["turnStatus"] == "answered"
    assert titles(dev_server) == ["bread", "milk"]


async def test_edit_then_reject_over_the_sdk(dev_server: DevServer) -> None:
    async with get_client(url=dev_server.url) as client:
        thread = await paused(client, dev_server)
        edited = await resume(client, thread, {"action": "edit", "items": [{"title": "Add eggs"}]})
        assert [row["title"] for row in edited["todos"]] == ["Add eggs"]
        assert titles(dev_server) == ["eggs"]

        rejected_thread = await paused(client, dev_server)
        rejected = await resume(
            client, rejected_thread, {"action": "reject", "reason": "not today"}
        )

    assert rejected["turnStatus"] == "answered"
    assert {row["outcome"] for row in rejected["todos"]} == {"Rejected by the user: not today"}
    assert titles(dev_server) == ["eggs"]


async def test_the_next_message_decides_the_plan_over_the_sdk(dev_server: DevServer) -> None:
    async with get_client(url=dev_server.url) as client:
        thread = await paused(client, dev_server)
        done = await client.runs.wait(
            thread, "supervisor", input={"messages": [{"role": "user", "content": "ok"}]}
        )

    assert isinstance(done, dict) and done["turnStatus"] == "answered"
    assert "/fork-" not in done["turnId"]
    assert titles(dev_server) == ["bread", "milk"]
