"""What a LangGraph Studio user does mid-turn, through the Python API: pause, edit state as a
node, fork or replay from an older checkpoint. (The same through the dev server and the SDK is in
tests/integration/server/test_studio_sdk.py.)"""

from __future__ import annotations

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
from agent.graph import SYNC_INVOKE_MESSAGE, build_graph
from storage import Database
from tests.fakes import PlanOracle, ScriptedChatModel, tool_call
from tests.unit.plan.test_plan_approval import plans_and_stalls

DONE: list[str] = []
TITLES = ["first", "second", "third"]


@tool
def record(note: str) -> str:
    """Record a note (the domain action of these tests)."""
    DONE.append(note)
    return json.dumps({"recorded": note})


@pytest.fixture(autouse=True)
def _clear_done() -> None:
    DONE.clear()


def rows_by_turn(database: Database) -> dict[str, list[tuple[str, str, str | None]]]:
    path = database.url.split("///", 1)[1]
    with closing(sqlite3.connect(path)) as connection:
        found = connection.execute(
            "SELECT turnId, title, status, outcome FROM turn_todos ORDER BY turnId, priority"
        ).fetchall()
    rows: dict[str, list[tuple[str, str, str | None]]] = {}
    for turn_id, title, status, outcome in found:
        rows.setdefault(turn_id, []).append((title, status, outcome))
    return rows


def oracle_graph(database: Database) -> tuple[Any, ScriptedChatModel, PlanOracle]:
    oracle = PlanOracle(TITLES, lambda title: tool_call("record", note=title))
    model = ScriptedChatModel(responder=oracle)
    graph = build_graph(
        model,
        tools=[record],
        database=database,
        include_default_tools=False,
        checkpointer=InMemorySaver(),
    )
    return graph, model, oracle


def thread(name: str) -> RunnableConfig:
    return {"configurable": {"thread_id": name}}


REQUEST = {"messages": [HumanMessage(content="Do three things", id="m1")]}


@pytest.mark.parametrize("as_node", ["drain", "plan", "execute", "tools"])
async def test_an_edit_made_as_any_node_continues_the_paused_turn(
    database: Database, as_node: str
) -> None:
    graph, _, _ = oracle_graph(database)
    config = thread(f"edit-{as_node}")
    await graph.ainvoke(REQUEST, config, context=Context(), interrupt_before=["execute"])
    paused = await graph.aget_state(config)
    assert paused.next == ("execute",)
    assert paused.values["turnStatus"] == "running"

    await graph.aupdate_state(config, {"remindersInARow": 0}, as_node=as_node)
    edited = await graph.aget_state(config)
    assert edited.next, f"an edit as {as_node} left the turn with nothing to run"

    result = await graph.ainvoke(None, config, context=Context())
    assert result["turnStatus"] == "answered"
    assert [todo["status"] for todo in result["todos"]] == ["completed"] * 3
    assert DONE == TITLES


async def test_a_replay_from_a_mid_turn_checkpoint_is_a_new_turn_that_redoes_the_work(
    database: Database,
) -> None:
    graph, model, _ = oracle_graph(database)
    config = thread("replay")
    original = await graph.ainvoke(REQUEST, config, context=Context())
    assert original["turnStatus"] == "answered"
    original_rows = rows_by_turn(database)[original["turnId"]]
    assert [status for _, status, _ in original_rows] == ["completed"] * 3

    # The checkpoint Studio shows before the second item is worked on.
    history = [snapshot async for snapshot in graph.aget_state_history(config)]
    before_execute = [s for s in history if s.next == ("execute",)]
    mid_turn = before_execute[-2]  # newest first: the second round, one item done
    assert [todo["status"] for todo in mid_turn.values["todos"]] == [
        "completed",
        "in_progress",
        "pending",
    ]
    calls_before, done_before = model.calls, list(DONE)

    forked = await graph.ainvoke(None, mid_turn.config, context=Context())

    assert forked["turnStatus"] == "answered"
    assert forked["turnId"].startswith(f"{original['turnId']}/fork-")
    rows = rows_by_turn(database)
    assert rows[original["turnId"]] == original_rows, "the original turn's record changed"
    assert [(title, status) for title, status, _ in rows[forked["turnId"]]] == [
        (title, "completed") for title in TITLES
    ]
    # Real work: the fork called the model and redid the items the checkpoint had left open.
    assert model.calls - calls_before >= 3
    assert DONE[len(done_before) :] == ["third"]


async def test_a_fork_made_by_editing_an_old_checkpoint_gets_its_own_rows(
    database: Database,
) -> None:
    graph, _, _ = oracle_graph(database)
    config = thread("fork")
    original = await graph.ainvoke(REQUEST, config, context=Context())
    history = [snapshot async for snapshot in graph.aget_state_history(config)]
    mid_turn = [s for s in history if s.next == ("execute",)][-1]

    fork_config = await graph.aupdate_state(
        mid_turn.config, {"remindersInARow": 0}, as_node="drain"
    )
    forked = await graph.ainvoke(None, fork_config, context=Context())

    assert forked["turnStatus"] == "answered"
    assert forked["turnId"] != original["turnId"]
    assert len(rows_by_turn(database)[forked["turnId"]]) == 3
    assert (await graph.aget_state(config)).values["turnId"] == forked["turnId"]


