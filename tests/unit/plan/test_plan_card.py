"""The plan where UIs look for it (issue 28 §2): ``values.todos`` in deep-agents-ui's shape too,
and one generative-UI plan card per turn that moves with the plan."""

from __future__ import annotations

import json
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from agent.context import Context
from agent.graph import build_graph
from storage import Database
from tests.fakes import PlanOracle, ScriptedChatModel, tool_call


@tool
def record(note: str) -> str:
    """Record a note (the domain action of these tests)."""
    return json.dumps({"recorded": note})


def action(title: str) -> dict[str, Any]:
    return tool_call("record", note=title)


def make_graph(model: ScriptedChatModel, database: Database, **kwargs: Any) -> Any:
    return build_graph(
        model, tools=[record], database=database, include_default_tools=False, **kwargs
    )


async def test_todos_carry_deep_agents_ui_shape_next_to_seed_004_fields(
    database: Database,
) -> None:
    model = ScriptedChatModel(responder=PlanOracle(["wash car", "buy milk"], action))
    result = await make_graph(model, database).ainvoke(
        {"messages": [HumanMessage(content="wash car, buy milk")]}, context=Context()
    )
    assert [(t["content"], t["status"]) for t in result["todos"]] == [
        ("wash car", "completed"),
        ("buy milk", "completed"),
    ]
    first = result["todos"][0]
    assert first["title"] == "wash car" and first["id"] and first["outcome"] == "did wash car"


async def test_one_plan_card_per_turn_follows_the_plan_to_the_end(database: Database) -> None:
    model = ScriptedChatModel(responder=PlanOracle(["a", "b"], action))
    graph = make_graph(model, database, checkpointer=InMemorySaver())
    thread = {"configurable": {"thread_id": "t1"}}
    pushed: list[dict[str, Any]] = []
    final: dict[str, Any] = {}
    async for mode, chunk in graph.astream(
        {"messages": [HumanMessage(content="a, b")]},
        thread,
        context=Context(),
        stream_mode=["custom", "values"],
    ):
        assert mode == "values" or chunk["type"] == "turnplan.todo"  # the custom stream as it was
        if mode == "values":
            final = chunk
            if chunk.get("ui") and chunk["ui"][-1] not in pushed:
                pushed.append(chunk["ui"][-1])
    live = [[(t["content"], t["status"]) for t in card["props"]["todos"]] for card in pushed]
    assert live[0] == [("a", "in_progress"), ("b", "pending")]
    assert live[-1] == [("a", "completed"), ("b", "completed")]
    assert {card["id"] for card in pushed} == {f"plan:{final['turnId']}"}
    (card,) = final["ui"]  # replaced in place, not one card per change
    assert card["name"] == "plan"
    assert card["props"]["turnStatus"] == "answered" and card["props"]["llmCalls"] == 4
    # Anchored to the turn's newest AI message, where agent-chat-ui renders it.
    assert card["metadata"]["message_id"] == final["messages"][-1].id

    # A turn without a plan adds no card; the first turn's stays as that turn left it.
    model.responder = lambda messages: AIMessage(content="You're welcome")
    second = await graph.ainvoke(
        {"messages": [HumanMessage(content="thanks")]}, thread, context=Context()
    )
    assert second["ui"] == [card]


async def test_list_todo_results_keep_seed_004_shape(database: Database) -> None:
    """The model never pays for the UI field: ``list_todo`` items have no ``content``."""

    def respond(messages: list[Any]) -> AIMessage:
        if not any(isinstance(m, ToolMessage) for m in messages):
            return AIMessage(
                content="",
                tool_calls=[
                    {"name": "create_todo", "args": {"items": [{"title": "x"}]}, "id": "c1"},
                    {"name": "list_todo", "args": {}, "id": "c2"},
                ],
            )
        return AIMessage(content="stopping")

    model = ScriptedChatModel(responder=respond)
    result = await make_graph(model, database).ainvoke(
        {"messages": [HumanMessage(content="x")]}, context=Context(max_reminders=0)
    )
    listed = next(
        m for m in result["messages"] if isinstance(m, ToolMessage) and m.tool_call_id == "c2"
    )
    items = json.loads(str(listed.content))["items"]
    assert items and "content" not in items[0] and items[0]["title"] == "x"
