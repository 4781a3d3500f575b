"""A run that sends its turn's request again is that turn resumed, never a second turn: what a
LangGraph Server does when it retries a run whose worker died (it starts the run over from its
input on the thread's newest checkpoint), and what a Python caller does after a crash."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from contextlib import closing
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from agent.context import Context
from agent.graph import build_graph
from storage import Database
from tests.fakes import PlanOracle, ScriptedChatModel, tool_call

DONE: list[str] = []
TITLES = ["first", "second", "third"]
CRASH_ON: set[str] = set()


STALLED: list[asyncio.Event] = []


@tool
async def record(note: str) -> str:
    """Record a note (the domain action of these tests)."""
    if note in CRASH_ON:
        CRASH_ON.discard(note)
        STALLED[-1].set()
        await asyncio.sleep(3600)  # the process dies here
    DONE.append(note)
    return json.dumps({"recorded": note})


@pytest.fixture(autouse=True)
def _clear_done() -> None:
    DONE.clear()
    CRASH_ON.clear()


async def crash_mid_turn(graph: Any, turn_input: dict[str, Any], config: RunnableConfig) -> None:
    """Run the turn until its process dies in the second item's action: the run is cancelled
    there, and leaves the thread as a killed process would (no error recorded, the step's
    other results gone)."""
    CRASH_ON.add("second")
    STALLED.append(asyncio.Event())
    run = asyncio.create_task(graph.ainvoke(turn_input, config, context=Context()))
    await asyncio.wait_for(STALLED[-1].wait(), timeout=30)
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    assert (await graph.aget_state(config)).values["turnStatus"] == "running"


def graph_of(database: Database) -> tuple[Any, ScriptedChatModel]:
    model = ScriptedChatModel(
        responder=PlanOracle(TITLES, lambda title: tool_call("record", note=title))
    )
    graph = build_graph(
        model,
        tools=[record],
        database=database,
        include_default_tools=False,
        checkpointer=InMemorySaver(),
    )
    return graph, model


def turns(database: Database) -> list[str]:
    path = database.url.split("///", 1)[1]
    with closing(sqlite3.connect(path)) as connection:
        return [row[0] for row in connection.execute("SELECT turnId FROM turns ORDER BY turnId")]


def request(message_id: str | None = "m1") -> dict[str, Any]:
    return {"messages": [HumanMessage(content="Do three things", id=message_id)]}


def server_run(thread: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread, "run_id": "run-1"}}


async def test_the_same_request_again_on_a_running_turn_finishes_it_once(
    database: Database,
) -> None:
    graph, _ = graph_of(database)
    config: RunnableConfig = {"configurable": {"thread_id": "again"}}
    await crash_mid_turn(graph, request(), config)

    result = await graph.ainvoke(request(), config, context=Context())

    assert result["turnStatus"] == "answered"
    assert [todo["status"] for todo in result["todos"]] == ["completed"] * 3
    assert DONE == TITLES
    assert turns(database) == ["m1"]


async def test_a_retry_of_a_run_that_had_finished_changes_nothing(database: Database) -> None:
    graph, model = graph_of(database)
    config = server_run("finished")
    first = await graph.ainvoke(request(), config, context=Context())
    calls = model.calls

    again = await graph.ainvoke(request(), config, context=Context())

    assert again["turnStatus"] == "answered"
    assert again["messages"][-1].content == first["messages"][-1].content
    assert len(again["messages"]) == len(first["messages"])
    assert model.calls == calls and DONE == TITLES


async def test_a_retry_whose_input_gets_a_new_id_finishes_its_turn_once_without_the_copy(
    database: Database,
) -> None:
    """A client that sends no message ids: the server's retry applies the input again, with an
    id of its own if it reaches the thread."""
    graph, _ = graph_of(database)
    config = server_run("copy")
    await crash_mid_turn(graph, request(None), config)

    result = await graph.ainvoke(request(None), config, context=Context())

    assert result["turnStatus"] == "answered"
    humans = [m for m in result["messages"] if isinstance(m, HumanMessage) and not m.name]
    assert len(humans) == 1, "the retry's copy of the request stayed in the thread"
    assert DONE == TITLES
    assert len(turns(database)) == 1


async def test_the_same_request_from_another_run_on_an_ended_turn_is_no_new_request(
    database: Database,
) -> None:
    graph, model = graph_of(database)
    config: RunnableConfig = {"configurable": {"thread_id": "ended"}}
    await graph.ainvoke(request(), config, context=Context())
    calls = model.calls

    again = await graph.ainvoke(request(), config, context=Context())

    assert again["turnStatus"] == "failed"
    assert "no new message" in again["messages"][-1].content
    assert model.calls == calls and DONE == TITLES
