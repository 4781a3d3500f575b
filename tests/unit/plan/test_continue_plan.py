"""Continuing a plan earlier turns left open (issue 30, part 3): on request only, copied into the
new turn, the old rows closed as continued and linked both ways, nothing done twice."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from agent.context import Context
from agent.graph import build_graph
from agent.turn.continuation import continue_open_rows
from agent.turn.plan_rows import PlanLimits, TodoItemInput, TurnPlan
from storage import Database
from storage.repositories import TurnScope
from storage.repositories.tasks import TaskRepository
from storage.repositories.turns import TurnRepository
from tests.fakes import ScriptedChatModel, ai, plan_rows, plan_view, tool_call

TITLES = ["alpha", "beta", "gamma"]


def latest_request(messages: list[BaseMessage]) -> str:
    human = [m for m in messages if isinstance(m, HumanMessage) and m.name != "turnplan"]
    return str(human[-1].content) if human else ""


def tasks_model(messages: list[BaseMessage], titles: list[str] = TITLES) -> AIMessage:
    """Plans one task per title (or continues the open plan when asked to), then adds the task
    in progress and closes its row in one message; answers when nothing is in progress."""
    rows = plan_rows(plan_view(messages))
    if not rows:
        if "continue" in latest_request(messages).lower():
            return ai(tool_call("continue_open_todos"))
        return ai(tool_call("create_todo", items=[{"title": title} for title in titles]))
    current = next((row for row in rows if row.mark == ">"), None)
    if current is None:
        return AIMessage(content="All done.")
    return ai(
        tool_call("add_task", title=current.title),
        tool_call("complete_todo", todoId=current.id, outcome=f"added {current.title}"),
    )


async def start_and_run_out(database: Database) -> tuple[Any, ScriptedChatModel, dict[str, Any]]:
    """Turn 1 of thread t: three items, a budget of two calls: only 'alpha' is done."""
    model = ScriptedChatModel(responder=tasks_model)
    graph = build_graph(model, database=database, checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "t"}}
    first = await graph.ainvoke(
        {"messages": [HumanMessage(content="add alpha, beta and gamma", id="turn-1")]},
        config,
        context=Context(user_id="alice", base_iterations=2, max_iterations=2),
    )
    assert first["turnStatus"] == "budget_exhausted"
    assert [todo["status"] for todo in first["todos"]] == ["completed", "in_progress", "pending"]
    # Nothing was left open before this turn: no note, no tool.
    assert "continue_open_todos" not in model.offered_tool_names
    assert "plan item(s) open" not in model.system_prompt(0)
    return graph, model, config


async def task_titles(database: Database) -> list[str]:
    async with database.session() as session:
        return sorted(task.title for task in await TaskRepository(session, "alice").find())


def assert_continued(result: dict[str, Any]) -> None:
    """The new turn's plan is the two open items, done, each linked to its old row."""
    assert result["turnStatus"] == "answered"
    todos = result["todos"]
    assert [(todo["title"], todo["status"]) for todo in todos] == [
        ("beta", "completed"),
        ("gamma", "completed"),
    ]
    assert all(todo["continuedFrom"] for todo in todos)


async def old_rows(
    database: Database, turn_id: str, conversation: str = "t"
) -> list[dict[str, Any]]:
    rows, _ = await TurnPlan(database, TurnScope(conversation, turn_id)).rows()
    return [row.to_dict() for row in rows]


async def test_continue_plan_input_finishes_the_plan_with_nothing_done_twice(
    database: Database,
) -> None:
    graph, _, config = await start_and_run_out(database)

    # No message of its own: the turn is "continue the plan"; a larger budget finishes it.
    result = await graph.ainvoke(
        {"continuePlan": True}, config, context=Context(user_id="alice", base_iterations=10)
    )

    assert_continued(result)
    assert result["messages"][-1].content == "All done."
    turn_id = result["turnId"]
    assert turn_id != "turn-1"
    assert await task_titles(database) == ["alpha", "beta", "gamma"]  # each exactly once
    old = await old_rows(database, "turn-1")
    assert [(row["title"], row["status"]) for row in old] == [
        ("alpha", "completed"),
        ("beta", "cancelled"),
        ("gamma", "cancelled"),
    ]
    assert old[1]["outcome"] == old[2]["outcome"] == f"continued in turn {turn_id}"
    assert old[0]["continuedIn"] is None
    new_ids = [todo["id"] for todo in result["todos"]]
    assert [old[1]["continuedIn"], old[2]["continuedIn"]] == new_ids
    assert [todo["continuedFrom"] for todo in result["todos"]] == [old[1]["id"], old[2]["id"]]
    # The request to continue was this run's alone: the thread's state no longer asks.
    assert (await graph.aget_state(config)).values["continuePlan"] is False


