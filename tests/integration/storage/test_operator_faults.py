"""Failures an operator must see: tool failures that are not the model's doing are logged with
the conversation and turn, and a turn that answered after one says so in its output."""

from __future__ import annotations

import logging

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool

from agent.context import Context
from agent.errors import ErrorCode, ToolFailure
from agent.graph import build_graph
from storage import Database
from tests.conftest import BOTH_BACKENDS
from tests.fakes import ScriptedChatModel, ai, tool_call

pytestmark = BOTH_BACKENDS


@tool
async def save_note(note: str) -> str:
    """Save a note (its store is down in these tests)."""
    raise ToolFailure(ErrorCode.DATABASE_ERROR, "database is locked", "Try again later.")


@tool
async def buggy(note: str) -> str:
    """A tool with a bug."""
    raise KeyError("missing")


@tool
async def picky(note: str) -> str:
    """A tool that refuses bad input (the model's fault)."""
    raise ToolFailure(ErrorCode.VALIDATION_ERROR, "note is too short", "Write more.")


async def test_a_turn_that_answers_after_a_database_failure_counts_it_and_logs_it(
    database: Database, caplog: pytest.LogCaptureFixture
) -> None:
    model = ScriptedChatModel(
        script=[ai(tool_call("save_note", note="x")), AIMessage(content="All done.")]
    )
    graph = build_graph(model, tools=[save_note], database=database, include_default_tools=False)
    with caplog.at_level(logging.WARNING, logger="agent.tools"):
        result = await graph.ainvoke(
            {"messages": [HumanMessage(content="save x", id="turn-1")]},
            context=Context(conversation_id="conv-9"),
        )
    # "All done." after a save that failed and was never made good is not an answer.
    assert result["turnStatus"] == "incomplete"
    assert result["toolErrors"] == 1
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    text = warnings[0].getMessage()
    assert "DATABASE_ERROR" in text and "conv-9" in text and "turn-1" in text


async def test_the_models_own_mistakes_are_not_operator_faults(
    database: Database, caplog: pytest.LogCaptureFixture
) -> None:
    model = ScriptedChatModel(
        script=[ai(tool_call("picky", note="x")), AIMessage(content="Sorry, too short.")]
    )
    graph = build_graph(model, tools=[picky], database=database, include_default_tools=False)
    with caplog.at_level(logging.WARNING, logger="agent.tools"):
        result = await graph.ainvoke({"messages": [HumanMessage(content="note x")]})
    assert result["turnStatus"] == "incomplete"  # the note was not saved, and the answer says so
    assert "Not done" in str(result["messages"][-1].content)
    assert result["toolErrors"] == 0
    assert not [r for r in caplog.records if r.name == "agent.tools"]


async def test_a_tool_bug_is_logged_with_the_turn_and_raises_when_asked_to(
    database: Database, caplog: pytest.LogCaptureFixture
) -> None:
    model = ScriptedChatModel(script=[ai(tool_call("buggy", note="x"))])
    graph = build_graph(model, tools=[buggy], database=database, include_default_tools=False)
    with caplog.at_level(logging.WARNING, logger="agent.tools"), pytest.raises(KeyError):
        await graph.ainvoke(
            {"messages": [HumanMessage(content="go", id="turn-b")]},
            context=Context(conversation_id="conv-b", handle_tool_errors=False),
        )
    (record,) = [r for r in caplog.records if r.name == "agent.tools"]
    assert "buggy" in record.getMessage() and "conv-b" in record.getMessage()
    assert record.exc_info is not None


async def test_a_new_turn_starts_with_no_tool_errors(database: Database) -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    model = ScriptedChatModel(
        script=[
            ai(tool_call("save_note", note="x")),
            AIMessage(content="Could not save."),
            AIMessage(content="Hello!"),
        ]
    )
    graph = build_graph(
        model,
        tools=[save_note],
        database=database,
        include_default_tools=False,
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "t"}}
    first = await graph.ainvoke({"messages": [HumanMessage(content="save x")]}, config)
    second = await graph.ainvoke({"messages": [HumanMessage(content="hi")]}, config)
    assert (first["toolErrors"], second["toolErrors"]) == (1, 0)


async def test_a_turn_whose_model_fails_after_a_database_failure_still_counts_it(
    database: Database,
) -> None:
    """The model step after the tool round counts it: a turn that ends there, without the
    answer ``drain`` judges, still reports the fault."""
    model = ScriptedChatModel(
        script=[ai(tool_call("save_note", note="x")), RuntimeError("model down")]
    )
    graph = build_graph(model, tools=[save_note], database=database, include_default_tools=False)
    result = await graph.ainvoke({"messages": [HumanMessage(content="save x")]}, context=Context())
    assert result["turnStatus"] == "failed"
    assert result["toolErrors"] == 1
