"""Rows handed over between the steps of a run (``agent.turn.rows_handoff``) stand in for a read,
but the writes made with them stay conditional: rows that missed a change can neither close a row
twice nor hide a row that exists."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from sqlalchemy import event
from sqlalchemy.engine import Engine

from agent.context import Context
from agent.errors import ToolFailure
from agent.graph import build_graph
from agent.state import InputState
from agent.turn.plan_rows import PlanLimits, TodoItemInput, TurnPlan
from bench.scenario import ActionLog, action, request_for, titles_for
from bench.wire import InstantChatModel
from storage import Database
from storage.repositories import TurnScope
from tests.http_oracle import HttpPlanOracle

SCOPE = TurnScope("conversation", "turn")


async def _plan(database: Database, *titles: str) -> TurnPlan:
    plan = TurnPlan(database, SCOPE)
    await plan.add_items([TodoItemInput(title=title) for title in titles], PlanLimits())
    return plan


async def test_a_close_with_the_rows_handed_over_reads_none_and_starts_the_next(
    database: Database,
) -> None:
    plan = await _plan(database, "one", "two")
    handed, _ = await plan.rows()
    statements: list[str] = []

    def note(*args: object) -> None:
        statements.append(str(args[2]))

    event.listen(Engine, "before_cursor_execute", note)
    try:
        change = await plan.close(handed[0].id, "done", "completed", known_rows=handed)
    finally:
        event.remove(Engine, "before_cursor_execute", note)

    assert not [sql for sql in statements if sql.lstrip().upper().startswith("SELECT")]
    assert change.closed is not None and change.closed.title == "one"
    assert [row.title for row in change.started] == ["two"]
    rows, counts = await plan.rows()
    assert [(row.title, row.status) for row in rows] == [
        ("one", "completed"),
        ("two", "in_progress"),
    ]
    assert [(row.title, row.status) for row in change.rows] == [
        (row.title, row.status) for row in rows
    ]
    assert counts.summary() == change.counts.summary()


async def test_rows_that_missed_a_close_cannot_close_that_row_again(database: Database) -> None:
    plan = await _plan(database, "one", "two")
    stale, _ = await plan.rows()
    await TurnPlan(database, SCOPE).close(stale[0].id, "done elsewhere", "completed")

    with pytest.raises(ToolFailure, match="'one' is already completed"):
        await plan.close(stale[0].id, "done again", "cancelled", known_rows=stale)

    rows, _ = await plan.rows()
    assert [(row.title, row.status, row.outcome) for row in rows] == [
        ("one", "completed", "done elsewhere"),
        ("two", "in_progress", None),
    ]


async def test_a_row_the_handed_over_rows_lack_is_still_found(database: Database) -> None:
    plan = await _plan(database, "one")
    stale, _ = await plan.rows()
    change = await TurnPlan(database, SCOPE).add_items(
        [TodoItemInput(title="added later", order=1)], PlanLimits()
    )
    (added,) = change.planned

    closed = await plan.close(added.id, "done", "completed", known_rows=stale)

    assert closed.closed is not None and closed.closed.title == "added later"
    assert {row.title: row.status for row in closed.rows} == {
        "one": "in_progress",
        "added later": "completed",
    }


async def test_items_added_with_the_rows_handed_over_read_none_and_keep_plan_order(
    database: Database,
) -> None:
    plan = await _plan(database, "one", "two")
    handed, _ = await plan.rows()
    statements: list[str] = []

    def note(*args: object) -> None:
        statements.append(str(args[2]))

    event.listen(Engine, "before_cursor_execute", note)
    try:
        change = await plan.add_items(
            [TodoItemInput(title="beside one", order=1), TodoItemInput(title="last")],
            PlanLimits(),
            known_rows=handed,
        )
    finally:
        event.remove(Engine, "before_cursor_execute", note)

    assert not [sql for sql in statements if sql.lstrip().upper().startswith("SELECT")]
    rows, counts = await plan.rows()
    assert [(row.title, row.priority, row.status) for row in rows] == [
        ("one", 0, "in_progress"),
        ("beside one", 0, "in_progress"),
        ("two", 1, "pending"),
        ("last", 2, "pending"),
    ]
    assert [row.id for row in change.rows] == [row.id for row in rows]
    assert [row.title for row in change.started] == ["beside one"]
    assert change.counts.summary() == counts.summary()


async def _selects_in_a_turn(tmp_path: Path, n: int, checkpointer: InMemorySaver | None) -> int:
    """SELECT statements of one sequential n-item turn (the benchmark's oracle drives it)."""
    titles = titles_for(n)
    database = Database(f"sqlite+aiosqlite:///{tmp_path / f'turn-{n}.db'}")
    await database.create_schema()
    model = InstantChatModel(oracle=HttpPlanOracle(titles, action))
    graph = build_graph(
        model,
        tools=[ActionLog().tool()],
        database=database,
        include_default_tools=False,
        checkpointer=checkpointer,
    )
    selects: list[str] = []

    def note(*args: object) -> None:
        if str(args[2]).lstrip().upper().startswith("SELECT"):
            selects.append(str(args[2]))

    event.listen(Engine, "before_cursor_execute", note)
    try:
        state = await graph.ainvoke(
            InputState(messages=[HumanMessage(content=request_for(titles))]),
            config={"configurable": {"thread_id": f"thread-{n}"}, "recursion_limit": 1_000},
            context=Context(max_iterations=1_000),
        )
    finally:
        event.remove(Engine, "before_cursor_execute", note)
        await database.dispose()
    assert state["turnStatus"] == "answered"
    assert [todo["status"] for todo in state["todos"]] == ["completed"] * n
    return len(selects)


@pytest.mark.parametrize("checkpointed", [False, True], ids=["no checkpointer", "checkpointer"])
async def test_a_turn_reads_its_rows_once_whatever_its_length(
    tmp_path: Path, checkpointed: bool
) -> None:
    """With a checkpointer too (as ``langgraph dev`` runs the graph), each step of a turn takes
    the rows from the step before it: a longer plan makes no further reads."""
    saver = InMemorySaver() if checkpointed else None
    assert await _selects_in_a_turn(tmp_path, 3, saver) == await _selects_in_a_turn(
        tmp_path, 9, saver
    )
