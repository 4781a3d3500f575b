"""An honest status (issue 40 §4): ``answered`` means everything asked was done.

A row cancelled for a failure (by the model, or by the compact profile's harness after its
action failed) ends the turn ``incomplete``, its answer saying what was not done and why; a
failed direct action of the compact profile too. Rows the user cancelled (a rejected plan, a
``planEdits`` cancel) are the user's choice: the turn still ends ``answered``. Who cancelled a
row is recorded in ``todo_cancellations`` by the code path that cancelled it.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from sqlalchemy import select

from agent.context import Context
from agent.graph import build_graph
from storage import Database
from storage.models import TodoCancellation
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
from tests.unit.plan.test_plan_approval import CONFIG, paused
from tests.unit.plan.test_plan_edits import paused_for_approval

COMPACT = Context(prompt_profile="compact", user_id="alice")


async def cancellations(database: Database) -> dict[str, str]:
    """Who cancelled each row, by row id, as the database records it."""
    async with database.session(readonly=True) as session:
        found = await session.scalars(select(TodoCancellation))
        return {row.todoId: row.cancelledBy for row in found}


async def run(graph: Any, text: str, context: Context | None = None) -> Any:
    return await graph.ainvoke({"messages": [HumanMessage(content=text)]}, context=context)


# --- full profile -----------------------------------------------------------------------------


async def test_a_row_the_model_cancelled_for_a_failure_ends_incomplete_saying_why(
    database: Database, recorded_notes: list[str]
) -> None:
    model = scripted_turn(
        database,
        plan_items({"title": "note a"}, {"title": "book the venue"}),
        act(tool_call("record", note="a")),
        close_row(0, "recorded a"),
        close_row(1, "the venue's site returned NOT_FOUND", status="cancelled"),
        answer_with("All set!"),
    )
    graph = build_graph(model, tools=[record], database=database, include_default_tools=False)

    result = await run(graph, "note a and book the venue")

    assert result["turnStatus"] == "incomplete"
    answer = str(result["messages"][-1].content)
    assert answer.startswith("All set!")  # the model's words stay, the gap is said after them
    assert "- book the venue: the venue's site returned NOT_FOUND" in answer
    assert "note a" not in answer.split("Not done", 1)[1]  # only what was not done is listed
    assert not [m for m in result["messages"] if m.content == "All set!"]  # replaced, not kept
    venue = next(todo for todo in result["todos"] if todo["title"] == "book the venue")
    assert venue["cancelledBy"] == "agent"
    assert await cancellations(database) == {venue["id"]: "agent"}
    (card,) = [ui for ui in result["ui"] if ui["name"] == "plan"]
    assert card["props"]["turnStatus"] == "incomplete"
    assert recorded_notes == ["a"]


async def test_a_row_cancelled_on_the_last_allowed_call_ends_incomplete(
    database: Database,
) -> None:
    model = scripted_turn(
        database,
        plan_items({"title": "book the venue"}),
        close_row(0, "no venue tool answered", status="cancelled"),
    )
    graph = build_graph(model, tools=[record], database=database, include_default_tools=False)

    result = await run(graph, "book it", Context(base_iterations=2, max_iterations=2))

    assert model.calls == 2
    assert result["turnStatus"] == "incomplete"
    answer = str(result["messages"][-1].content)
    assert "- book the venue: no venue tool answered" in answer
    assert not answer.startswith("Everything planned for this request is done")


async def test_a_rejected_plan_is_the_users_choice_and_the_turn_is_answered(
    database: Database,
) -> None:
    graph, _ = await paused(database)

    done = await graph.ainvoke(Command(resume={"action": "reject", "reason": "not today"}), CONFIG)

    assert done["turnStatus"] == "answered"
    assert [row["cancelledBy"] for row in done["todos"]] == ["user", "user"]
    assert set((await cancellations(database)).values()) == {"user"}
    assert "Not done" not in str(done["messages"][-1].content)


# --- compact profile --------------------------------------------------------------------------


async def test_compact_a_failed_direct_action_ends_incomplete(database: Database) -> None:
    model = ScriptedChatModel(script=[])  # the user's words fix the call: no model call at all
    graph = build_graph(model, database=database)

    result = await run(graph, "complete 'call mom' in my tasks", COMPACT)

    assert model.calls == 0
    assert result["turnStatus"] == "incomplete"
    answer = str(result["messages"][-1].content)
    # The harness never calls the tool with words that name no task (it could match a part).
    assert answer.startswith('Not done: no task of yours is called "call mom"')


async def test_compact_a_planned_item_whose_action_failed_ends_incomplete(
    database: Database,
) -> None:
    graph = build_graph(ScriptedChatModel(script=[]), database=database)

    result = await run(graph, "add 'milk' to my tasks, then complete 'ghost' in my tasks", COMPACT)

    assert result["turnStatus"] == "incomplete"
    answer = str(result["messages"][-1].content)
    assert answer.startswith("Not everything you asked for could be done (1 of 2")
    assert answer.count('no task of yours is called "ghost"') == 1  # said once, not restated
    assert [(row["status"], row.get("cancelledBy")) for row in result["todos"]] == [
        ("completed", None),
        ("cancelled", "agent"),
    ]


async def test_compact_a_request_no_tool_does_is_incomplete_when_it_must_be_planned(
    database: Database,
) -> None:
    graph = build_graph(ScriptedChatModel(script=[]), database=database)
    context = Context(prompt_profile="compact", user_id="alice", planning="always")

    result = await run(graph, "Email my boss the list", context)

    assert result["turnStatus"] == "incomplete"
    assert "- Email my boss the list: no tool of mine does what this asks" in str(
        result["messages"][-1].content
    )


async def test_compact_a_rejected_plan_is_answered_and_not_called_a_failure(
    database: Database,
) -> None:
    model = ScriptedChatModel(script=[AIMessage(content="MODEL")])
    graph: Any = build_graph(model, database=database, checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "compact-reject"}}
    request = "add 'milk' to my tasks, then add 'eggs' to my tasks"
    paused_turn = await graph.ainvoke(
        {"messages": [HumanMessage(content=request)]},
        config,
        context=Context(prompt_profile="compact", user_id="alice", approve_plan=True),
    )
    assert paused_turn["__interrupt__"][0].value["type"] == "plan_approval"

    done = await graph.ainvoke(Command(resume={"action": "reject", "reason": "not now"}), config)

    assert done["turnStatus"] == "answered"
    assert done["messages"][-1].content == "MODEL"  # nothing added: the user chose this
    assert [row["cancelledBy"] for row in done["todos"]] == ["user", "user"]


async def test_a_fork_keeps_who_cancelled_its_rows_so_the_users_choice_still_answers(
    database: Database,
) -> None:
    graph, _ = await paused_for_approval(database)
    milk = next(
        t["id"] for t in (await graph.aget_state(CONFIG)).values["todos"] if "milk" in t["title"]
    )
    await graph.ainvoke(
        {"planEdits": [{"op": "cancel", "id": milk, "reason": "have some"}]}, CONFIG
    )
    original = await graph.ainvoke(Command(resume={"action": "approve"}), CONFIG)
    assert original["turnStatus"] == "answered"
    history = [snapshot async for snapshot in graph.aget_state_history(CONFIG)]
    mid_turn = next(
        s for s in reversed(history) if s.next == ("execute",) and s.values.get("planApproved")
    )

    forked = await graph.ainvoke(None, mid_turn.config, context=Context())

    assert forked["turnId"].startswith(f"{original['turnId']}/fork-")
    assert forked["turnStatus"] == "answered"
    assert [(t["title"], t["status"], t.get("cancelledBy")) for t in forked["todos"]] == [
        ("Add bread", "completed", None),
        ("Add milk", "cancelled", "user"),
    ]


async def test_compact_a_request_no_tool_does_is_not_answered(database: Database) -> None:
    graph = build_graph(ScriptedChatModel(script=[]), database=database)

    result = await run(graph, "Email my boss the quarterly numbers.", COMPACT)

    assert result["turnStatus"] == "incomplete"
    assert str(result["messages"][-1].content).startswith("I did nothing")


async def test_compact_a_question_the_model_only_echoes_is_not_answered(
    database: Database,
) -> None:
    model = ScriptedChatModel(script=[AIMessage(content="What is the capital of France?")])
    graph = build_graph(model, database=database)

    result = await run(graph, "What is the capital of France?", COMPACT)

    assert model.calls == 1
    assert result["turnStatus"] == "incomplete"
    assert "I have no answer to that" in str(result["messages"][-1].content)


async def test_compact_a_question_the_model_answers_is_answered_with_no_tool(
    database: Database,
) -> None:
    model = ScriptedChatModel(script=[AIMessage(content="Paris.")])
    graph = build_graph(model, database=database)

    result = await run(graph, "What is the capital of France?", COMPACT)

    assert result["turnStatus"] == "answered"
    assert str(result["messages"][-1].content) == "Paris."
    assert result.get("todos") in (None, [])


async def test_compact_taking_back_with_nothing_before_it_changes_nothing_and_answers(
    database: Database,
) -> None:
    graph = build_graph(ScriptedChatModel(script=[]), database=database)

    result = await run(graph, "Forget it.", COMPACT)

    assert result["turnStatus"] == "answered"
    assert str(result["messages"][-1].content) == "Understood: I changed nothing."
