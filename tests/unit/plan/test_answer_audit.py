"""``Context.audit_model`` (issue 29 §3): before a planned turn ends answered, a second model
reads the request, the rows with their outcomes and evidence, and the draft answer; what it finds
missing sends the supervisor back once, and what is still missing ends the turn ``incomplete``
with an answer that names it. The supervisor is a scripted chat model; the audit model is the
real ``ChatOpenAI`` against the scripted OpenAI server, built from an ``openai:`` string."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from agent.app.cli import run_exit_status, why_not_answered
from agent.calls.answer_audit import parse_audit
from agent.context import Context
from agent.graph import build_graph
from agent.turn.identity import REMINDER_NAME
from storage import Database
from tests.fakes import (
    RECORDED_NOTES,
    act,
    answer_with,
    close_row,
    record,
    scripted_turn,
    tool_call,
)
from tests.scripted_openai import ScriptedOpenAIServer, server_error, text

pytestmark = pytest.mark.usefixtures("isolated_model_env", "recorded_notes")

REQUEST = "Record the notes 'milk' and 'eggs'."


@pytest.fixture
def auditor(
    scripted_openai: ScriptedOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> ScriptedOpenAIServer:
    """The scripted server as the ``openai:`` endpoint the audit model is built for."""
    monkeypatch.setenv("OPENAI_BASE_URL", scripted_openai.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    return scripted_openai


def milk_only(database: Database, *more: Any) -> Any:
    """A supervisor that plans and records milk alone, answers as if both were done, then
    plays ``more``."""
    return scripted_turn(
        database,
        act(tool_call("create_todo", items=[{"title": "Record milk"}])),
        act(tool_call("record", note="milk")),
        close_row(outcome="recorded milk"),
        answer_with("Recorded milk and eggs."),
        *more,
    )


async def run(database: Database, model: Any, context: Context) -> dict[str, Any]:
    graph = build_graph(model, tools=[record], database=database, include_default_tools=False)
    result: dict[str, Any] = await graph.ainvoke(
        {"messages": [HumanMessage(content=REQUEST)]}, context=context
    )
    return result


def audit_prompts(server: ScriptedOpenAIServer) -> list[str]:
    return [str(request["messages"][-1]["content"]) for request in server.requests]


def reminders(result: dict[str, Any]) -> list[str]:
    return [
        str(m.content)
        for m in result["messages"]
        if isinstance(m, HumanMessage) and m.name == REMINDER_NAME
    ]


async def test_a_missing_part_sends_the_supervisor_back_and_the_fixed_answer_is_answered(
    database: Database, auditor: ScriptedOpenAIServer
) -> None:
    auditor.reply(text("- missing: record the note 'eggs'"), text("OK"))
    model = milk_only(
        database,
        act(tool_call("create_todo", items=[{"title": "Record eggs"}])),
        act(tool_call("record", note="eggs")),
        close_row(1, outcome="recorded eggs"),
        answer_with("Recorded milk and eggs."),
    )

    result = await run(database, model, Context(audit_model="openai:auditor"))

    assert result["turnStatus"] == "answered"
    assert RECORDED_NOTES == ["milk", "eggs"]
    assert [todo["status"] for todo in result["todos"]] == ["completed", "completed"]
    (sent_back,) = reminders(result)
    assert "record the note 'eggs'" in sent_back
    # The auditor saw the request, each row with its outcome and evidence, and the draft.
    first, second = audit_prompts(auditor)
    assert REQUEST in first and "Recorded milk and eggs." in first
    assert "[completed] Record milk: recorded milk" in first and "record" in first
    assert "Record eggs" not in first and "[completed] Record eggs: recorded eggs" in second
    assert all(request["model"] == "auditor" for request in auditor.requests)
    assert all("tools" not in request for request in auditor.requests)
    assert result["auditCalls"] == 2 and result["auditTokens"] > 0
    assert result["llmCalls"] == 8  # the supervisor's own calls only
    assert str(result["messages"][-1].content) == "Recorded milk and eggs."


async def test_a_part_still_missing_is_stated_and_the_turn_ends_incomplete(
    database: Database, auditor: ScriptedOpenAIServer
) -> None:
    auditor.reply(
        text("- missing: record the note 'eggs'"),
        text("- missing: record the note 'eggs'\n- missing: say which notes exist"),
    )
    model = milk_only(database, answer_with("Recorded milk and eggs, really."))

    result = await run(database, model, Context(audit_model="openai:auditor"))

    assert result["turnStatus"] == "incomplete"
    assert RECORDED_NOTES == ["milk"]
    assert len(reminders(result)) == 1  # sent back once, not twice
    answer = result["messages"][-1]
    assert isinstance(answer, AIMessage)
    assert str(answer.content).startswith("Recorded milk and eggs, really.")
    assert "Not done" in str(answer.content)
    assert "- record the note 'eggs'\n- say which notes exist" in str(answer.content)
    # The draft was replaced by the statement, not repeated after it.
    drafts = [m for m in result["messages"] if "really." in str(m.content)]
    assert drafts == [answer]
    assert result["auditCalls"] == 2
    assert run_exit_status("incomplete") not in (0, 1, 3, 4, 5, 6)
    assert "the audit of the answer found parts not done" in why_not_answered("incomplete")


@pytest.mark.parametrize(
    ("reply", "calls", "shown"),
    [
        (text("Looks fine to me, mostly."), 1, "neither OK nor '- missing:' lines"),
        (server_error(500), 0, "Error code: 500"),
    ],
    ids=["unreadable", "unreachable"],
)
async def test_an_audit_that_fails_is_reported_and_never_taken_as_ok(
    database: Database, auditor: ScriptedOpenAIServer, reply: Any, calls: int, shown: str
) -> None:
    auditor.reply(reply)
    model = milk_only(database)

    result = await run(database, model, Context(audit_model="openai:auditor", max_retries=0))

    assert result["turnStatus"] == "failed"
    answer = str(result["messages"][-1].content)
    assert answer.startswith("Recorded milk and eggs.")
    assert "not checked" in answer and "'openai:auditor'" in answer and shown in answer
    assert reminders(result) == []
    assert result["auditCalls"] == calls


async def test_no_audit_when_it_is_off_or_the_turn_made_no_plan(
    database: Database, auditor: ScriptedOpenAIServer
) -> None:
    # Off (the default): a planned turn whose answer leaves eggs out is answered, unaudited.
    result = await run(database, milk_only(database), Context())
    assert result["turnStatus"] == "answered"
    assert result["auditCalls"] == 0
    # On, but the turn answered without a plan: nothing to audit against.
    plain = scripted_turn(database, answer_with("Hello."))
    result = await run(database, plain, Context(audit_model="openai:auditor"))
    assert result["turnStatus"] == "answered"
    assert result["auditCalls"] == 0
    assert auditor.requests == []


def test_the_audit_reply_is_read_strictly() -> None:
    assert parse_audit("OK") == []
    assert parse_audit("ok.\n") == []
    assert parse_audit("- missing: a\n* Missing: b\nmissing:c") == ["a", "b", "c"]
    assert parse_audit("Some parts:\n- missing: the eggs") == ["the eggs"]
    for unreadable in ("", "Looks good", "- missing:", "OK, but the eggs are missing", "Hm.\nOK"):
        with pytest.raises(ValueError):
            parse_audit(unreadable)
