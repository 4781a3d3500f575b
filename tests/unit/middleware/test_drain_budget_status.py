"""The drain, the budget, the idle stop and the honest final status, on both faces of turnplan
(the supervisor graph and ``create_agent`` with ``TurnPlanMiddleware``): one test body each."""

from __future__ import annotations

import itertools
import json
import sqlite3
from contextlib import closing
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from agent.context import Context
from agent.tools.personal_tasks import build_task_tools
from agent.turn.identity import REMINDER_NAME
from storage import Database
from tests.fakes import (
    ScriptedChatModel,
    act,
    ai,
    answer_with,
    close_row,
    plan_items,
    plan_rows,
    plan_view,
    record,
    scripted_turn,
    tool_call,
)
from tests.unit.middleware.faces import Face


def rows_in_db(database: Database) -> list[tuple[str, str]]:
    path = database.url.split("///", 1)[1]
    with closing(sqlite3.connect(path)) as connection:
        return connection.execute(
            "SELECT title, status FROM turn_todos ORDER BY priority, createdAt"
        ).fetchall()


def reminders(messages: list[BaseMessage]) -> list[BaseMessage]:
    return [m for m in messages if isinstance(m, HumanMessage) and m.name == REMINDER_NAME]


# --- a simple request --------------------------------------------------------------------------


async def test_a_simple_request_is_one_call_with_no_plan_and_answered(
    face: Face, database: Database
) -> None:
    model = ScriptedChatModel(script=[AIMessage(content="Hello!")])
    result = await face.run(face.build(model, database, [record]), "hi")

    assert model.calls == 1
    assert result["messages"][-1].content == "Hello!"
    assert result["turnStatus"] == "answered"
    assert model.bound_tool_names.count("create_todo") == 1  # planning is offered


# --- the drain ---------------------------------------------------------------------------------


async def test_an_answer_while_rows_are_open_is_sent_back_with_the_reminder(
    face: Face, database: Database, recorded_notes: list[str]
) -> None:
    model = scripted_turn(
        database,
        plan_items({"title": "Note milk"}, {"title": "Note bread"}),
        act(tool_call("record", note="milk")),
        close_row(0),
        answer_with("All done!"),  # too early: "Note bread" is open
        act(tool_call("record", note="bread")),
        close_row(1),
        answer_with("Both noted."),
    )
    result = await face.run(face.build(model, database, [record]), "note milk and bread")

    assert result["turnStatus"] == "answered"
    assert result["messages"][-1].content == "Both noted."
    (nudge,) = reminders(result["messages"])
    assert "Note bread" in str(nudge.content)
    assert rows_in_db(database) == [("Note milk", "completed"), ("Note bread", "completed")]
    assert recorded_notes == ["milk", "bread"]
    assert [(t["content"], t["status"]) for t in result["todos"]] == [
        ("Note milk", "completed"),
        ("Note bread", "completed"),
    ]


async def test_the_plan_view_shows_the_rows_and_their_ids_on_every_call(
    face: Face, database: Database
) -> None:
    model = scripted_turn(
        database,
        plan_items({"title": "Note milk"}),
        close_row(0),
        answer_with("Noted."),
    )
    await face.run(face.build(model, database, [record]), "note milk")

    assert plan_rows(model.plan_view(0)) == []
    (row,) = plan_rows(model.plan_view(1))
    assert (row.mark, row.title) == (">", "Note milk")
    assert row.id == rows_ids(database)[0]
    assert "create_todo" not in model.bound_tool_names  # the working phase's tools


def rows_ids(database: Database) -> list[str]:
    path = database.url.split("///", 1)[1]
    with closing(sqlite3.connect(path)) as connection:
        return [r for (r,) in connection.execute("SELECT id FROM turn_todos ORDER BY priority")]


async def test_a_model_that_keeps_answering_stops_stalled_with_the_open_rows_named(
    face: Face, database: Database
) -> None:
    model = scripted_turn(
        database,
        plan_items({"title": "Note milk"}, {"title": "Note bread"}),
        answer_with("Done."),
        answer_with("Done."),
    )
    agent = face.build(model, database, [record], context=Context(max_reminders=1))
    result = await face.run(agent, "note milk and bread")

    assert result["turnStatus"] == "stalled"
    assert model.calls == 3
    final = str(result["messages"][-1].content)
    assert final.startswith("I stopped before finishing this request")
    assert "Note milk" in final and "Note bread" in final
    assert [status for _, status in rows_in_db(database)] == ["in_progress", "pending"]


async def test_two_empty_replies_end_the_turn_no_answer(face: Face, database: Database) -> None:
    model = ScriptedChatModel(script=[AIMessage(content=""), AIMessage(content="")])
    result = await face.run(face.build(model, database, [record]), "hi")

    assert result["turnStatus"] == "no_answer"
    assert model.calls == 2


# --- the budget and the idle stop --------------------------------------------------------------


