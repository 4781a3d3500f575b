"""The answer audit (issue 29 §3) through ``langgraph dev`` and the real ``langgraph_sdk``: the
run's context names an ``openai:`` audit model, the audit finds a part of the request the plan
left out, the supervisor is sent back once, adds and does it, and only then does the turn say
``answered``."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from typing import Any

import pytest
from langgraph_sdk import get_client

from tests.dev_server import DevServer
from tests.fakes import plan_rows
from tests.http_oracle import plan_view_of
from tests.scripted_openai import Reply, text, tool_calls

pytestmark = pytest.mark.integration

MISSING = "milk was never added"


def is_audit(body: dict[str, Any]) -> bool:
    """An audit request: no tools, and the audit prompt as its only message."""
    messages = body.get("messages") or []
    return not body.get("tools") and "check an assistant's answer" in str(messages[0]["content"])


class ForgetfulSupervisorAndAuditor:
    """The supervisor plans bread only; once told what is missing it plans and adds milk. The
    auditor reports milk missing until an item shows milk added by a tool call."""

    def __init__(self) -> None:
        self.audits: list[str] = []

    def __call__(self, body: dict[str, Any]) -> Reply:
        if is_audit(body):
            prompt = str(body["messages"][0]["content"])
            milk_done = "- [completed] milk: added milk (evidence: 1 tool call(s)" in prompt
            verdict = "OK" if milk_done else f"- missing: {MISSING}"
            self.audits.append(verdict)
            return text(verdict)
        rows = plan_rows(plan_view_of(body))
        told = MISSING in json.dumps(body["messages"])
        if not rows:
            return tool_calls(("create_todo", {"items": [{"title": "bread"}]}))
        current = next((row for row in rows if row.mark == ">"), None)
        if current is not None:
            return tool_calls(
                ("add_task", {"title": current.title}),
                ("complete_todo", {"todoId": current.id, "outcome": f"added {current.title}"}),
            )
        if told and not any(row.title == "milk" for row in rows):
            return tool_calls(("create_todo", {"items": [{"title": "milk"}]}))
        return text("Added your tasks.")


async def test_the_audit_sends_the_supervisor_back_for_what_the_plan_left_out(
    dev_server: DevServer,
) -> None:
    script = ForgetfulSupervisorAndAuditor()
    dev_server.model.respond_with(script)
    async with get_client(url=dev_server.url) as client:
        thread = await client.threads.create()
        async for part in client.runs.stream(
            thread["thread_id"],
            "supervisor",
            input={"messages": [{"role": "user", "content": "add bread and milk to my tasks"}]},
            context={"audit_model": "openai:scripted"},
        ):
            assert part.event != "error", f"{part.data}\n{dev_server.log_tail()}"
        values = (await client.threads.get_state(thread["thread_id"]))["values"]

    assert script.audits == [f"- missing: {MISSING}", "OK"]
    assert values["turnStatus"] == "answered"
    assert values["auditCalls"] == 2 and values["auditTokens"] > 0
    assert [(todo["title"], todo["status"]) for todo in values["todos"]] == [
        ("bread", "completed"),
        ("milk", "completed"),
    ]
    with closing(sqlite3.connect(dev_server.database)) as connection:
        tasks = sorted(title for (title,) in connection.execute("SELECT title FROM tasks"))
    assert tasks == ["bread", "milk"]