async def test_the_tool_continues_the_plan_when_the_user_asks(database: Database) -> None:
    graph, model, config = await start_and_run_out(database)
    calls_before = model.calls

    result = await graph.ainvoke(
        {"messages": [HumanMessage(content="please continue the plan", id="turn-2")]},
        config,
        context=Context(user_id="alice", base_iterations=10),
    )

    prompt = model.system_prompt(calls_before)
    assert "left 2 plan item(s) open ('beta', 'gamma')" in prompt
    assert "continue_open_todos" in model.offered_tool_names
    assert_continued(result)
    assert await task_titles(database) == ["alpha", "beta", "gamma"]
    called = next(
        m
        for m in result["messages"]
        if isinstance(m, ToolMessage) and m.name == "continue_open_todos"
    )
    payload = json.loads(str(called.content))
    assert [item["title"] for item in payload["continued"]] == ["beta", "gamma"]
    assert payload["current"]["title"] == "beta"
    old = await old_rows(database, "turn-1")
    assert [row["outcome"] for row in old[1:]] == ["continued in turn turn-2"] * 2


async def test_nothing_to_continue_is_said_plainly(database: Database) -> None:
    model = ScriptedChatModel(script=[])  # no model call is needed to say so
    graph = build_graph(model, database=database, checkpointer=InMemorySaver())

    result = await graph.ainvoke(
        {"continuePlan": True},
        {"configurable": {"thread_id": "empty"}},
        context=Context(user_id="alice"),
    )

    assert result["turnStatus"] == "answered" and result["todos"] == []
    assert "no unfinished plan to continue" in str(result["messages"][-1].content)
    assert model.calls == 0


async def test_continuing_again_copies_nothing_twice(database: Database) -> None:
    earlier = TurnPlan(database, TurnScope("c", "t1"))
    items = [TodoItemInput(title="one", order=1), TodoItemInput(title="two", order=1)]
    await earlier.add_items(items, PlanLimits())
    scope = TurnScope("c", "t2")

    first = await continue_open_rows(database, scope)
    retried = await continue_open_rows(database, scope)  # the same turn's step run again

    assert [row.title for row in first.copies] == ["one", "two"]
    # The stage is kept: both rows start together.
    assert [row.status for row in first.change.rows] == ["in_progress", "in_progress"]
    assert retried.copies == [] and retried.closed == []
    assert [row.id for row in retried.change.rows] == [row.id for row in first.copies]
    old, _ = await earlier.rows()
    assert {row.status for row in old} == {"cancelled"}

    # A later turn continues the copies, never the rows they were copied from.
    later = await continue_open_rows(database, TurnScope("c", "t3"))
    assert [row.continuedFrom for row in later.copies] == [row.id for row in first.copies]  # type: ignore[attr-defined]
    assert [row.turnId for row in later.closed] == ["t2", "t2"]


