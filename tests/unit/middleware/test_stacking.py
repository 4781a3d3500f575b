"""``TurnPlanMiddleware`` stacked with LangChain's own middleware in ``create_agent``: each
keeps its guarantees (HITL review of a tool, a model call limit, a summarised history) and the
turn's plan still drains."""

from __future__ import annotations

from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import (
    HumanInTheLoopMiddleware,
    ModelCallLimitMiddleware,
    SummarizationMiddleware,
)
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from agent.middleware import TurnPlanMiddleware
from storage import Database
from tests.fakes import (
    ScriptedChatModel,
    act,
    answer_with,
    close_row,
    plan_items,
    record,
    scripted_turn,
    tool_call,
)

CONFIG: Any = {"configurable": {"thread_id": "stacked"}}


async def test_a_tool_reviewed_by_hitl_runs_once_approved_and_the_plan_drains(
    database: Database, recorded_notes: list[str]
) -> None:
    model = scripted_turn(
        database,
        plan_items({"title": "Note milk"}),
        act(tool_call("record", note="milk")),
        close_row(0),
        answer_with("Noted."),
    )
    agent = create_agent(
        model,
        [record],
        middleware=[
            TurnPlanMiddleware(database),
            HumanInTheLoopMiddleware(interrupt_on={"record": True}),
            ModelCallLimitMiddleware(run_limit=10),
        ],
        checkpointer=InMemorySaver(),
    )
    paused = await agent.ainvoke({"messages": [HumanMessage(content="note milk")]}, CONFIG)

    (pause,) = paused["__interrupt__"]
    assert [a["name"] for a in pause.value["action_requests"]] == ["record"]
    assert recorded_notes == []

    done = await agent.ainvoke(Command(resume={"decisions": [{"type": "approve"}]}), CONFIG)

    assert recorded_notes == ["milk"]
    assert done["turnStatus"] == "answered"
    assert done["messages"][-1].content == "Noted."
    assert [(t["content"], t["status"]) for t in done["todos"]] == [("Note milk", "completed")]


async def test_a_model_call_limit_below_the_budget_stops_the_run_first(
    database: Database,
) -> None:
    model = scripted_turn(
        database,
        plan_items({"title": "Note milk"}, {"title": "Note bread"}),
        *[act(tool_call("record", note=f"n{i}")) for i in range(5)],
    )
    agent = create_agent(
        model,
        [record],
        middleware=[TurnPlanMiddleware(database), ModelCallLimitMiddleware(run_limit=3)],
        checkpointer=InMemorySaver(),
    )
    result = await agent.ainvoke({"messages": [HumanMessage(content="note both")]}, CONFIG)

    assert model.calls == 3
    assert "limit" in str(result["messages"][-1].content).lower()
    # turnplan does not call the run answered: its rows are still open.
    assert result["turnStatus"] == "running"
    assert [t["status"] for t in result["todos"]] == ["in_progress", "pending"]


async def test_a_summarised_history_keeps_the_plan_view_and_the_drain(
    database: Database,
) -> None:
    summarizer = ScriptedChatModel(responder=lambda _: AIMessage(content="Earlier: chit-chat."))
    model = scripted_turn(
        database,
        plan_items({"title": "Note milk"}),
        answer_with("Done?"),
        close_row(0),
        answer_with("Noted."),
    )
    agent = create_agent(
        model,
        [record],
        middleware=[
            TurnPlanMiddleware(database),
            SummarizationMiddleware(summarizer, trigger=("messages", 4), keep=("messages", 2)),
        ],
        checkpointer=InMemorySaver(),
    )
    result = await agent.ainvoke({"messages": [HumanMessage(content="note milk")]}, CONFIG)

    assert result["turnStatus"] == "answered"
    assert result["messages"][-1].content == "Noted."
    assert summarizer.calls >= 1
    assert "Note milk" in model.plan_view(model.calls - 1)
