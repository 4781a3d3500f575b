"""Edge cases a long-lived thread meets: interrupted runs, empty re-runs, the last allowed call,
unusable databases, concurrent writers, settings sent as JSON."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from agent.context import Context
from agent.graph import build_graph
from agent.prompting.builder import answer_orphaned_tool_calls
from agent.turn.budget import extended_budget
from agent.turn.plan_rows import PlanLimits, TodoItemInput, TurnPlan
from storage import Database
from storage.repositories import TurnScope
from tests.fakes import PlanOracle, ScriptedChatModel, ai, plan_view, tool_call


@tool
def explode(note: str) -> str:
    """A tool with a bug."""
    raise RuntimeError("bug in a tool")


@tool
async def record_after(note: str, seconds: float) -> str:
    """Record a note after a delay."""
    await asyncio.sleep(seconds)
    RECORDED.append(note)
    return note


RECORDED: list[str] = []


def test_tool_calls_without_results_are_answered_before_reaching_the_model() -> None:
    history = [
        HumanMessage(content="hi", id="h1"),
        ai(tool_call("explode", note="x")),
        HumanMessage(content="again", id="h2"),
    ]
    patched = answer_orphaned_tool_calls(history)
    assert isinstance(patched[2], ToolMessage)
    assert patched[2].tool_call_id == history[1].tool_calls[0]["id"]  # type: ignore[union-attr]
    assert json.loads(str(patched[2].content))["error"] == "NOT_RUN"
    assert patched[3] is history[2]


async def test_a_thread_survives_a_run_that_died_in_the_tools_node(database: Database) -> None:
    model = ScriptedChatModel(
        script=[ai(tool_call("explode", note="x")), AIMessage(content="fine now")]
    )
    graph = build_graph(
        model,
        tools=[explode],
        database=database,
        checkpointer=InMemorySaver(),
        include_default_tools=False,
    )
    config: Any = {"configurable": {"thread_id": "t"}}
    with pytest.raises(RuntimeError, match="bug in a tool"):  # re-raised, as asked
        await graph.ainvoke(
            {"messages": [HumanMessage(content="boom")]},
            config,
            context=Context(handle_tool_errors=False),
        )
    second = await graph.ainvoke({"messages": [HumanMessage(content="hello")]}, config)
    assert second["messages"][-1].content == "fine now"
    sent = model.prompts[-1]
    answered = {m.tool_call_id for m in sent if isinstance(m, ToolMessage)}
    called = {c["id"] for m in sent if isinstance(m, AIMessage) for c in m.tool_calls}
    assert called <= answered


async def test_a_plan_that_closes_on_the_last_allowed_call_is_answered(
    database: Database,
) -> None:
    titles = [f"item {i}" for i in range(1, 49 + 1)]  # 49 items: 51 calls on the cheapest path
    model = ScriptedChatModel(
        responder=PlanOracle(titles, lambda t: tool_call("add_task", title=t))
    )
    result = await build_graph(model, database=database).ainvoke(
        {"messages": [HumanMessage(content="49 things")]}, context=Context()
    )
    assert model.calls == 50
    assert result["turnStatus"] == "answered"
    text = str(result["messages"][-1].content)
    assert text.startswith("Everything planned for this request is done:")
    assert "item 49: did item 49" in text


async def test_an_empty_rerun_of_a_thread_is_not_a_new_turn(database: Database) -> None:
    model = ScriptedChatModel(script=[AIMessage(content="hello")])
    graph = build_graph(model, database=database, checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "t"}}
    first = await graph.ainvoke({"messages": [HumanMessage(content="hi")]}, config)
    again = await graph.ainvoke({"messages": []}, config)
    assert model.calls == 1
    assert again["turnId"] == first["turnId"]
    assert "no new message" in str(again["messages"][-1].content)


async def test_reminders_never_open_a_turn(database: Database) -> None:
    def plan_then_chat(messages: list[Any]) -> AIMessage:
        if not plan_view(messages):
            return ai(tool_call("create_todo", items=[{"title": "alpha"}]))
        return AIMessage(content="chatting")

    model = ScriptedChatModel(responder=plan_then_chat)
    graph = build_graph(model, database=database, checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "t"}}
    first = await graph.ainvoke(
        {"messages": [HumanMessage(content="do alpha", id="user-1")]},
        config,
        context=Context(max_reminders=1),
    )
    assert first["turnStatus"] == "stalled"
    again = await graph.ainvoke({"messages": []}, config)
    assert again["turnId"] == "user-1"
    assert "no new message" in str(again["messages"][-1].content)


async def test_an_unusable_database_path_ends_the_turn_with_a_message(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where a folder should be")
    database = Database(f"sqlite+aiosqlite:///{blocker / 'x.db'}")
    model = ScriptedChatModel(script=[AIMessage(content="unused")])
    result = await build_graph(model, database=database).ainvoke(
        {"messages": [HumanMessage(content="hi")]}, context=Context()
    )
    assert result["turnStatus"] == "failed"
    assert "could not be saved or read" in str(result["messages"][-1].content)
    assert model.calls == 0
    await database.dispose()


async def test_concurrent_closes_of_one_row_let_exactly_one_win(database: Database) -> None:
    plan = TurnPlan(database, TurnScope("c", "t"))
    change = await plan.add_items([TodoItemInput(title="only")], PlanLimits())
    todo_id = change.planned[0].id
    results = await asyncio.gather(
        plan.close(todo_id, "done by A", "completed"),
        plan.close(todo_id, "dropped by B", "cancelled"),
        return_exceptions=True,
    )
    winners = [r for r in results if not isinstance(r, BaseException)]
    losers = [r for r in results if isinstance(r, BaseException)]
    assert len(winners) == 1 and len(losers) == 1
    assert "already" in str(losers[0])
    rows, _ = await plan.rows()
    closed = winners[0].closed
    assert closed is not None
    assert (rows[0].status, rows[0].outcome) == (closed.status, closed.outcome)


async def test_free_calls_of_one_message_overlap_and_their_results_keep_the_order_written(
    database: Database,
) -> None:
    """Issue 12 changed this: independent calls run side by side (the fast one finishes first),
    but the model still gets the results in the order it wrote the calls."""
    RECORDED.clear()
    model = ScriptedChatModel(
        script=[
            ai(
                tool_call("record_after", note="slow first", seconds=0.2),
                tool_call("record_after", note="fast second", seconds=0),
            ),
            AIMessage(content="ok"),
        ]
    )
    graph = build_graph(model, tools=[record_after], database=database, include_default_tools=False)
    result = await graph.ainvoke(
        {"messages": [HumanMessage(content="two notes")]}, context=Context()
    )
    assert RECORDED == ["fast second", "slow first"]
    results = [m.content for m in result["messages"] if isinstance(m, ToolMessage)]
    assert results == ["slow first", "fast second"]


@pytest.mark.parametrize(
    ("budget", "calls", "expected"),
    [(10, 1, 11), (10, 9, 19), (19, 5, 19), (45, 44, 50), (50, 49, 50)],
)
def test_budget_extends_to_base_more_calls_from_here_up_to_the_cap(
    budget: int, calls: int, expected: int
) -> None:
    assert extended_budget(budget, calls, Context()) == expected


def test_context_accepts_json_numbers_and_refuses_nonsense() -> None:
    assert Context(base_iterations="5", request_timeout="2.5").base_iterations == 5  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="base_iterations"):
        Context(base_iterations=0)
    with pytest.raises(ValueError, match="must not exceed"):
        Context(base_iterations=60)
    with pytest.raises(ValueError, match="whole number"):
        Context(history_limit=2.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="planning"):
        Context(planning="sometimes")  # type: ignore[arg-type]
