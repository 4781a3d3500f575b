"""A plan item is one model step and one tool step: a tool round goes straight back to
``execute``, ``drain`` judges only the answer, and every checkpoint before a model step still
holds the plan as it stands (what Studio shows, and what a fork copies)."""

from __future__ import annotations

import json
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from agent.context import Context
from agent.graph import build_graph
from storage import Database
from tests.fakes import PlanOracle, ScriptedChatModel, ai, plan_rows, plan_view, tool_call


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

    before_model_steps = [
        snapshot
        async for snapshot in graph.aget_state_history(config)
        if snapshot.next == ("execute",)
    ]
    assert len(before_model_steps) == len(TITLES) + 1
    for snapshot in before_model_steps:
        closes = sum(
            1
            for message in snapshot.values["messages"]
            if isinstance(message, ToolMessage)
            and message.name == "complete_todo"
            and message.status != "error"
        )
        todos = snapshot.values["todos"]
        assert statuses(todos).count("completed") == closes, statuses(todos)
        assert len(todos) == len(TITLES)


async def test_a_message_whose_last_plan_change_fails_still_gives_the_next_step_the_plan(
    database: Database,
) -> None:
    """The failed call leaves no snapshot behind; the next model step reads the rows and brings
    the state's plan up to date before the model sees it."""

    def respond(messages: list[Any]) -> AIMessage:
        rows = plan_rows(plan_view(messages))
        if not rows:
            return ai(tool_call("create_todo", items=[{"title": "alpha"}, {"title": "beta"}]))
        current = next((row for row in rows if row.mark == ">"), None)
        if current is None:
            return AIMessage(content="both done")
        close = tool_call("complete_todo", todoId=current.id, outcome=f"{current.title} ok")
        if current.title == "alpha":
            return ai(close, tool_call("complete_todo", todoId="no-such-row", outcome="x"))
        return ai(close)

    model = ScriptedChatModel(responder=respond)
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
    # The snapshot the failed message could not leave ...
    assert statuses(failed_round.values["todos"]) == ["in_progress", "pending"]
    after_model_step = next(
        snapshot
        for snapshot in reversed(history)
        if snapshot.next == ("tools",)
        and len(snapshot.values["messages"]) == len(failed_round.values["messages"]) + 1
    )
    # ... is there when the model step after it runs, and so when its tools run.
    assert statuses(after_model_step.values["todos"]) == ["completed", "in_progress"]
    assert plan_rows(model.plan_view(2))[0].mark == "x"


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
