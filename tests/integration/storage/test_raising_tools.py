"""A tool that raises (issue 40 §4): the exception comes back to the model as the call's error
result (``TOOL_ERROR``, ``status="error"``) instead of crashing the run, recorded as evidence of
the row in progress and in the call ledger, so a resumed run does not run it again. Both
profiles; SQLite and PostgreSQL (the ledger and the evidence are written on each)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command, interrupt
from pydantic import BaseModel, ValidationError
from sqlalchemy import select

from agent.context import Context
from agent.graph import build_graph
from storage import Database
from storage.models import ToolResult
from tests.conftest import BOTH_BACKENDS
from tests.fakes import ScriptedChatModel, ai, plan_rows, plan_view, tool_call, tool_results

pytestmark = BOTH_BACKENDS

RUNS: list[str] = []


@tool
async def print_report(title: str) -> str:
    """Print a report (the printer is on fire in these tests)."""
    RUNS.append(title)
    raise RuntimeError("printer on fire")


print_report.metadata = {"turnplan_request_verbs": ["print"]}


def cancels_what_failed(messages: list[BaseMessage]) -> AIMessage:
    """Plans one item and prints; on the printer's error, cancels the item saying why."""
    rows = plan_rows(plan_view(messages))
    if not rows:
        return ai(
            tool_call("create_todo", items=[{"title": "Print the report"}]),
            tool_call("print_report", title="the report"),
        )
    current = next((row for row in rows if row.mark == ">"), None)
    if current is None:
        return AIMessage(content="I could not print it.")
    failed = next(m for m in reversed(messages) if isinstance(m, ToolMessage))
    reason = json.loads(str(failed.content))["message"]
    return ai(tool_call("complete_todo", todoId=current.id, outcome=reason, status="cancelled"))


async def ledger_of(database: Database, tool_name: str) -> list[str]:
    async with database.session(readonly=True) as session:
        found = await session.scalars(select(ToolResult).where(ToolResult.toolName == tool_name))
        return [row.content for row in found]


async def test_the_error_reaches_the_model_which_cancels_the_row_and_the_turn_is_incomplete(
    database: Database,
) -> None:
    RUNS.clear()
    model = ScriptedChatModel(responder=cancels_what_failed)
    graph: Any = build_graph(
        model, tools=[print_report], database=database, include_default_tools=False
    )

    result = await graph.ainvoke(
        {"messages": [HumanMessage(content="print the report")]}, context=Context()
    )

    (failed,) = tool_results(result, "print_report")
    assert failed.status == "error"
    envelope = json.loads(str(failed.content))
    assert envelope["error"] == "TOOL_ERROR"
    assert envelope["message"] == "print_report raised RuntimeError: printer on fire"
    assert result["turnStatus"] == "incomplete"
    assert result["toolErrors"] == 1
    (row,) = result["todos"]
    assert (row["status"], row["cancelledBy"]) == ("cancelled", "agent")
    assert row["evidence"] == {"calls": 1, "errors": 1, "tools": ["print_report"]}
    assert "printer on fire" in str(result["messages"][-1].content)
    assert [json.loads(c)["error"] for c in await ledger_of(database, "print_report")] == [
        "TOOL_ERROR"
    ]
    assert RUNS == ["the report"]


async def test_a_resumed_run_replays_the_error_instead_of_running_the_tool_again(
    database: Database,
) -> None:
    RUNS.clear()
    model = ScriptedChatModel(
        script=[
            ai(
                tool_call("print_report", title="the report"),
                tool_call("ask_user", question="Print it in colour?"),
            ),
            AIMessage(content="The printer failed; nothing was printed."),
        ]
    )
    graph: Any = build_graph(
        model,
        tools=[print_report],
        database=database,
        include_default_tools=False,
        checkpointer=InMemorySaver(),
    )
    config: Any = {"configurable": {"thread_id": "raised"}}

    paused = await graph.ainvoke({"messages": [HumanMessage(content="print it")]}, config)
    assert paused["__interrupt__"]  # the question stops the tools step after the tool raised
    done = await graph.ainvoke(Command(resume="yes"), config)

    assert RUNS == ["the report"]  # the resumed tools step did not run it a second time
    (failed,) = tool_results(done, "print_report")
    assert failed.status == "error" and '"TOOL_ERROR"' in str(failed.content)
    # The model's words stay first; the failed print nothing made good ends the turn incomplete.
    answer = str(done["messages"][-1].content)
    assert answer.startswith("The printer failed; nothing was printed.")
    assert "Not done" in answer and "print_report" in answer
    assert done["turnStatus"] == "incomplete"


async def test_compact_a_direct_action_that_raised_ends_incomplete_saying_so(
    database: Database,
) -> None:
    RUNS.clear()
    model = ScriptedChatModel(script=[])  # the user's words fix the call: no model call
    graph: Any = build_graph(
        model, tools=[print_report], database=database, include_default_tools=False
    )

    result = await graph.ainvoke(
        {"messages": [HumanMessage(content="print 'the report'")]},
        context=Context(prompt_profile="compact"),
    )

    assert RUNS == ["the report"]
    assert result["turnStatus"] == "incomplete"
    assert str(result["messages"][-1].content) == (
        "Not done: print_report failed: print_report raised RuntimeError: printer on fire"
    )


class Confirmation(BaseModel):
    ok: bool


@tool
async def send_invoice(amount: int) -> str:
    """Send an invoice, once the user confirms it."""
    answer = interrupt({"confirm": amount}, response_schema=Confirmation)
    if not answer.ok:
        raise PermissionError("the user declined")
    return "sent"


async def test_interrupts_and_refused_resumes_pass_through_and_a_later_raise_is_a_result(
    database: Database,
) -> None:
    model = ScriptedChatModel(
        script=[
            ai(tool_call("send_invoice", amount=40)),
            AIMessage(content="The invoice was not sent: you declined."),
        ]
    )
    graph: Any = build_graph(
        model,
        tools=[send_invoice],
        database=database,
        include_default_tools=False,
        checkpointer=InMemorySaver(),
    )
    config: Any = {"configurable": {"thread_id": "invoice"}}

    paused = await graph.ainvoke({"messages": [HumanMessage(content="invoice 40")]}, config)
    assert paused["__interrupt__"][0].value == {"confirm": 40}
    with pytest.raises(ValidationError):  # not the model's to fix: the resume is refused
        await graph.ainvoke(Command(resume={"ok": "perhaps"}), config)
    assert (await graph.aget_state(config)).interrupts  # still waiting for a valid answer

    done = await graph.ainvoke(Command(resume={"ok": False}), config)

    (declined,) = tool_results(done, "send_invoice")
    assert declined.status == "error"
    assert "PermissionError: the user declined" in str(declined.content)
    answer = str(done["messages"][-1].content)
    assert answer.startswith("The invoice was not sent: you declined.")
    assert "Not done" in answer and "send_invoice" in answer
    assert done["turnStatus"] == "incomplete"
