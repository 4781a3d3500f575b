"""A plan item is one model step and one tool step: a tool round goes straight back to
``execute``, ``drain`` judges only the answer, and every checkpoint before a model step still
holds the plan as it stands (what Studio shows, and what a fork copies)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command, StateSnapshot

from agent.context import Context
from agent.graph import build_graph
from agent.tools.ask_user import build_ask_user_tool
from agent.turn.identity import REMINDER_NAME
from storage import Database
from storage.repositories import TurnScope, TurnTodoRepository
from tests.fakes import (
    PlanOracle,
    PlanRow,
    ScriptedChatModel,
    ai,
    plan_rows,
    plan_view,
    tool_call,
)


@tool
def record(note: str) -> str:
    """Record a note (the domain action of these tests)."""
    return json.dumps({"recorded": note})


def graph_for(model: ScriptedChatModel, database: Database, **kwargs: Any) -> Any:
    return build_graph(
        model, tools=[record], database=database, include_default_tools=False, **kwargs
    )


TITLES = ["one", "two", "three"]


def record_title(title: str) -> dict[str, Any]:
    return tool_call("record", note=title)


def statuses(todos: list[dict[str, Any]]) -> list[str]:
    return [todo["status"] for todo in todos]


async def test_a_plan_item_is_a_model_step_and_a_tool_step_and_drain_judges_only_the_answer(
    database: Database,
) -> None:
    model = ScriptedChatModel(responder=PlanOracle(TITLES, record_title))
    graph = graph_for(model, database)

    steps = [
        node
        async for update in graph.astream(
            {"messages": [HumanMessage(content="do three things")]},
            context=Context(),
            stream_mode="updates",
        )
        for node in update
    ]

    assert steps == ["plan", "tools", *(["execute", "tools"] * 3), "execute", "drain"]
    assert model.calls == len(TITLES) + 2


async def test_every_checkpoint_before_a_model_step_holds_the_plan_its_tool_results_made(
    database: Database,
) -> None:
    model = ScriptedChatModel(responder=PlanOracle(TITLES, record_title))
    graph = graph_for(model, database, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "snapshots"}}
    await graph.ainvoke(
        {"messages": [HumanMessage(content="do three things")]}, config, context=Context()
    )

    history = [snapshot async for snapshot in graph.aget_state_history(config)]
    assert len([s for s in history if s.next == ("execute",)]) == len(TITLES) + 1
    assert plan_lags_behind(history) == []
    assert all(len(s.values["todos"]) == len(TITLES) for s in history if s.next == ("execute",))


ExtraCall = Callable[[PlanRow, dict[str, Any]], dict[str, Any]]
"""The call a message makes besides closing a row: from the row and the close itself."""


def closes_then(extra: ExtraCall) -> Callable[[list[Any]], AIMessage]:
    """A model that plans alpha and beta and closes each in turn; the message closing alpha
    also makes the call ``extra`` gives for it."""

    def respond(messages: list[Any]) -> AIMessage:
        rows = plan_rows(plan_view(messages))
        if not rows:
            return ai(tool_call("create_todo", items=[{"title": "alpha"}, {"title": "beta"}]))
        current = next((row for row in rows if row.mark == ">"), None)
        if current is None:
            return AIMessage(content="both done")
        close = tool_call("complete_todo", todoId=current.id, outcome=f"{current.title} ok")
        return ai(close, extra(current, close)) if current.title == "alpha" else ai(close)

    return respond


def plan_lags_behind(snapshots: list[StateSnapshot]) -> list[tuple[int, list[str]]]:
    """(successful closes, statuses) of each checkpoint before a model step whose plan snapshot
    does not show its own tool results."""
    lagging = []
    for snapshot in snapshots:
        if snapshot.next != ("execute",):
            continue
        closes = sum(
            1
            for message in snapshot.values["messages"]
            if isinstance(message, ToolMessage)
            and message.name == "complete_todo"
            and message.status != "error"
        )
        shown = statuses(snapshot.values["todos"])
        if shown.count("completed") != closes:
            lagging.append((closes, shown))
    return lagging


@pytest.mark.parametrize(
    "second_close",
    [
        pytest.param(lambda row: {"todoId": "no-such-row", "outcome": "x"}, id="unknown-row"),
        pytest.param(lambda row: {"todoId": row.id}, id="no-outcome"),
    ],
)
async def test_a_message_whose_last_plan_change_fails_still_leaves_the_plan_it_made(
    database: Database, second_close: Callable[[PlanRow], dict[str, Any]]
) -> None:
    """alpha's close succeeds and a second close in the same message fails (in the tool, or in
    argument validation before it runs): the checkpoint after the step shows alpha closed."""
    model = ScriptedChatModel(
        responder=closes_then(lambda row, _: tool_call("complete_todo", **second_close(row)))
    )
    graph = graph_for(model, database, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "failed-last-change"}}
    result = await graph.ainvoke(
        {"messages": [HumanMessage(content="alpha then beta")]}, config, context=Context()
    )

    assert result["turnStatus"] == "answered"
    assert statuses(result["todos"]) == ["completed", "completed"]
    history = [snapshot async for snapshot in graph.aget_state_history(config)]
    failed_round = next(
        snapshot
        for snapshot in reversed(history)  # oldest first
        if snapshot.next == ("execute",)
        and isinstance(snapshot.values["messages"][-1], ToolMessage)
        and snapshot.values["messages"][-1].status == "error"
    )
    assert statuses(failed_round.values["todos"]) == ["completed", "in_progress"]
    assert plan_lags_behind(history) == []


async def test_a_close_replayed_after_a_question_leaves_the_plan_it_made_and_a_fork_copies_it(
    database: Database,
) -> None:
    """alpha's close and a question in one message: the run pauses, and the resumed run answers
    the close from its recorded result. The checkpoint before the next model step shows alpha
    closed, so a fork from it neither redoes alpha nor asks again."""
    model = ScriptedChatModel(
        responder=closes_then(lambda row, _: tool_call("ask_user", question="which colour?"))
    )
    graph = build_graph(
        model,
        tools=[build_ask_user_tool(database)],
        database=database,
        include_default_tools=False,
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "asked"}}
    await graph.ainvoke(
        {"messages": [HumanMessage(content="alpha then beta")]}, config, context=Context()
    )
    answered = await graph.ainvoke(Command(resume="blue"), config, context=Context())
    assert answered["turnStatus"] == "answered"

    history = [snapshot async for snapshot in graph.aget_state_history(config)]
    assert plan_lags_behind(history) == []
    after_question = next(
        snapshot
        for snapshot in reversed(history)
        if snapshot.next == ("execute",)
        and isinstance(snapshot.values["messages"][-1], ToolMessage)
        and snapshot.values["messages"][-1].name == "ask_user"
    )
    calls_before = model.calls
    forked = await graph.ainvoke(None, after_question.config, context=Context())
    assert [row.mark for row in plan_rows(model.plan_view(calls_before))] == ["x", ">"]
    assert forked["turnStatus"] == "answered" and "__interrupt__" not in forked


async def test_a_spent_budget_after_a_tool_round_ends_in_drain_without_another_call(
    database: Database,
) -> None:
    def keep_working(messages: list[Any]) -> AIMessage:
        if not plan_rows(plan_view(messages)):
            return ai(tool_call("create_todo", items=[{"title": "alpha"}, {"title": "beta"}]))
        return ai(tool_call("record", note="still working"))

    model = ScriptedChatModel(responder=keep_working)
    graph = graph_for(model, database)
    steps: list[str] = []
    async for update in graph.astream(
        {"messages": [HumanMessage(content="go")]},
        context=Context(base_iterations=2, max_iterations=3),
        stream_mode="updates",
    ):
        steps.extend(update)

    assert model.calls == 3
    assert steps[-3:] == ["tools", "execute", "drain"]
    assert update["drain"]["turnStatus"] == "budget_exhausted"


async def test_a_plan_snapshot_edited_in_studio_is_put_back_to_the_stored_rows_by_the_model_step(
    database: Database,
) -> None:
    """The rows are the record; ``todos`` mirrors them. A run continued from a checkpoint (here
    after an edit made as ``tools``) has nothing handed over, so the model step reads the rows
    and its checkpoint shows them again."""
    model = ScriptedChatModel(responder=PlanOracle(TITLES, record_title))
    graph = graph_for(model, database, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "edited-snapshot"}}
    await graph.ainvoke(
        {"messages": [HumanMessage(content="do three things")]},
        config,
        context=Context(),
        interrupt_before=["execute"],
    )
    await graph.aupdate_state(config, {"todos": []}, as_node="tools")

    await graph.ainvoke(None, config, context=Context(), interrupt_before=["tools"])

    paused = await graph.aget_state(config)
    assert statuses(paused.values["todos"]) == ["in_progress", "pending", "pending"]


async def test_a_close_whose_call_id_the_model_repeats_leaves_one_snapshot_and_acts_once(
    database: Database,
) -> None:
    """Some models give every call of a message the same id: the step still leaves one plan
    snapshot (the last plan change by position), and the ledger makes the repeat act once."""
    model = ScriptedChatModel(responder=closes_then(lambda _, close: dict(close)))
    result = await graph_for(model, database).ainvoke(
        {"messages": [HumanMessage(content="alpha then beta")]}, context=Context()
    )

    assert result["turnStatus"] == "answered"
    assert statuses(result["todos"]) == ["completed", "completed"]
    assert model.calls == 4


async def test_a_fork_whose_model_step_fails_still_reports_the_forks_own_rows(
    database: Database,
) -> None:
    """A fork from the checkpoint after a reminder (no tool round before its model step) copies
    the plan with new ids; when its model call then fails, the output's plan is the fork's."""
    failing = False

    def respond(messages: list[Any]) -> AIMessage:
        if failing:
            raise RuntimeError("model down")
        rows = plan_rows(plan_view(messages))
        if not rows:
            return ai(tool_call("create_todo", items=[{"title": "alpha"}]))
        current = next((row for row in rows if row.mark == ">"), None)
        if current is None:
            return AIMessage(content="done")
        if not any(isinstance(m, HumanMessage) and m.name == REMINDER_NAME for m in messages):
            return AIMessage(content="done already")  # too early: the turn reminds it
        return ai(tool_call("complete_todo", todoId=current.id, outcome="ok"))

    graph = graph_for(ScriptedChatModel(responder=respond), database, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "fork-fails"}}
    original = await graph.ainvoke(
        {"messages": [HumanMessage(content="alpha")]}, config, context=Context()
    )
    assert original["turnStatus"] == "answered"
    history = [snapshot async for snapshot in graph.aget_state_history(config)]
    after_reminder = next(
        snapshot
        for snapshot in history
        if snapshot.next == ("execute",)
        and isinstance(snapshot.values["messages"][-1], HumanMessage)
        and snapshot.values["messages"][-1].name == REMINDER_NAME
    )

    failing = True
    forked = await graph.ainvoke(None, after_reminder.config, context=Context())

    assert forked["turnStatus"] == "failed"
    assert forked["turnId"].startswith(f"{original['turnId']}/fork-")
    async with database.session() as session:
        fork_rows = await TurnTodoRepository(session).find_by_turn(
            TurnScope(forked["conversationId"], forked["turnId"])
        )
    assert [todo["id"] for todo in forked["todos"]] == [row.id for row in fork_rows]
