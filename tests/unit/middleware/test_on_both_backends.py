"""Both faces of turnplan keep the plan in SQLite and in PostgreSQL alike: a turn plans, is
reminded, drains and answers, its rows read back from the database it was given."""

from __future__ import annotations

from langchain_core.messages import AIMessage, BaseMessage

from agent.turn.plan_rows import TurnPlan
from storage import Database
from storage.repositories import TurnScope
from tests.conftest import BOTH_BACKENDS
from tests.fakes import (
    ScriptedChatModel,
    ai,
    plan_rows,
    plan_view,
    record,
    tool_call,
)
from tests.unit.middleware.faces import Face

pytestmark = BOTH_BACKENDS


def works_then_answers(messages: list[BaseMessage]) -> AIMessage:
    """Plans two notes, answers once too early, then closes each row and answers."""
    rows = plan_rows(plan_view(messages))
    if not rows:
        return ai(tool_call("create_todo", items=[{"title": "milk"}, {"title": "bread"}]))
    current = next((row for row in rows if row.mark == ">"), None)
    if current is None:
        return AIMessage(content="Both noted.")
    if not any("plan still has" in str(m.content) for m in messages):
        return AIMessage(content="Done!")
    return ai(tool_call("complete_todo", todoId=current.id, outcome=f"noted {current.title}"))


async def test_a_turn_drains_its_plan_in_the_database_it_was_given(
    face: Face, database: Database
) -> None:
    model = ScriptedChatModel(responder=works_then_answers)
    result = await face.run(face.build(model, database, [record]), "note milk and bread")

    assert result["turnStatus"] == "answered"
    assert result["messages"][-1].content == "Both noted."
    rows, _ = await TurnPlan(database, TurnScope(result["conversationId"], result["turnId"])).rows()
    assert [(row.title, row.status, row.outcome) for row in rows] == [
        ("milk", "completed", "noted milk"),
        ("bread", "completed", "noted bread"),
    ]
