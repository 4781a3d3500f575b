"""The ``turnplan_agent`` graph of ``langgraph.json`` (``create_agent`` with
``TurnPlanMiddleware`` and ``ModelCallLimitMiddleware``) over the real ``langgraph dev`` and the
``langgraph_sdk`` client: the plan waits for approval in LangChain's HITL request shape, the
approved plan drains to an answered turn, and the thread's state shows the rows as ``todos``."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from typing import Any

import pytest
from langgraph_sdk import get_client

from tests.dev_server import DevServer
from tests.http_asking import approval_aware_model

pytestmark = pytest.mark.integration


async def test_the_served_middleware_agent_asks_approval_and_drains_its_plan(
    dev_server: DevServer,
) -> None:
    dev_server.model.respond_with(approval_aware_model)
    async with get_client(url=dev_server.url) as client:
        thread = await client.threads.create()
        await client.runs.wait(
            thread["thread_id"],
            "turnplan_agent",
            input={"messages": [{"role": "user", "content": "add bread and milk"}]},
            context={"approve_plan": True},
        )
        paused = await client.threads.get_state(thread["thread_id"])
        await client.runs.wait(
            thread["thread_id"],
            "turnplan_agent",
            command={"resume": {"decisions": [{"type": "approve"}]}},
        )
        done = await client.threads.get_state(thread["thread_id"])

    (pause,) = paused["interrupts"]
    value: Any = pause["value"]
    assert [a["name"] for a in value["action_requests"]] == ["create_todo"], dev_server.log_tail()
    items = value["action_requests"][0]["args"]["items"]
    assert [item["title"] for item in items] == ["Add bread", "Add milk"]
    assert value["review_configs"][0]["allowed_decisions"] == ["approve", "edit", "reject"]

    values: Any = done["values"]
    assert values["turnStatus"] == "answered", dev_server.log_tail()
    assert [(t["content"], t["status"]) for t in values["todos"]] == [
        ("Add bread", "completed"),
        ("Add milk", "completed"),
    ]
    assert values["messages"][-1]["content"] == "Done: 2 items."
    with closing(sqlite3.connect(dev_server.database)) as connection:
        tasks = connection.execute("SELECT title FROM tasks ORDER BY title").fetchall()
    assert tasks == [("bread",), ("milk",)]