async def test_tool_calls_replayed_from_before_the_tools_step_leave_the_original_untouched(
    database: Database,
) -> None:
    graph, _, _ = oracle_graph(database)
    config = thread("replay-tools")
    original = await graph.ainvoke(REQUEST, config, context=Context())
    original_rows = rows_by_turn(database)[original["turnId"]]
    history = [snapshot async for snapshot in graph.aget_state_history(config)]
    # Before the tools step that completes the first item and records the second.
    before_tools = [s for s in history if s.next == ("tools",)]
    replay_from = before_tools[-2]
    done_before = len(DONE)

    forked = await graph.ainvoke(None, replay_from.config, context=Context())

    assert rows_by_turn(database)[original["turnId"]] == original_rows
    assert forked["turnStatus"] == "answered"
    fork_rows = rows_by_turn(database)[forked["turnId"]]
    assert [status for _, status, _ in fork_rows] == ["completed"] * 3
    assert DONE[done_before:] == ["second", "third"]


async def test_a_new_message_cannot_reopen_a_finished_turn_by_naming_its_id(
    database: Database,
) -> None:
    graph, _, oracle = oracle_graph(database)
    config = thread("reuse")
    first = await graph.ainvoke(REQUEST, config, context=Context())
    assert first["turnStatus"] == "answered"
    rows_before = rows_by_turn(database)

    reused = HumanMessage(
        content="again", id="m2", additional_kwargs={"metadata": {"turnId": "m1"}}
    )
    second = await graph.ainvoke({"messages": [reused]}, config, context=Context())

    assert second["turnStatus"] == "failed"
    assert "m1" in second["messages"][-1].content and "turnId" in second["messages"][-1].content
    assert rows_by_turn(database) == rows_before
    assert oracle.acted == set(TITLES)


async def test_the_updates_stream_shows_plain_values_and_the_output_carries_the_plan(
    database: Database,
) -> None:
    graph, _, _ = oracle_graph(database)
    updates = [
        chunk
        async for chunk in graph.astream(
            REQUEST, thread("stream"), context=Context(), stream_mode="updates"
        )
    ]
    assert "__reset__" not in json.dumps(updates, default=str)
    plan_update = next(chunk["plan"] for chunk in updates if "plan" in chunk)
    assert plan_update["modifiedTasks"] == []
    final = await graph.aget_state(thread("stream"))
    assert [todo["title"] for todo in final.values["todos"]] == TITLES


def test_sync_invoke_says_to_use_ainvoke(database: Database) -> None:
    graph, _, _ = oracle_graph(database)
    with pytest.raises(TypeError) as raised:
        graph.invoke(REQUEST, thread("sync"), context=Context())
    assert str(raised.value) == SYNC_INVOKE_MESSAGE
    assert "ainvoke" in SYNC_INVOKE_MESSAGE


async def test_a_conversation_belongs_to_the_user_who_started_it(database: Database) -> None:
    """Bob names Alice's conversation and turn id: he is refused and nothing of hers changes."""
    alice_graph, _, _ = oracle_graph(database)
    await alice_graph.ainvoke(
        REQUEST, thread("alice"), context=Context(user_id="alice", conversation_id="conv-A")
    )
    rows_before = rows_by_turn(database)

    bob_model = ScriptedChatModel(script=[])
    bob_graph = build_graph(
        bob_model, tools=[record], database=database, include_default_tools=False
    )
    bob = await bob_graph.ainvoke(
        {"messages": [HumanMessage(content="cancel everything", id="m1")]},
        context=Context(user_id="bob", conversation_id="conv-A"),
    )

    assert bob["turnStatus"] == "failed"
    assert "belongs to another user" in bob["messages"][-1].content
    assert bob_model.calls == 0, "Bob's model was shown Alice's conversation"
    assert rows_by_turn(database) == rows_before


@pytest.mark.parametrize("then_says", [None, "go on"])
@pytest.mark.parametrize("as_node", ["tools", "execute", "plan", None])
async def test_a_state_edited_to_name_another_users_turn_shows_bob_nothing_of_it(
    database: Database, as_node: str | None, then_says: str | None
) -> None:
    """Bob edits his own thread's state to name Alice's conversation and open turn (Studio's
    state editor, as any node), then resumes (None) or writes again: his run ends saying the
    conversation is another user's, his model never sees her plan, and nothing of hers
    changes."""
    graph = build_graph(
        ScriptedChatModel(responder=plans_and_stalls),
        database=database,
        checkpointer=InMemorySaver(),
    )
    request = {"messages": [HumanMessage(content="add bread and milk")]}
    hers = await graph.ainvoke(request, thread("alice"), context=Context(user_id="alice"))
    assert hers["turnStatus"] == "stalled"

    bob_model = ScriptedChatModel(responder=plans_and_stalls)
    bob_graph = build_graph(bob_model, database=database, checkpointer=InMemorySaver())
    await bob_graph.ainvoke(request, thread("bob"), context=Context(user_id="bob"))
    rows_before = rows_by_turn(database)
    calls_before = bob_model.calls
    edit = {"conversationId": hers["conversationId"], "turnId": hers["turnId"]}
    await bob_graph.aupdate_state(thread("bob"), {**edit, "turnStatus": "running"}, as_node=as_node)

    resumed = None if then_says is None else {"messages": [HumanMessage(content=then_says)]}
    bob = await bob_graph.ainvoke(resumed, thread("bob"), context=Context(user_id="bob"))

    assert bob["turnStatus"] == "failed"
    assert "belongs to another user" in bob["messages"][-1].content
    shown = [str(m.content) for prompt in bob_model.prompts[calls_before:] for m in prompt]
    assert not any(hers["todos"][0]["id"] in text for text in shown)
    assert rows_by_turn(database) == rows_before
