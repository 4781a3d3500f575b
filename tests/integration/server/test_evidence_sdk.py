"""A row's evidence through ``langgraph dev`` and the real ``langgraph_sdk`` client: each row of
the thread's ``values.todos`` says which tools were called while it was in progress."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from typing import Any

import pytest
from langgraph_sdk import get_client

from tests.dev_server import DevServer
from tests.http_oracle import HttpPlanOracle

pytestmark = pytest.mark.integration


def add_task(title: str) -> tuple[str, dict[str, Any]]:
    return ("add_task", {"title": title})


async def test_each_row_in_values_todos_carries_the_calls_made_for_it(
    dev_server: DevServer,
) -> None:
    dev_server.model.respond_with(HttpPlanOracle(["Buy milk", "Call mum"], add_task))
    request = {"messages": [{"role": "user", "content": "Add 'Buy milk' and 'Call mum'"}]}
    async with get_client(url=dev_server.url) as client:
        thread = await client.threads.create()
        final = await client.runs.wait(thread["thread_id"], "supervisor", input=request)
        state = await client.threads.get_state(thread["thread_id"])

    assert isinstance(final, dict), final
    assert final["turnStatus"] == "answered", dev_server.log_tail()
    one_call = {"calls": 1, "errors": 0, "tools": ["add_task"]}
    assert [todo["evidence"] for todo in final["todos"]] == [one_call, one_call]
    assert state["values"]["todos"] == final["todos"]
    # The full list, as README's query reads it: each row's own call and its result.
    with closing(sqlite3.connect(dev_server.database)) as connection:
        found = connection.execute(
            'SELECT "todoId", "toolName", "arguments", "result" FROM todo_evidence'
            ' ORDER BY "createdAt"'
        ).fetchall()
    ids = [todo["id"] for todo in final["todos"]]
    assert [(todo_id, tool, json.loads(args)) for todo_id, tool, args, _ in found] == [
        (ids[0], "add_task", {"title": "Buy milk"}),
        (ids[1], "add_task", {"title": "Call mum"}),
    ]
    assert "Buy milk" in found[0][3] and "Call mum" in found[1][3]
