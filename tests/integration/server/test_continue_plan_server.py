"""Continuing an unfinished plan through ``langgraph dev`` and the real ``langgraph_sdk``: a
turn that ran out of calls is finished by a run whose input is only ``{"continuePlan": true}``,
with a larger budget, and no task is added twice."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from typing import Any

import pytest
from langgraph_sdk import get_client

from tests.dev_server import DevServer
from tests.fakes import plan_rows
from tests.http_oracle import plan_view_of
from tests.scripted_openai import Reply, text, tool_calls

pytestmark = pytest.mark.integration


def one_item_per_call(body: dict[str, Any]) -> Reply:
    """Plans two additions; then adds the task in progress and closes its row in one message."""
    rows = plan_rows(plan_view_of(body))
    if not rows:
        return tool_calls(("create_todo", {"items": [{"title": "bread"}, {"title": "milk"}]}))
    current = next((row for row in rows if row.mark == ">"), None)
    if current is None:
        return text("Done.")
    return tool_calls(
        ("add_task", {"title": current.title}),
        ("complete_todo", {"todoId": current.id, "outcome": f"added {current.title}"}),
    )


def titles(server: DevServer) -> list[str]:
    with closing(sqlite3.connect(server.database)) as connection:
        return sorted(t for (t,) in connection.execute("SELECT title FROM tasks"))


def assert_milk_continued(dev_server: DevServer, first: Any, second: Any) -> dict[str, Any]:
    """The second turn answered with milk, continued from the first turn's open row, and added
    it once (bread never again); returns that old row."""
    assert isinstance(second, dict)
    assert second["turnStatus"] == "answered", dev_server.log_tail()
    assert titles(dev_server) == ["bread", "milk"]
    (milk,) = second["todos"]
    assert (milk["title"], milk["status"]) == ("milk", "completed")
    old: dict[str, Any] = next(todo for todo in first["todos"] if todo["title"] == "milk")
    assert milk["continuedFrom"] == old["id"]
    return old


async def first_turn_runs_out(
    client: Any, dev_server: DevServer, request: str, context: dict[str, Any]
) -> tuple[str, dict[str, Any]]:
    """A new thread whose first turn, asked ``request``, ends ``budget_exhausted``."""
    thread = (await client.threads.create())["thread_id"]
    first = await client.runs.wait(
        thread,
        "supervisor",
        input={"messages": [{"role": "user", "content": request}]},
        context=context,
    )
    assert isinstance(first, dict)
    assert first["turnStatus"] == "budget_exhausted", dev_server.log_tail()
    return thread, first


async def test_a_budget_exhausted_turn_is_continued_over_the_sdk(dev_server: DevServer) -> None:
    dev_server.model.respond_with(one_item_per_call)
    async with get_client(url=dev_server.url) as client:
        thread, first = await first_turn_runs_out(
            client, dev_server, "add bread and milk", {"base_iterations": 2, "max_iterations": 2}
        )
        assert titles(dev_server) == ["bread"]

        second = await client.runs.wait(
            thread, "supervisor", input={"continuePlan": True}, context={"base_iterations": 10}
        )
        state = await client.threads.get_state(thread)

    old = assert_milk_continued(dev_server, first, second)
    values: Any = state["values"]
    assert values["todos"][0]["continuedFrom"] == old["id"]
    assert values["continuePlan"] is False
    with closing(sqlite3.connect(dev_server.database)) as connection:
        (outcome,) = connection.execute(
            "SELECT outcome FROM turn_todos WHERE id = ?", (old["id"],)
        ).fetchone()
    assert outcome == f"continued in turn {second['turnId']}"


async def test_the_compact_profile_continues_when_the_user_asks_over_the_sdk(
    dev_server: DevServer,
) -> None:
    """The embedded models' profile: "please go on" in the conversation continues the plan, the
    harness reading the request, so the model server is never asked (no reply is queued)."""
    compact = {"prompt_profile": "compact"}
    async with get_client(url=dev_server.url) as client:
        thread, first = await first_turn_runs_out(
            client,
            dev_server,
            "add 'bread' and 'milk' to my tasks",
            {**compact, "base_iterations": 3, "max_iterations": 3},
        )
        assert titles(dev_server) == ["bread"]

        second = await client.runs.wait(
            thread,
            "supervisor",
            input={"messages": [{"role": "user", "content": "Please go on"}]},
            context=compact,
        )

    assert_milk_continued(dev_server, first, second)
    assert dev_server.model.requests == []


def two_items_of_the_request(body: dict[str, Any]) -> Reply:
    """``one_item_per_call`` for any "add X and Y" request: plans X and Y."""
    rows = plan_rows(plan_view_of(body))
    if rows:
        return one_item_per_call(body)
    asked = [m for m in body["messages"] if m.get("role") == "user"][-1]["content"]
    first, second = str(asked).removeprefix("add ").split(" and ")
    return tool_calls(("create_todo", {"items": [{"title": first}, {"title": second}]}))


async def test_a_continuation_on_a_forked_thread_stays_on_its_branch_over_the_sdk(
    dev_server: DevServer,
) -> None:
    """As Studio forks a thread: a run from the checkpoint before the first turn asks for other
    things. Continuing on that branch copies its own open row, not the first branch's."""
    dev_server.model.respond_with(two_items_of_the_request)
    budget = {"base_iterations": 2, "max_iterations": 2}
    async with get_client(url=dev_server.url) as client:
        thread, _ = await first_turn_runs_out(client, dev_server, "add bread and milk", budget)
        history = await client.threads.get_history(thread, limit=100)
        start = history[-1]["checkpoint"]["checkpoint_id"]  # before the first turn
        branch = await client.runs.wait(
            thread,
            "supervisor",
            input={"messages": [{"role": "user", "content": "add tea and jam"}]},
            context=budget,
            checkpoint_id=start,
        )
        continued = await client.runs.wait(
            thread, "supervisor", input={"continuePlan": True}, context={"base_iterations": 10}
        )

    assert isinstance(branch, dict) and isinstance(continued, dict)
    assert branch["turnStatus"] == "budget_exhausted"
    assert continued["turnStatus"] == "answered", dev_server.log_tail()
    assert [todo["title"] for todo in continued["todos"]] == ["jam"]
    assert titles(dev_server) == ["bread", "jam", "tea"]  # milk is the other branch's
