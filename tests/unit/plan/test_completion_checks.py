"""Verified completion (issue 29 §1, §2): every row keeps the tool calls made while it was in
progress, and a completion check can keep a row open until the real work was done."""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langchain_core.tools import tool
from sqlalchemy import text

from agent.context import Context
from agent.errors import ErrorCode, ToolFailure
from agent.graph import build_graph
from agent.turn import record_call as record_path
from agent.turn.evidence import todo_evidence
from storage import Database
from tests.fakes import (
    act,
    answer_with,
    close_row,
    plan_items,
    scripted_turn,
    tool_call,
    tool_results,
)

RECORDED: list[str] = []


@tool
def record(note: str) -> str:
    """Record a note (the real work of these tests)."""
    RECORDED.append(note)
    return json.dumps({"recorded": note})


@tool
def broken(note: str) -> str:
    """A tool that fails the way a tool the model misused does."""
    raise ToolFailure(ErrorCode.VALIDATION_ERROR, f"cannot take {note!r}", "Use record instead.")


@pytest.fixture(autouse=True)
def _clear_recorded() -> None:
    RECORDED.clear()


async def run(graph: Any, context: Context | None = None) -> dict[str, Any]:
    result: dict[str, Any] = await graph.ainvoke(
        {"messages": [HumanMessage(content="Record the note 'milk'.")]},
        context=context or Context(),
    )
    return result


def recorded_for_real(row: dict[str, Any], evidence: list[dict[str, Any]]) -> str | None:
    """The check a user would write: no close until ``record`` ran without error."""
    if any(call["tool"] == "record" and not call["isError"] for call in evidence):
        return None
    return f"'{row['title']}' claims '{row['outcome']}' but record was never called"


async def recorded_for_real_async(
    row: dict[str, Any], evidence: list[dict[str, Any]]
) -> str | None:
    return recorded_for_real(row, evidence)


@pytest.mark.parametrize("check", [recorded_for_real, recorded_for_real_async])
async def test_a_check_refuses_the_close_until_the_real_tool_was_called(
    database: Database, check: Any
) -> None:
    model = scripted_turn(
        database,
        plan_items({"title": "Record milk"}),
        close_row(outcome="recorded milk"),  # too early: nothing was done
        act(tool_call("record", note="milk")),
        close_row(outcome="recorded milk"),
        answer_with(),
    )
    graph = build_graph(
        model,
        tools=[record],
        database=database,
        include_default_tools=False,
        completion_checks={"*": check},
    )

    result = await run(graph)

    closes = tool_results(result, "complete_todo")
    refused = json.loads(str(closes[0].content))
    assert closes[0].status == "error"
    assert refused["error"] == "COMPLETION_REFUSED"
    assert "record was never called" in refused["message"]
    assert refused["reason"] == "'Record milk' claims 'recorded milk' but record was never called"
    assert json.loads(str(closes[1].content))["status"] == "completed"
    assert RECORDED == ["milk"]
    assert result["turnStatus"] == "answered"
    assert result["toolErrors"] == 0  # a refusal is the model's to act on, not an operator fault
    (row,) = result["todos"]
    assert row["status"] == "completed"
    assert row["evidence"] == {"calls": 1, "errors": 0, "tools": ["record"]}


async def test_checks_follow_the_agent_type_and_cancelling_is_never_checked(
    database: Database,
) -> None:
    seen: list[str] = []

    def only_research(row: dict[str, Any], evidence: list[dict[str, Any]]) -> str | None:
        seen.append(row["title"])
        return "no sources cited"

    model = scripted_turn(
        database,
        plan_items({"title": "Chat"}, {"title": "Research", "agentType": "research"}),
        close_row(0),  # no check for rows without that agentType
        close_row(1),
        close_row(1, outcome="could not find sources", status="cancelled"),
        answer_with(),
    )
    graph = build_graph(
        model,
        tools=[record],
        database=database,
        include_default_tools=False,
        completion_checks={"research": only_research},
    )

    result = await run(graph)

    assert seen == ["Research"]
    assert [row["status"] for row in result["todos"]] == ["completed", "cancelled"]


