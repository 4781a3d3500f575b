"""A plan with ``blockedBy`` over ``langgraph dev`` and the real langgraph-sdk client: the rows'
dependencies reach ``values.todos``, and the diamond A -> (B, C) -> D runs in layers."""

from __future__ import annotations

from typing import Any

import pytest
from langgraph_sdk import get_client

from bench.systems.turnplan_stages import plan_in_request
from tests.dev_server import DevServer
from tests.scripted_openai import Reply, text, tool_calls

pytestmark = pytest.mark.integration

DIAMOND = [
    {"title": "find the venue"},
    {"title": "book the venue", "blockedBy": [0]},
    {"title": "email the guests", "blockedBy": [0]},
    {"title": "send the invitations", "blockedBy": [1, 2]},
]


class LayerOracle:
    """Plan the diamond; close every row in progress; answer. Notes what was in progress."""

    def __init__(self) -> None:
        self.in_progress: list[list[str]] = []

    def __call__(self, body: dict[str, Any]) -> Reply:
        rows = plan_in_request(body)
        if not rows:
            return tool_calls(("create_todo", {"items": DIAMOND}))
        working = [row for row in rows if row.mark == ">"]
        self.in_progress.append([row.title for row in working])
        if not working:
            return text("The party is organised.")
        return tool_calls(
            *(("complete_todo", {"todoId": row.id, "outcome": "done"}) for row in working)
        )


async def test_blocked_by_reaches_values_todos_and_the_diamond_runs_in_layers(
    dev_server: DevServer,
) -> None:
    oracle = LayerOracle()
    dev_server.model.respond_with(oracle)
    async with get_client(url=dev_server.url) as client:
        thread = await client.threads.create()
        async for part in client.runs.stream(
            thread["thread_id"],
            "supervisor",
            input={"messages": [{"role": "user", "content": "Organise the party."}]},
            context={"user_id": "alice"},
            stream_mode=["values"],
        ):
            assert part.event != "error", f"{part.data}\n{dev_server.log_tail()}"
        values = (await client.threads.get_state(thread["thread_id"]))["values"]

    assert values["turnStatus"] == "answered"
    assert oracle.in_progress[:3] == [
        ["find the venue"],
        ["book the venue", "email the guests"],
        ["send the invitations"],
    ]
    todos = {todo["title"]: todo for todo in values["todos"]}
    assert todos["send the invitations"]["blockedBy"] == [
        todos["book the venue"]["id"],
        todos["email the guests"]["id"],
    ]
    assert todos["find the venue"]["blockedBy"] == []
    assert all(todo["ready"] for todo in todos.values())
