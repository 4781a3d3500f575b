"""A multi-step personal-task turn through the whole supervisor graph (issue 5's done-when)."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver

from agent.context import Context
from agent.graph import build_graph
from storage import Database
from storage.repositories import ToolAuditRepository, TurnScope, TurnTodoRepository
from storage.repositories.tasks import TaskRepository
from tests.conftest import BOTH_BACKENDS
from tests.fakes import PlanOracle, ScriptedChatModel, ai, tool_call

pytestmark = BOTH_BACKENDS

STEPS = {
    "Add groceries": ("add_task", {"title": "buy groceries"}),
    "Add laundry": ("add_task", {"title": "do laundry"}),
    "Mark 'call mom' done": ("complete_task", {"task_identifier": "call mom"}),
    "Show what is left": ("list_tasks", {"filter": "pending"}),
}


def step_action(title: str) -> dict[str, Any]:
    name, args = STEPS[title]
    return tool_call(name, **args)


async def test_saturday_plan_adds_completes_and_lists_tasks(database: Database) -> None:
    graph = build_graph(
        ScriptedChatModel(responder=PlanOracle(list(STEPS), step_action)), database=database
    )
    context = Context(user_id="alice")
    await database.create_schema()
    async with database.session() as session:
        await TaskRepository(session, "alice").add("Call Mom", "")
        await TaskRepository(session, "bob").add("buy groceries", "bob's own")

    result = await graph.ainvoke(
        {
            "messages": [
                HumanMessage(
                    content="Plan my Saturday: add groceries and laundry, mark 'call mom' done,"
                    " show what is left",
                    id="saturday",
                )
            ]
        },
        context=context,
    )

    assert result["turnStatus"] == "answered"
    assert [(m["action"], m["title"]) for m in result["modifiedTasks"]] == [
        ("created", "buy groceries"),
        ("created", "do laundry"),
        ("completed", "Call Mom"),
    ]
    scope = TurnScope(conversation_id=result["conversationId"], turn_id="saturday")
    async with database.session() as session:
        alice = await TaskRepository(session, "alice").find()
        bob = await TaskRepository(session, "bob").find()
        todos = await TurnTodoRepository(session).find_by_turn(scope)
        audit = await ToolAuditRepository(session).for_turn(scope.conversation_id, "saturday")
    assert sorted((t.title, t.completed) for t in alice) == [
        ("Call Mom", True),
        ("buy groceries", False),
        ("do laundry", False),
    ]
    assert [(t.title, t.completed) for t in bob] == [("buy groceries", False)]
    assert [(t.title, t.status) for t in todos] == [(title, "completed") for title in STEPS]
    assert [(a.tool_name, a.status, a.user_id) for a in audit] == [
        ("add_task", "success", "alice"),
        ("add_task", "success", "alice"),
        ("complete_task", "success", "alice"),
        ("list_tasks", "success", "alice"),
    ]
    listing = next(m for m in result["messages"] if getattr(m, "name", None) == "list_tasks")
    assert "buy groceries" in str(listing.content) and "Call Mom" not in str(listing.content)


async def test_a_new_turn_starts_with_an_empty_modified_tasks_list(database: Database) -> None:
    model = ScriptedChatModel(
        script=[
            ai(tool_call("add_task", title="one")),
            AIMessage(content="added"),
            AIMessage(content="nothing to do"),
        ]
    )
    graph = build_graph(model, database=database, checkpointer=InMemorySaver())
    config: RunnableConfig = {"configurable": {"thread_id": "t"}}
    first = await graph.ainvoke({"messages": [HumanMessage(content="add one")]}, config)
    assert [m["title"] for m in first["modifiedTasks"]] == ["one"]
    second = await graph.ainvoke({"messages": [HumanMessage(content="thanks")]}, config)
    assert second["modifiedTasks"] == []