async def test_a_check_that_raises_is_an_operator_fault_and_the_row_stays_open(
    database: Database, caplog: pytest.LogCaptureFixture
) -> None:
    def crashing(row: dict[str, Any], evidence: list[dict[str, Any]]) -> str | None:
        raise KeyError("rubric")

    model = scripted_turn(
        database,
        plan_items({"title": "Record milk"}),
        act(tool_call("record", note="milk")),
        close_row(),
        close_row(outcome="could not be verified", status="cancelled"),
        answer_with("I recorded milk, but the check that verifies it is broken."),
    )
    graph = build_graph(
        model,
        tools=[record],
        database=database,
        include_default_tools=False,
        completion_checks={"*": crashing},
    )

    result = await run(graph)

    closes = tool_results(result, "complete_todo")
    failed = json.loads(str(closes[0].content))
    assert failed["error"] == "COMPLETION_CHECK_FAILED"
    assert "crashing" in failed["message"] and "KeyError" in failed["message"]
    assert result["toolErrors"] == 1
    assert result["todos"][0]["status"] == "cancelled"
    assert "completion check 'crashing' raised" in caplog.text


async def test_evidence_is_shared_by_a_stage_and_shown_in_list_todo_and_state(
    database: Database,
) -> None:
    model = scripted_turn(
        database,
        plan_items({"title": "Milk", "order": 1}, {"title": "Eggs", "order": 1}, {"title": "Tidy"}),
        act(tool_call("record", note="milk"), tool_call("broken", note="eggs")),
        act(tool_call("record", note="eggs")),
        close_row(0),
        close_row(1),
        act(tool_call("list_todo", status="all")),
        close_row(2),
        answer_with(),
    )
    graph = build_graph(
        model, tools=[record, broken], database=database, include_default_tools=False
    )

    result = await run(graph)

    milk, eggs, tidy = result["todos"]
    stage = {"calls": 3, "errors": 1, "tools": ["record", "broken"]}
    assert milk["evidence"] == stage and eggs["evidence"] == stage
    assert tidy["evidence"] == {"calls": 0, "errors": 0, "tools": []}
    listed = tool_results(result, "list_todo")
    items = json.loads(str(listed[0].content))["items"]
    assert [item["evidence"] for item in items] == [stage, stage, tidy["evidence"]]

    full = await todo_evidence(database, result["conversationId"], eggs["id"])
    calls = [(call["tool"], call["args"], call["isError"]) for call in full]
    # The first message's two calls run side by side: evidence keeps the order they returned.
    assert sorted(calls[:2], key=repr) == [
        ("broken", {"note": "eggs"}, True),
        ("record", {"note": "milk"}, False),
    ]
    assert calls[2] == ("record", {"note": "eggs"}, False)
    by_tool = {call["tool"]: json.loads(call["result"]) for call in full[:2]}
    assert by_tool["record"] == {"recorded": "milk"}
    assert by_tool["broken"]["error"] == "VALIDATION_ERROR"
    assert all(call["at"] for call in full)
    assert await todo_evidence(database, "another conversation", eggs["id"]) == []


async def test_a_call_that_is_recorded_writes_its_evidence_with_its_record_once(
    database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A task tool's evidence commits with its change and a free tool's with its record: no
    transaction of their own (issue 26's overhead), yet every row in progress has each once."""
    alone: list[str] = []
    original = record_path.record_call

    async def counted(*args: Any, **kwargs: Any) -> Any:
        alone.append(args[3])
        return await original(*args, **kwargs)

    monkeypatch.setattr(record_path, "record_call", counted)
    model = scripted_turn(
        database,
        plan_items({"title": "Milk", "order": 1}, {"title": "Eggs", "order": 1}),
        act(tool_call("add_task", title="milk"), tool_call("record", note="eggs")),
        act(tool_call("list_tasks")),
        close_row(0),
        close_row(1),
        answer_with(),
    )
    graph = build_graph(model, tools=[record], database=database)

    result = await run(graph)

    assert alone == ["list_tasks"]  # a read has no record to go with
    # add_task and record run side by side: either may return first.
    for row in result["todos"]:
        summary = row["evidence"]
        assert (summary["calls"], summary["errors"]) == (3, 0)
        assert sorted(summary["tools"][:2]) == ["add_task", "record"]
        assert summary["tools"][2] == "list_tasks"
        full = await todo_evidence(database, result["conversationId"], row["id"])
        assert sorted(call["tool"] for call in full[:2]) == ["add_task", "record"]
        assert full[2]["tool"] == "list_tasks"
        assert {"recorded": "eggs"} in [json.loads(call["result"]) for call in full[:2]]
    async with database.session(readonly=True) as session:
        recorded = (await session.execute(text("SELECT toolName FROM tool_results"))).scalars()
        assert {"add_task", "record"} <= set(recorded)
