"""``turnplan run``'s turn printer: the plan as it moves, tool calls, the answer, the summary."""

from __future__ import annotations

import io
from typing import Any

from langchain_core.messages import AIMessage

from agent.app.run_turn import run_turn
from storage import Database
from tests.fakes import PlanOracle, ScriptedChatModel, ai, plan_rows, plan_view, tool_call


def add(title: str) -> dict[str, Any]:
    return tool_call("add_task", title=title)


async def test_run_turn_prints_the_plan_moving_and_the_answer(database: Database) -> None:
    out = io.StringIO()
    model = ScriptedChatModel(responder=PlanOracle(["milk", "eggs"], add))
    report = await run_turn(
        "Add milk and eggs to my tasks", model=model, database_url=database.url, out=out
    )
    text = out.getvalue()
    assert (
        report.status == "answered"
        and report.open_items == 0
        and report.llm_calls == report.model_calls == 4
    )
    lines = [line.strip() for line in text.splitlines()]
    assert "+ planned   milk" in lines and "+ planned   eggs" in lines
    assert "> started   milk" in lines
    assert "✓ completed milk — did milk" in lines
    assert "· add_task(title='eggs')" in lines
    assert "Done: 2 items." in text
    assert "turn answered · 4 LLM call(s) in 4 step(s) · 0 plan item(s) left open" in text
    # The scripted model reports no usage: the CLI says the tokens are estimated.
    assert report.usage_estimated and report.prompt_tokens > report.completion_tokens > 0
    assert (
        f"tokens: {report.prompt_tokens} prompt + {report.completion_tokens} completion "
        "(estimated from characters: the model server reported none)"
    ) in lines


async def test_a_failed_call_is_printed_in_a_round_that_also_changed_the_plan(
    database: Database,
) -> None:
    """Such a tools step streams its update as a list (one part carries the plan snapshot)."""

    def respond(messages: list[Any]) -> AIMessage:
        rows = plan_rows(plan_view(messages))
        if not rows:
            return ai(tool_call("create_todo", items=[{"title": "alpha"}]))
        current = next((row for row in rows if row.mark == ">"), None)
        if current is None:
            return AIMessage(content="done")
        return ai(
            tool_call("complete_todo", todoId="no-such-row", outcome="x"),
            tool_call("complete_todo", todoId=current.id, outcome="ok"),
        )

    out = io.StringIO()
    report = await run_turn(
        "alpha", model=ScriptedChatModel(responder=respond), database_url=database.url, out=out
    )
    assert report.status == "answered"
    failures = [line.strip() for line in out.getvalue().splitlines() if "! complete_todo" in line]
    assert len(failures) == 1 and "no-such-row" in failures[0]
