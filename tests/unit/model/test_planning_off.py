"""``Context.planning="off"``: the same graph without the plan tools, for the evaluation's
``turnplan-off`` system. Full profile: no plan tool (nor ``delegate``) is bound and the system
prompt has no planning section; compact profile: a forced ``use_tool`` over the domain tools and
``answer``, the way to finish."""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain_core.messages import HumanMessage

from agent.context import Context
from agent.graph import build_graph
from agent.tool_names import TODO_TOOL_NAMES
from bench.wire import Body, InstantChatModel, calls_of
from prompts import load_prompt
from storage import Database
from tests.scripted_openai import Reply, text, tool_calls

REQUEST = "Add 'call mom' and 'buy milk' to my tasks."


def tool_names(body: Body) -> set[str]:
    return {tool["function"]["name"] for tool in body.get("tools") or []}


def acted(body: Body) -> int:
    """Tool calls made since the request (a reminder or note after it is no new request)."""
    messages = body["messages"]
    start = next(i for i, m in enumerate(messages) if REQUEST in str(m.get("content")))
    return sum(len(calls_of(m)) for m in messages[start:] if m.get("role") == "assistant")


def full_oracle(body: Body) -> Reply:
    """Adds both tasks, one per call, then answers."""
    titles = ["call mom", "buy milk"]
    done = acted(body)
    return tool_calls(("add_task", {"title": titles[done]})) if done < 2 else text("Added both.")


def compact_oracle(body: Body) -> Reply:
    """The same through the compact profile's one dispatch function."""
    titles = ["call mom", "buy milk"]
    done = acted(body)
    if done < 2:
        call = {"name": "add_task", "arguments": {"title": titles[done]}}
    else:
        call = {"name": "answer", "arguments": {"text": "Added both."}}
    return tool_calls(("use_tool", call))


async def run(database: Database, oracle: Any, context: Context) -> tuple[dict[str, Any], Any]:
    model = InstantChatModel(oracle=oracle, keep_bodies=True)
    graph = build_graph(model, database=database)
    state = await graph.ainvoke({"messages": [HumanMessage(content=REQUEST)]}, context=context)
    return state, model


async def task_titles(database: Database) -> list[str]:
    from storage.repositories import TaskRepository

    async with database.session(readonly=True) as session:
        return [task.title for task in await TaskRepository(session, "local-user").find()]


async def test_full_profile_off_binds_no_plan_tool_and_asks_for_no_plan(
    database: Database,
) -> None:
    state, model = await run(database, full_oracle, Context(planning="off"))
    assert state["messages"][-1].content == "Added both."
    assert await task_titles(database) == ["call mom", "buy milk"]
    assert len(model.bodies) == 3
    for body in model.bodies:
        assert "add_task" in tool_names(body)
        assert not tool_names(body) & (TODO_TOOL_NAMES | {"delegate"})
        system = body["messages"][0]["content"]
        assert "create_todo" not in system and "Task planning" not in system


async def test_full_profile_auto_still_offers_create_todo(database: Database) -> None:
    """The contrast that makes the test above able to fail."""
    _, model = await run(database, full_oracle, Context(planning="auto"))
    assert "create_todo" in tool_names(model.bodies[0])
    assert "Task planning" in model.bodies[0]["messages"][0]["content"]


async def test_compact_profile_off_dispatches_domain_tools_and_finishes_with_answer(
    database: Database,
) -> None:
    state, model = await run(
        database, compact_oracle, Context(planning="off", prompt_profile="compact")
    )
    assert state["messages"][-1].content == "Added both."
    assert not state["messages"][-1].tool_calls
    assert await task_titles(database) == ["call mom", "buy milk"]
    for body in model.bodies:
        assert tool_names(body) == {"use_tool"}
        variants = body["tools"][0]["function"]["parameters"]["anyOf"]
        offered = {variant["properties"]["name"]["const"] for variant in variants}
        assert "add_task" in offered and "answer" in offered
        assert not offered & (TODO_TOOL_NAMES | {"ask_user", "delegate"})
        system = body["messages"][0]["content"]
        assert system == load_prompt("compact_no_plan")
        assert "to plan" not in system.lower() and "call answer" in system
    add = next(v for v in variants if v["properties"]["name"]["const"] == "add_task")
    # Free text is held to the request's quoted phrases, as the planned act step does.
    assert add["properties"]["arguments"]["properties"]["title"] == {
        "enum": ["call mom", "buy milk"]
    }


def test_context_accepts_off_and_names_the_three_choices_otherwise() -> None:
    assert Context(planning="off").planning == "off"
    with pytest.raises(ValueError, match="'auto', 'always' or 'off'"):
        Context(planning="never")  # type: ignore[arg-type]
    schema = json.dumps(Context.__dataclass_fields__["planning"].metadata["description"])
    assert "off:" in schema