async def test_the_budget_grows_with_rounds_that_leave_rows_open_up_to_its_cap(
    face: Face, database: Database
) -> None:
    notes = itertools.count()
    steps = [plan_items({"title": "Note forever"})]
    steps += [act(tool_call("record", note=f"n{next(notes)}")) for _ in range(10)]
    model = scripted_turn(database, *steps)
    settings = Context(base_iterations=2, max_iterations=5)
    result = await face.run(face.build(model, database, [record], context=settings), "go")

    assert result["turnStatus"] == "budget_exhausted"
    assert model.calls == 5  # 2, then +2 per round leaving the row open, capped at 5
    final = str(result["messages"][-1].content)
    assert "limit of 5 model calls" in final
    assert "Note forever" in final
    assert rows_in_db(database) == [("Note forever", "in_progress")]


async def test_rounds_that_only_repeat_a_call_stop_the_turn_stalled(
    face: Face, database: Database
) -> None:
    steps = [plan_items({"title": "Note milk"})]
    steps += [act(tool_call("record", note="milk")) for _ in range(5)]
    model = scripted_turn(database, *steps)
    agent = face.build(model, database, [record], context=Context(max_idle_rounds=2))
    result = await face.run(agent, "note milk")

    assert result["turnStatus"] == "stalled"
    final = str(result["messages"][-1].content)
    assert "tool rounds started or closed no planned item" in final
    assert 'record({"note": "milk"})' in final
    assert model.calls == 4  # the plan, the first record, two repeats


# --- the honest final status -------------------------------------------------------------------


async def test_a_row_cancelled_for_a_failure_ends_incomplete_and_the_answer_says_why(
    face: Face, database: Database
) -> None:
    model = scripted_turn(
        database,
        plan_items({"title": "Note milk"}, {"title": "Note bread"}),
        close_row(0),
        close_row(1, outcome="the note service is down", status="cancelled"),
        answer_with("All done."),
    )
    result = await face.run(face.build(model, database, [record]), "note milk and bread")

    assert result["turnStatus"] == "incomplete"
    final = str(result["messages"][-1].content)
    assert "All done." in final
    assert "Note bread" in final and "the note service is down" in final


async def test_the_model_never_sees_or_fills_the_turn_ids(face: Face, database: Database) -> None:
    seen: list[Any] = []

    def respond(messages: list[BaseMessage]) -> AIMessage:
        seen.append(messages)
        if len(seen) == 1:
            return ai(tool_call("create_todo", items=[{"title": "Note milk"}], turnId="forged"))
        return (
            AIMessage(content="Noted.")
            if len(seen) > 2
            else ai(tool_call("complete_todo", todoId=rows_ids(database)[0], outcome="ok"))
        )

    model = ScriptedChatModel(responder=respond)
    result = await face.run(face.build(model, database, [record]), "note milk", "thread-7f3a")

    assert result["turnStatus"] == "answered"
    assert result["conversationId"] == "thread-7f3a"
    assert result["turnId"] and result["turnId"] != "forged"
    created = json.loads(str(result["messages"][2].content))
    assert created["created"][0]["title"] == "Note milk"
    prompts = json.dumps([str(m.content) for call in seen for m in call])
    assert "thread-7f3a" not in prompts


# --- the token budget --------------------------------------------------------------------------


def with_usage(message: AIMessage) -> AIMessage:
    message.usage_metadata = {"input_tokens": 100, "output_tokens": 10, "total_tokens": 110}
    return message


async def test_the_token_budget_ends_the_turn_with_usage_per_row(
    face: Face, database: Database
) -> None:
    def works_the_plan(messages: list[BaseMessage]) -> AIMessage:
        rows = plan_rows(plan_view(messages))
        if not rows:
            items = [{"title": f"item {n}"} for n in range(1, 6)]
            return with_usage(ai(tool_call("create_todo", items=items)))
        current = next(row for row in rows if row.mark == ">")
        return with_usage(ai(tool_call("complete_todo", todoId=current.id, outcome="done")))

    model = ScriptedChatModel(responder=works_the_plan)
    agent = face.build(model, database, [record], context=Context(max_turn_tokens=300))
    result = await face.run(agent, "do the five items")

    assert result["turnStatus"] == "budget_exhausted"
    assert (result["promptTokens"], result["completionTokens"]) == (300, 30)
    assert "token budget of 300" in str(result["messages"][-1].content)
    closed = [todo for todo in result["todos"] if todo["status"] == "completed"]
    assert [todo["usage"] for todo in closed] == [
        {"llmCalls": 1, "promptTokens": 100, "completionTokens": 10}
    ] * 2
    path = database.url.split("///", 1)[1]
    with closing(sqlite3.connect(path)) as connection:
        stored = connection.execute("SELECT count(*) FROM turn_row_usage").fetchone()[0]
    assert stored == 2


async def test_the_tasks_a_turn_changed_are_listed_in_its_state(
    face: Face, database: Database
) -> None:
    model = ScriptedChatModel(
        script=[ai(tool_call("add_task", title="milk")), AIMessage(content="Added.")]
    )
    agent = face.build(model, database, build_task_tools(database))
    result = await face.run(agent, "add milk")

    assert result["turnStatus"] == "answered"
    assert [(t["action"], t["title"]) for t in result["modifiedTasks"]] == [("created", "milk")]