async def test_an_existing_database_gains_the_continuations_table(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    url = f"sqlite+aiosqlite:///{path}"
    before = Database(url)
    await TurnPlan(before, TurnScope("c", "t1")).add_items([TodoItemInput(title="x")], PlanLimits())
    await before.dispose()
    with closing(sqlite3.connect(path)) as connection:  # a database made before this table
        connection.execute("DROP TABLE todo_continuations")
        connection.commit()

    after = Database(url)
    continued = await continue_open_rows(after, TurnScope("c", "t2"))
    await after.dispose()

    assert [row.title for row in continued.copies] == ["x"]
    with closing(sqlite3.connect(path)) as connection:
        links = connection.execute("SELECT fromTurnId, toTurnId FROM todo_continuations").fetchall()
    assert links == [("t1", "t2")]


async def test_a_continued_plan_keeps_the_dependencies_among_its_open_rows(
    database: Database,
) -> None:
    """find -> (book, email) -> invite with 'find' done: the copies of book and email start
    together, invite still waits for both copies, and nothing points back at the old rows."""
    await database.create_schema()
    earlier = TurnPlan(database, TurnScope("c", "t1"))
    items = [
        TodoItemInput(title="find the venue"),
        TodoItemInput(title="book the venue", blockedBy=[0]),
        TodoItemInput(title="email the guests", blockedBy=[0]),
        TodoItemInput(title="send the invitations", blockedBy=[1, 2]),
    ]
    await earlier.add_items(items, PlanLimits())
    old, _ = await earlier.rows()
    find = next(row for row in old if row.title == "find the venue")
    await earlier.close(find.id, status="completed", outcome="found it")

    continued = await continue_open_rows(database, TurnScope("c", "t2"))

    copies = {row.title: row for row in continued.copies}
    assert set(copies) == {"book the venue", "email the guests", "send the invitations"}
    rows, _ = await TurnPlan(database, TurnScope("c", "t2")).rows()
    shown = {row.title: row.to_dict() for row in rows}
    invite = shown["send the invitations"]
    assert sorted(invite["blockedBy"]) == sorted(  # type: ignore[arg-type]
        [copies["book the venue"].id, copies["email the guests"].id]
    )
    assert invite["status"] == "pending" and invite["ready"] is False
    assert shown["book the venue"]["status"] == "in_progress"
    assert shown["email the guests"]["status"] == "in_progress"
    assert shown["book the venue"]["blockedBy"] == []  # its blocker was done: dropped


async def start_compact_and_run_out(database: Database) -> tuple[Any, ScriptedChatModel]:
    """Turn 1 of thread c under the compact profile, whose harness plans and acts without the
    model here: three tasks, a budget of three steps (plan, add 'alpha', close it)."""
    model = ScriptedChatModel(script=[])  # any model call fails the turn
    graph = build_graph(model, database=database, checkpointer=InMemorySaver())
    first = await graph.ainvoke(
        {"messages": [HumanMessage("add 'alpha', 'beta' and 'gamma' to my tasks", id="c-1")]},
        {"configurable": {"thread_id": "c"}},
        context=Context(
            user_id="alice", prompt_profile="compact", base_iterations=3, max_iterations=3
        ),
    )
    assert first["turnStatus"] == "budget_exhausted"
    assert [todo["status"] for todo in first["todos"]] == ["completed", "in_progress", "pending"]
    return graph, model


@pytest.mark.parametrize(
    ("request_text", "planning"),
    [("Please continue", "auto"), ("finish the rest, thanks", "auto"), ("go on", "always")],
)
async def test_the_compact_profile_continues_the_plan_when_the_user_asks(
    database: Database, request_text: str, planning: Any
) -> None:
    graph, model = await start_compact_and_run_out(database)

    result = await graph.ainvoke(
        {"messages": [HumanMessage(request_text, id="c-2")]},
        {"configurable": {"thread_id": "c"}},
        context=Context(user_id="alice", prompt_profile="compact", planning=planning),
    )

    assert_continued(result)
    assert await task_titles(database) == ["alpha", "beta", "gamma"]  # each exactly once
    old = await old_rows(database, "c-1", conversation="c")
    assert [row["outcome"] for row in old[1:]] == ["continued in turn c-2"] * 2
    assert model.calls == 0  # the harness read the request: no model was asked


async def test_the_compact_profile_continues_and_adds_what_else_the_request_asks(
    database: Database,
) -> None:
    graph, model = await start_compact_and_run_out(database)

    result = await graph.ainvoke(
        {"messages": [HumanMessage("go on with the plan, then add 'delta' to my tasks", id="c-2")]},
        {"configurable": {"thread_id": "c"}},
        context=Context(user_id="alice", prompt_profile="compact"),
    )

    assert result["turnStatus"] == "answered"
    assert [(todo["title"], todo["status"]) for todo in result["todos"]] == [
        ("beta", "completed"),
        ("gamma", "completed"),
        ("delta", "completed"),
    ]
    assert [bool(todo["continuedFrom"]) for todo in result["todos"]] == [True, True, False]
    assert await task_titles(database) == ["alpha", "beta", "delta", "gamma"]
    assert model.calls == 0


async def test_a_compact_request_to_continue_with_nothing_open_does_nothing(
    database: Database,
) -> None:
    model = ScriptedChatModel(script=[])
    graph = build_graph(model, database=database, checkpointer=InMemorySaver())

    result = await graph.ainvoke(
        {"messages": [HumanMessage("please continue", id="e-1")]},
        {"configurable": {"thread_id": "e"}},
        context=Context(user_id="alice", prompt_profile="compact"),
    )

    assert result["todos"] == [] and await task_titles(database) == []
    assert "continue" in str(result["messages"][-1].content).lower()
    assert model.calls == 0


async def test_continuing_with_planning_off_is_refused_and_copies_nothing(
    database: Database,
) -> None:
    graph, model, config = await start_and_run_out(database)
    calls_before = model.calls

    result = await graph.ainvoke(
        {"continuePlan": True}, config, context=Context(user_id="alice", planning="off")
    )

    # With planning off no step may close a row: the copies would stay open for good.
    assert result["turnStatus"] == "failed"
    assert 'planning "off"' in str(result["messages"][-1].content)
    assert result["todos"] == [] and model.calls == calls_before
    old = await old_rows(database, "turn-1")
    assert [row["status"] for row in old] == ["completed", "in_progress", "pending"]
    assert await task_titles(database) == ["alpha"]
    # Nothing was lost: the same request with planning on continues the plan.
    again = await graph.ainvoke(
        {"continuePlan": True}, config, context=Context(user_id="alice", base_iterations=10)
    )
    assert_continued(again)


async def test_a_continuation_copies_only_the_open_rows_of_its_own_branch_of_the_thread(
    database: Database,
) -> None:
    """Branch A's turn left beta and gamma open; branch B, forked from the thread's start as
    Studio does, asked for other things and left epsilon open. Continuing on B copies epsilon
    only: beta and gamma are work B's user never asked for."""
    graph, model, config = await start_and_run_out(database)
    model.responder = lambda messages: tasks_model(messages, ["delta", "epsilon"])
    history = [snapshot async for snapshot in graph.aget_state_history(config)]
    start = history[-1].config  # the thread before its first turn
    branch = await graph.ainvoke(
        {"messages": [HumanMessage(content="add delta and epsilon", id="b-1")]},
        start,
        context=Context(user_id="alice", base_iterations=2, max_iterations=2),
    )
    assert branch["turnStatus"] == "budget_exhausted"  # delta done, epsilon left open

    # The thread's newest checkpoint is branch B's: the next run goes on from it.
    result = await graph.ainvoke(
        {"continuePlan": True}, config, context=Context(user_id="alice", base_iterations=10)
    )

    assert result["turnStatus"] == "answered"
    assert [(todo["title"], todo["status"]) for todo in result["todos"]] == [
        ("epsilon", "completed")
    ]
    assert await task_titles(database) == ["alpha", "delta", "epsilon"]
    # Branch A's rows are as A left them, still there to continue on A.
    old = await old_rows(database, "turn-1")
    assert [row["status"] for row in old] == ["completed", "in_progress", "pending"]


async def test_a_fork_inside_a_turn_replaces_that_turn_on_its_branch(database: Database) -> None:
    """t1 -> t2, and f2, a fork of t2 made inside it (its rows are copies of t2's), -> t3 on
    the fork's branch: continuing in t3 copies t1's and f2's open rows, never t2's as well."""
    await database.create_schema()
    for turn, title in (("t1", "one"), ("t2", "two"), ("f2", "two")):
        await TurnPlan(database, TurnScope("c", turn)).add_items(
            [TodoItemInput(title=title)], PlanLimits()
        )
    async with database.session() as session:
        turns = TurnRepository(session)
        await turns.record_branch(TurnScope("c", "t1"), None)
        await turns.record_branch(TurnScope("c", "t2"), "t1")
        await turns.record_branch(TurnScope("c", "f2"), "t1")  # what t2 followed
        await turns.record_branch(TurnScope("c", "t3"), "f2")

    continued = await continue_open_rows(database, TurnScope("c", "t3"))

    assert [(row.turnId, row.title) for row in continued.closed] == [("t1", "one"), ("f2", "two")]
    rows, _ = await TurnPlan(database, TurnScope("c", "t2")).rows()
    assert [row.status for row in rows] == ["in_progress"]  # t2's branch keeps its row
