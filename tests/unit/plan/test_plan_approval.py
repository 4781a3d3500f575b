"""``approve_plan``: a new plan waits for the user's approval before any item is worked; the
resume value approves, edits or rejects it; a malformed one asks again; a chat message answers."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from sqlalchemy import select

from agent.context import Context
from agent.graph import build_graph
from storage import Database
from storage.models import Turn
from storage.repositories import TurnScope, TurnTodoRepository
from storage.repositories.tasks import TaskRepository
from tests.fakes import ScriptedChatModel, ai, plan_rows, plan_view, tool_call, window_of

CONFIG: RunnableConfig = {"configurable": {"thread_id": "approve"}}


def adds(title: str) -> dict[str, Any]:
    return tool_call("add_task", title=title.removeprefix("Add ").strip())


def approval_aware_model(messages: list[BaseMessage]) -> AIMessage:
    """Plans two items and acts on the first; then, for the item in progress, acts on it unless
    the last step's action succeeded (a refused action before approval is made again), in which
    case it closes it and acts on the next; answers when nothing is open."""
    rows = plan_rows(plan_view(messages))
    if not rows:
        return ai(
            tool_call("create_todo", items=[{"title": "Add bread"}, {"title": "Add milk"}]),
            adds("Add bread"),
        )
    current = next((row for row in rows if row.mark == ">"), None)
    if current is None:
        return AIMessage(content=f"Done: {len(rows)} items.")
    results = []
    for message in reversed(window_of(messages)):
        if not isinstance(message, ToolMessage):
            break
        results.append(message)
    acted = any(m.name == "add_task" and m.status != "error" for m in results)
    if not acted:
        return ai(adds(current.title))
    following = next((row for row in rows if row.mark == " "), None)
    close = tool_call("complete_todo", todoId=current.id, outcome=f"did {current.title}")
    return ai(close, *([adds(following.title)] if following else []))


async def paused(database: Database) -> tuple[Any, dict[str, Any]]:
    model = ScriptedChatModel(responder=approval_aware_model)
    graph = build_graph(model, database=database, checkpointer=InMemorySaver())
    result = await graph.ainvoke(
        {"messages": [HumanMessage(content="add bread and milk")]},
        CONFIG,
        context=Context(approve_plan=True),
    )
    return graph, result


async def task_titles(database: Database) -> list[str]:
    async with database.session() as session:
        return sorted(t.title for t in await TaskRepository(session, "local-user").find())


async def test_the_plan_waits_for_approval_and_nothing_is_worked_before_it(
    database: Database,
) -> None:
    graph, result = await paused(database)

    (pause,) = result["__interrupt__"]
    assert pause.value["type"] == "plan_approval"
    assert [item["title"] for item in pause.value["items"]] == ["Add bread", "Add milk"]
    assert await task_titles(database) == []  # the action written beside create_todo waited
    refused = [m for m in result["messages"] if isinstance(m, ToolMessage) and m.name == "add_task"]
    assert '"NOT_RUN"' in str(refused[0].content)

    done = await graph.ainvoke(Command(resume={"action": "approve"}), CONFIG)

    assert done["turnStatus"] == "answered"
    assert [row["status"] for row in done["todos"]] == ["completed", "completed"]
    assert await task_titles(database) == ["bread", "milk"]


async def test_an_edit_replaces_the_items_and_the_turn_works_the_new_ones(
    database: Database,
) -> None:
    graph, _ = await paused(database)

    done = await graph.ainvoke(
        Command(resume={"action": "edit", "items": [{"title": "Add eggs"}]}), CONFIG
    )

    assert done["turnStatus"] == "answered"
    assert [(row["title"], row["status"]) for row in done["todos"]] == [("Add eggs", "completed")]
    assert await task_titles(database) == ["eggs"]


async def test_a_rejection_cancels_every_item_and_the_model_says_so(database: Database) -> None:
    graph, _ = await paused(database)

    done = await graph.ainvoke(Command(resume={"action": "reject", "reason": "not today"}), CONFIG)

    assert done["turnStatus"] == "answered"
    assert [(row["status"], row["outcome"]) for row in done["todos"]] == [
        ("cancelled", "Rejected by the user: not today")
    ] * 2
    assert await task_titles(database) == []
    told = [m for m in done["messages"] if isinstance(m, HumanMessage) and m.name == "turnplan"]
    assert 'rejected your plan: "not today"' in str(told[-1].content)


async def test_a_malformed_decision_asks_again_and_changes_nothing(database: Database) -> None:
    graph, _ = await paused(database)

    again = await graph.ainvoke(Command(resume={"action": "edit", "items": [{}]}), CONFIG)

    (pause,) = again["__interrupt__"]
    assert pause.value["type"] == "plan_approval"
    assert '"edit" needs valid "items"' in pause.value["error"]
    assert [item["title"] for item in pause.value["items"]] == ["Add bread", "Add milk"]
    done = await graph.ainvoke(Command(resume={"action": "approve"}), CONFIG)
    assert await task_titles(database) == ["bread", "milk"]
    assert done["turnStatus"] == "answered"


async def test_a_message_while_waiting_approves_with_a_yes_and_rejects_otherwise(
    database: Database,
) -> None:
    graph, _ = await paused(database)
    done = await graph.ainvoke({"messages": [HumanMessage(content="Yes!")]}, CONFIG)
    assert done["turnStatus"] == "answered"
    assert [row["title"] for row in done["todos"]] == ["Add bread", "Add milk"]
    assert "/fork-" not in done["turnId"]  # the same turn, answered, not a new one
    assert await task_titles(database) == ["bread", "milk"]


async def test_a_message_other_than_yes_rejects_the_plan_with_its_words(
    database: Database,
) -> None:
    graph, _ = await paused(database)
    done = await graph.ainvoke({"messages": [HumanMessage(content="no, only milk")]}, CONFIG)
    assert done["turnStatus"] == "answered"
    assert "/fork-" not in done["turnId"]
    assert [row["outcome"] for row in done["todos"]] == ["Rejected by the user: no, only milk"] * 2
    assert await task_titles(database) == []


async def test_after_a_rejection_an_action_without_a_plan_runs(database: Database) -> None:
    graph, _ = await paused(database)
    # The model's reply to the rejection: one action, no new plan.
    graph_model = ScriptedChatModel(
        script=[ai(tool_call("add_task", title="milk")), AIMessage(content="Added milk only.")]
    )
    graph = build_graph(graph_model, database=database, checkpointer=graph.checkpointer)

    done = await graph.ainvoke({"messages": [HumanMessage(content="no, only milk")]}, CONFIG)

    assert done["turnStatus"] == "answered"
    assert await task_titles(database) == ["milk"]


async def test_a_run_without_a_new_message_after_a_message_approval_is_not_a_turn(
    database: Database,
) -> None:
    graph, _ = await paused(database)
    await graph.ainvoke({"messages": [HumanMessage(content="yes")]}, CONFIG)

    again = await graph.ainvoke({"messages": []}, CONFIG)

    assert again["turnStatus"] == "failed"
    assert "no new message" in str(again["messages"][-1].content)
    assert [m.content for m in again["messages"] if isinstance(m, HumanMessage) and not m.name] == [
        "add bread and milk"
    ]


def plans_and_stalls(messages: list[BaseMessage]) -> AIMessage:
    """Plans two items, then only ever answers: the turn stalls with both rows open."""
    if not plan_rows(plan_view(messages)):
        return ai(tool_call("create_todo", items=[{"title": "Add bread"}, {"title": "Add milk"}]))
    return AIMessage(content="Not now.")


async def test_a_fork_from_before_the_decision_decides_on_its_own_copy_of_the_plan(
    database: Database,
) -> None:
    """Studio: the plan was approved and the turn stalled with its rows open; a fork from the
    checkpoint before the decision pauses for approval again, and rejecting it there cancels
    the fork's rows only."""
    graph = build_graph(
        ScriptedChatModel(responder=plans_and_stalls),
        database=database,
        checkpointer=InMemorySaver(),
    )
    context = Context(approve_plan=True)
    await graph.ainvoke(
        {"messages": [HumanMessage(content="bread, milk")]}, CONFIG, context=context
    )
    original = await graph.ainvoke(Command(resume={"action": "approve"}), CONFIG, context=context)
    assert original["turnStatus"] == "stalled"
    history = [snapshot async for snapshot in graph.aget_state_history(CONFIG)]
    before_decision = next(
        snapshot
        for snapshot in reversed(history)  # oldest first
        if snapshot.next == ("drain",) and snapshot.values["todos"]
    )

    await graph.ainvoke(None, before_decision.config, context=context)
    assert (await graph.aget_state(CONFIG)).interrupts, "the fork asks for the decision again"
    forked = await graph.ainvoke(
        Command(resume={"action": "reject", "reason": "not today"}), CONFIG, context=context
    )

    assert forked["turnId"].startswith(f"{original['turnId']}/fork-")
    assert [todo["status"] for todo in forked["todos"]] == ["cancelled", "cancelled"]
    async with database.session() as session:
        kept = await TurnTodoRepository(session).find_by_turn(
            TurnScope(original["conversationId"], original["turnId"])
        )
    assert [row.status for row in kept] == ["in_progress", "pending"]
    forks = await fork_turns(database, original["conversationId"])
    assert len(forks) == 1, "the run that took the answer found the fork it had made"


async def fork_turns(database: Database, conversation_id: str) -> list[str]:
    async with database.session() as session:
        found = await session.execute(
            select(Turn.turnId).where(
                Turn.conversationId == conversation_id, Turn.forkedFrom.is_not(None)
            )
        )
        return list(found.scalars())
