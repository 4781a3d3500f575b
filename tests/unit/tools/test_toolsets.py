"""``Context.toolsets``: a run binds the built-in toolsets it names, with their prompt sections
and only theirs; a tool outside the run's selection is refused; an unknown name is refused with
the valid ones."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from agent.context import BUILTIN_TOOLSETS, Context
from agent.graph import build_graph
from storage import Database
from storage.repositories.tasks import TaskRepository
from tests.fakes import PlanOracle, ScriptedChatModel, tool_call

PERSONAL_TOOLS = {"add_task", "list_tasks", "complete_task", "update_task", "delete_task"}
CONVERSATION_TOOLS = {"ListTasks", "AddTask", "CompleteTask", "UncompleteTask", "DeleteTask"}
TODO_TOOLS = {"create_todo", "complete_todo", "ask_user"}
"""The plan tools a turn of one item is offered (``list_todo`` only for plans of several
stages: tests/unit/test_stable_prompt_prefix.py)."""


def adds(title: str) -> dict[str, Any]:
    return tool_call("add_task", title=title)


async def run(database: Database, toolsets: list[str] | None) -> tuple[ScriptedChatModel, Any]:
    model = ScriptedChatModel(responder=PlanOracle(["bread"], adds))
    graph = build_graph(model, database=database)
    context = Context() if toolsets is None else Context(toolsets=toolsets)
    result = await graph.ainvoke(
        {"messages": [HumanMessage(content="add bread to my tasks")]}, context=context
    )
    return model, result


async def test_by_default_a_run_binds_the_personal_tasks_and_their_prompt(
    database: Database,
) -> None:
    model, result = await run(database, None)

    assert set(model.offered_tool_names) == TODO_TOOLS | PERSONAL_TOOLS
    assert "## Personal tasks" in model.system_prompt(0)
    assert [m["title"] for m in result["modifiedTasks"]] == ["bread"]


async def test_a_run_without_toolsets_binds_only_the_plan_tools_and_refuses_the_others(
    database: Database,
) -> None:
    model, result = await run(database, [])

    assert set(model.offered_tool_names) == TODO_TOOLS
    assert "## Personal tasks" not in model.system_prompt(0)
    (refusal,) = [
        m for m in result["messages"] if isinstance(m, ToolMessage) and m.name == "add_task"
    ]
    envelope = json.loads(str(refusal.content))
    assert envelope["error"] == "VALIDATION_ERROR"
    assert "no tool 'add_task' in this run" in envelope["message"]
    assert "create_todo" in envelope["suggestion"]
    async with database.session() as session:
        assert await TaskRepository(session, "local-user").find() == []


async def test_the_conversation_task_list_alone_has_its_tools_and_prompt_only(
    database: Database,
) -> None:
    model, _ = await run(database, ["conversation_tasks"])

    assert set(model.offered_tool_names) == TODO_TOOLS | CONVERSATION_TOOLS
    prompt = model.system_prompt(0)
    assert "ListTasks" in prompt and "## Personal tasks" not in prompt


async def test_both_toolsets_bind_in_a_fixed_order_whatever_order_they_are_named(
    database: Database,
) -> None:
    model, _ = await run(database, ["conversation_tasks", "personal_tasks"])
    names = model.offered_tool_names
    assert set(names) == TODO_TOOLS | PERSONAL_TOOLS | CONVERSATION_TOOLS
    assert names.index("add_task") < names.index("AddTask")


@pytest.mark.parametrize("value", [["personal_task"], "personal_tasks", [1]])
async def test_an_unknown_toolset_fails_the_run_naming_the_valid_ones(
    database: Database, value: Any
) -> None:
    model = ScriptedChatModel()
    graph = build_graph(model, database=database, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    with pytest.raises(ValueError, match="Valid names: personal_tasks, conversation_tasks"):
        await graph.ainvoke(
            {"messages": [HumanMessage(content="hi")]}, config, context={"toolsets": value}
        )
    assert model.calls == 0
    assert (await graph.aget_state(config)).values == {}


def test_the_context_form_offers_the_toolset_names() -> None:
    graph = build_graph(ScriptedChatModel(), database=Database("sqlite+aiosqlite://"))
    prop = graph.get_context_jsonschema()["properties"]["toolsets"]
    assert prop["type"] == "array"
    assert prop["items"]["enum"] == list(BUILTIN_TOOLSETS)
    assert prop["default"] == ["personal_tasks"]


async def test_a_turn_keeps_the_conversation_task_list_in_its_json_file(
    database: Database, tmp_path: Path
) -> None:
    conversation = uuid.uuid4()
    model = ScriptedChatModel(
        responder=PlanOracle(
            ["Add bread", "Show the list"],
            lambda title: (
                tool_call("AddTask", title="bread", description="wholemeal")
                if title == "Add bread"
                else tool_call("ListTasks")
            ),
        )
    )
    graph = build_graph(model, database=database)

    result = await graph.ainvoke(
        {"messages": [HumanMessage(content="put bread on this conversation's list")]},
        context=Context(toolsets=["conversation_tasks"], conversation_id=str(conversation)),
    )

    assert result["turnStatus"] == "answered"
    file = tmp_path / ".agents" / "tasks" / f"{conversation.hex}.json"
    tasks = json.loads(file.read_text())["tasks"]
    assert tasks == [{"id": "1", "title": "bread", "description": "wholemeal", "done": False}]
    (listed,) = [
        m for m in result["messages"] if isinstance(m, ToolMessage) and m.name == "ListTasks"
    ]
    assert json.loads(str(listed.content)) == {"tasks": tasks}
    assert result["modifiedTasks"] == []  # seed 003's record is of the personal tasks only
