"""What LangGraph Studio does mid-turn, through the real ``langgraph_sdk`` client against
``langgraph dev`` started as README says: pause before a node, edit the state as a node and
continue, fork from an older checkpoint, and read the updates stream."""

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

TITLES = ["Buy groceries", "Do laundry", "Call mum"]
REQUEST = {"messages": [{"role": "user", "content": "Three things for Saturday"}]}


def add_task(title: str) -> tuple[str, dict[str, Any]]:
    return ("add_task", {"title": title})


def rows_by_turn(server: DevServer) -> dict[str, list[tuple[str, str]]]:
    with closing(sqlite3.connect(server.database)) as connection:
        found = connection.execute(
            "SELECT turnId, title, status FROM turn_todos ORDER BY turnId, priority"
        ).fetchall()
    rows: dict[str, list[tuple[str, str]]] = {}
    for turn_id, title, status in found:
        rows.setdefault(turn_id, []).append((title, status))
    return rows


def tasks(server: DevServer) -> list[str]:
    with closing(sqlite3.connect(server.database)) as connection:
        return [t for (t,) in connection.execute("SELECT title FROM tasks ORDER BY title")]


async def test_an_edit_made_as_each_node_continues_the_paused_turn(dev_server: DevServer) -> None:
    async with get_client(url=dev_server.url) as client:
        dev_server.model.respond_with(HttpPlanOracle(TITLES, add_task))
        for as_node in ("drain", "plan", "execute"):
            thread = await client.threads.create()
            await client.runs.wait(
                thread["thread_id"], "supervisor", input=REQUEST, interrupt_before=["execute"]
            )
            paused = await client.threads.get_state(thread["thread_id"])
            assert paused["next"] == ["execute"], dev_server.log_tail()

            await client.threads.update_state(
                thread["thread_id"], {"remindersInARow": 0}, as_node=as_node
            )
            edited = await client.threads.get_state(thread["thread_id"])
            assert edited["next"], f"an edit as {as_node} left the turn stuck"

            final = await client.runs.wait(thread["thread_id"], "supervisor", input=None)
            assert isinstance(final, dict), final
            assert final["turnStatus"] == "answered", (as_node, final, dev_server.log_tail())
            assert [todo["status"] for todo in final["todos"]] == ["completed"] * 3


async def test_a_fork_from_a_mid_turn_checkpoint_redoes_the_work_as_its_own_turn(
    dev_server: DevServer,
) -> None:
    async with get_client(url=dev_server.url) as client:
        dev_server.model.respond_with(HttpPlanOracle(TITLES, add_task))
        thread = await client.threads.create()
        original = await client.runs.wait(thread["thread_id"], "supervisor", input=REQUEST)
        assert isinstance(original, dict) and original["turnStatus"] == "answered"
        original_rows = rows_by_turn(dev_server)[original["turnId"]]
        requests_before = len(dev_server.model.requests)

        history = await client.threads.get_history(thread["thread_id"], limit=100)
        before_execute = [state for state in history if state["next"] == ["execute"]]
        mid_turn = before_execute[-2]  # newest first: one item done, the second in progress
        assert [todo["status"] for todo in mid_turn["values"]["todos"]] == [
            "completed",
            "in_progress",
            "pending",
        ]

        forked = await client.runs.wait(
            thread["thread_id"],
            "supervisor",
            input=None,
            checkpoint_id=mid_turn["checkpoint"]["checkpoint_id"],
        )

        assert isinstance(forked, dict), forked
        assert forked["turnStatus"] == "answered", dev_server.log_tail()
        assert forked["turnId"].startswith(f"{original['turnId']}/fork-")
        rows = rows_by_turn(dev_server)
        assert rows[original["turnId"]] == original_rows
        assert rows[forked["turnId"]] == [(title, "completed") for title in TITLES]
        assert len(dev_server.model.requests) - requests_before >= 3, "the fork did no work"
        # The fork redid what the checkpoint had left open: "Call mum" was added a second time.
        assert tasks(dev_server).count("Call mum") == 2


async def test_the_updates_stream_has_no_internal_markers(dev_server: DevServer) -> None:
    async with get_client(url=dev_server.url) as client:
        dev_server.model.respond_with(HttpPlanOracle(TITLES, add_task))
        thread = await client.threads.create()
        updates = [
            part.data
            async for part in client.runs.stream(
                thread["thread_id"], "supervisor", input=REQUEST, stream_mode="updates"
            )
            if part.event == "updates"
        ]
        assert updates, dev_server.log_tail()
        assert "__reset__" not in json.dumps(updates)
        plan = next(update["plan"] for update in updates if "plan" in update)
        assert plan["modifiedTasks"] == []
