"""``TurnPlanMiddleware(run_fates=...)``: a new turn closes the open rows of an earlier turn whose
run the server says a newer run stopped, and its first call (only) says what stays done; a plan
left open by a run that simply ended, or an agent without ``run_fates``, is left as it is.

The server is played by a function (``run_fates``), as ``agent.run_fates.server_run_fate``
answers on a LangGraph server; runs are named by ``run_id`` in the config, as the server names
them (``tests/integration/server/test_multitask_server.py`` drives the real server)."""

from __future__ import annotations

import asyncio
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from agent.context import Context
from agent.middleware import TurnPlanMiddleware
from agent.turn.superseded import RunFate, RunFates
from storage import Database
from tests.fakes import ScriptedChatModel, act, answer_with, plan_items, record, scripted_turn
from tests.fakes import tool_call as call

THREAD = "kitchen"
STOPS_AFTER_TWO_CALLS = Context(base_iterations=2, max_iterations=2)


def server_saying(fate: RunFate, asked: list[tuple[str, str]]) -> RunFates:
    async def fates(thread_id: str, run_id: str) -> RunFate:
        asked.append((thread_id, run_id))
        return fate

    return fates


def rows(database: Database) -> list[tuple[str, str, str | None]]:
    path = database.url.split("///", 1)[1]
    with closing(sqlite3.connect(path)) as connection:
        return connection.execute(
            "SELECT title, status, outcome FROM turn_todos ORDER BY priority, createdAt"
        ).fetchall()


async def two_turns(
    database: Database, model: ScriptedChatModel, fates: RunFates | None
) -> dict[str, Any]:
    """Run 1 plans two rows, notes milk and is cut off by its budget (its rows stay open); run 2
    asks something else. Returns run 2's values."""
    middleware = TurnPlanMiddleware(database, context=STOPS_AFTER_TWO_CALLS, run_fates=fates)
    agent = create_agent(model, [record], middleware=[middleware], checkpointer=InMemorySaver())
    for run_id, text in (("run-1", "note milk and bread"), ("run-2", "hi")):
        config: Any = {"configurable": {"thread_id": THREAD, "run_id": run_id}}
        result: dict[str, Any] = await agent.ainvoke(
            {"messages": [HumanMessage(content=text)]}, config
        )
    return result


def scripted(database: Database) -> ScriptedChatModel:
    return scripted_turn(
        database,
        plan_items({"title": "Note milk"}, {"title": "Note bread"}),
        act(call("record", note="milk")),
        answer_with("Hello!"),  # run 2, if its one call is allowed
    )


@pytest.mark.parametrize(
    "fate, outcome",
    [("interrupted", "interrupted by a newer run"), ("rolled_back", "rolled back by a newer run")],
)
async def test_a_turn_whose_run_was_stopped_is_closed_and_the_next_first_call_is_told(
    database: Database, recorded_notes: list[str], fate: RunFate, outcome: str
) -> None:
    asked: list[tuple[str, str]] = []
    model = scripted(database)

    result = await two_turns(database, model, server_saying(fate, asked))

    assert asked == [(THREAD, "run-1")]
    assert rows(database) == [
        ("Note milk", "cancelled", outcome),
        ("Note bread", "cancelled", outcome),
    ]
    assert result["turnStatus"] == "answered"
    note = model.system_prompt(-1)
    assert outcome in note and "'Note milk', 'Note bread'" in note
    assert 'record: {"recorded": "milk"}' in note  # what stays done: the call's result
    assert recorded_notes == ["milk"]


async def test_a_plan_whose_run_ended_or_an_agent_without_run_fates_keeps_its_rows_open(
    database: Database, tmp_path: Path
) -> None:
    asked: list[tuple[str, str]] = []
    await two_turns(database, scripted(database), server_saying("other", asked))
    assert asked == [(THREAD, "run-1")]
    assert [status for _, status, _ in rows(database)] == ["in_progress", "pending"]

    python_only = Database(f"sqlite+aiosqlite:///{tmp_path / 'python.db'}")
    try:
        model = scripted(python_only)
        await two_turns(python_only, model, None)
        assert [status for _, status, _ in rows(python_only)] == ["in_progress", "pending"]
        assert "by a newer run" not in model.system_prompt(-1)
    finally:
        await python_only.dispose()


async def test_a_turn_resumed_by_another_run_is_closed_when_that_run_is_stopped(
    database: Database,
) -> None:
    """Run 1 plans and pauses for approval (it ends well); run 2 approves and is stopped in
    the middle of a tool; run 3 is told, and the row is closed, because run 2 recorded that it
    went on with the turn."""
    reached, release = asyncio.Event(), asyncio.Event()

    @tool
    async def slow(note: str) -> str:
        """Slow work."""
        reached.set()
        await release.wait()
        return "ok"

    asked: list[tuple[str, str]] = []

    async def fates(thread_id: str, run_id: str) -> RunFate:
        asked.append((thread_id, run_id))
        return "interrupted" if run_id == "run-2" else "other"

    model = scripted_turn(
        database,
        plan_items({"title": "Note milk"}),
        act(call("slow", note="milk")),
        answer_with("Hello!"),
    )
    middleware = TurnPlanMiddleware(database, context=Context(approve_plan=True), run_fates=fates)
    agent = create_agent(model, [slow], middleware=[middleware], checkpointer=InMemorySaver())

    def run(run_id: str) -> Any:
        return {"configurable": {"thread_id": THREAD, "run_id": run_id}}

    paused = await agent.ainvoke({"messages": [HumanMessage(content="note milk")]}, run("run-1"))
    assert paused["__interrupt__"]
    approve = Command(resume={"decisions": [{"type": "approve"}]})
    stopped = asyncio.create_task(agent.ainvoke(approve, run("run-2")))
    await asyncio.wait_for(reached.wait(), 10)
    stopped.cancel()
    await asyncio.gather(stopped, return_exceptions=True)

    await agent.ainvoke({"messages": [HumanMessage(content="hi")]}, run("run-3"))

    assert (THREAD, "run-2") in asked
    assert rows(database) == [("Note milk", "cancelled", "interrupted by a newer run")]
