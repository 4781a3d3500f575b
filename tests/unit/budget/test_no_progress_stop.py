"""The no-progress stop (issue 29 §4): a turn whose tool rounds start or close no row and only
read the plan or repeat its own calls ends ``stalled`` after ``Context.max_idle_rounds`` such
rounds, saying what it repeated, instead of spending its call budget."""

from __future__ import annotations

import json
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from agent.context import Context
from agent.graph import build_graph
from storage import Database
from tests.fakes import ScriptedChatModel, ai, plan_rows, plan_view, tool_call

TWO_ITEMS = [{"title": "alpha"}, {"title": "beta"}]


@tool
def record(note: str) -> str:
    """Record a note (the domain action of these tests)."""
    return json.dumps({"recorded": note})


def make_graph(model: ScriptedChatModel, database: Database, **kwargs: Any) -> Any:
    return build_graph(
        model, tools=[record], database=database, include_default_tools=False, **kwargs
    )


async def run(graph: Any, context: Context | None = None) -> Any:
    return await graph.ainvoke(
        {"messages": [HumanMessage(content="do alpha and beta")]}, context=context or Context()
    )


def plans_then(action: Any) -> Any:
    """A responder that plans the two items, then answers every call with ``action``."""

    def respond(messages: list[Any]) -> AIMessage:
        if not plan_rows(plan_view(messages)):
            return ai(tool_call("create_todo", items=TWO_ITEMS))
        reply: AIMessage = action(messages)
        return reply

    return respond


def reads_the_plan(messages: list[Any]) -> AIMessage:
    return ai(tool_call("list_todo"))


async def test_a_model_looping_on_list_todo_is_stopped_after_three_idle_rounds(
    database: Database,
) -> None:
    model = ScriptedChatModel(responder=plans_then(reads_the_plan))
    result = await run(make_graph(model, database))

    assert result["turnStatus"] == "stalled"
    # The planning call, then three rounds of list_todo: far below the 10-call base budget
    # (the loop used to run up to the cap of 50 calls).
    assert model.calls == 4 == result["llmCalls"]
    answer = result["messages"][-1].content
    assert "last 3 tool rounds started or closed no planned item" in answer
    assert "list_todo() 3 times" in answer
    assert "- alpha (was in progress)" in answer and "- beta" in answer


async def test_the_same_domain_call_repeated_with_the_same_arguments_is_no_progress(
    database: Database,
) -> None:
    model = ScriptedChatModel(
        responder=plans_then(lambda messages: ai(tool_call("record", note="buy milk")))
    )
    result = await run(make_graph(model, database))

    assert result["turnStatus"] == "stalled"
    # The first record call is new work; the three repeats of it are not.
    assert model.calls == 5
    assert 'record({"note": "buy milk"}) 3 times' in result["messages"][-1].content


async def test_new_arguments_are_work_and_a_closed_row_starts_the_count_again(
    database: Database,
) -> None:
    """Two idle rounds, then a round that closes a row, then two idle rounds again, then new
    work, then the last row closes: never three idle rounds in a row, so the turn answers."""
    steps = iter(
        [
            "list",
            "list",
            "complete",
            "list",
            "list",
            "note-1",
            "list",
            "list",
            "complete",
        ]
    )

    def respond(messages: list[Any]) -> AIMessage:
        rows = plan_rows(plan_view(messages))
        if not rows:
            return ai(tool_call("create_todo", items=TWO_ITEMS))
        current = next((row for row in rows if row.mark == ">"), None)
        step = next(steps, "answer")
        if step == "list":
            return ai(tool_call("list_todo"))
        if step.startswith("note"):
            return ai(tool_call("record", note=step))
        if step == "complete" and current is not None:
            return ai(tool_call("complete_todo", todoId=current.id, outcome="done"))
        return AIMessage(content="Both done.")

    model = ScriptedChatModel(responder=respond)
    result = await run(make_graph(model, database))

    assert result["turnStatus"] == "answered"
    assert [todo["status"] for todo in result["todos"]] == ["completed", "completed"]
    assert result["messages"][-1].content == "Both done."


async def test_the_setting_changes_how_many_idle_rounds_are_allowed(database: Database) -> None:
    model = ScriptedChatModel(responder=plans_then(reads_the_plan))
    result = await run(make_graph(model, database), Context(max_idle_rounds=1))
    assert result["turnStatus"] == "stalled"
    assert model.calls == 2
    assert "last 1 tool rounds" in result["messages"][-1].content


async def test_the_idle_count_survives_a_resume_from_the_checkpoint(database: Database) -> None:
    """Run one step at a time, each run starting from the thread's checkpoint: the count is in
    the checkpointed state, so the turn stops after the same calls as in one run."""
    model = ScriptedChatModel(responder=plans_then(reads_the_plan))
    graph = make_graph(model, database, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "resumed"}}
    state = await graph.ainvoke(
        {"messages": [HumanMessage(content="do alpha and beta")]},
        config,
        context=Context(),
        interrupt_before=["execute"],
    )
    pauses = 1
    while (await graph.aget_state(config)).next:
        state = await graph.ainvoke(None, config, context=Context(), interrupt_before=["execute"])
        pauses += 1

    assert state["turnStatus"] == "stalled"
    assert model.calls == 4
    assert pauses == 5  # paused before each of the four execute steps, then ran to the end
