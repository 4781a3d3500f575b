"""Token usage per turn and per row, and the token budget (issue 29 §5)."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from agent.context import Context
from agent.graph import build_graph
from agent.turn.usage import (
    CallUsage,
    TurnUsage,
    UsageRecorder,
    call_usage,
    split_evenly,
    turn_usage,
    usage_after_call,
    usage_after_workers,
)
from storage import Database
from tests.fakes import ScriptedChatModel, ai, plan_rows, plan_view, tool_call

TITLES = [f"item {number}" for number in range(1, 21)]
PROMPT, COMPLETION = 100, 10


def with_usage(message: AIMessage) -> AIMessage:
    message.usage_metadata = {
        "input_tokens": PROMPT,
        "output_tokens": COMPLETION,
        "total_tokens": PROMPT + COMPLETION,
    }
    return message


def works_the_plan(messages: list[Any]) -> AIMessage:
    """Plans the twenty items, then closes the one in progress with each call; every answer
    reports 100 prompt and 10 completion tokens."""
    rows = plan_rows(plan_view(messages))
    if not rows:
        return with_usage(ai(tool_call("create_todo", items=[{"title": t} for t in TITLES])))
    current = next((row for row in rows if row.mark == ">"), None)
    if current is None:
        return with_usage(AIMessage(content="All twenty done."))
    return with_usage(ai(tool_call("complete_todo", todoId=current.id, outcome="done")))


async def run_turn(database: Database, context: Context) -> tuple[dict[str, Any], list[Any]]:
    model = ScriptedChatModel(responder=works_the_plan)
    graph = build_graph(model, database=database, include_default_tools=False)
    events: list[Any] = []
    final: dict[str, Any] = {}
    async for mode, chunk in graph.astream(
        {"messages": [HumanMessage(content="do the twenty items")]},
        context=context,
        stream_mode=["custom", "values"],
    ):
        if mode == "custom":
            events.append(chunk)
        else:
            final = chunk
    return final, events


def stored_usage(database: Database) -> dict[str, tuple[int, int, int]]:
    path = database.url.split("///", 1)[1]
    with closing(sqlite3.connect(path)) as connection:
        found = connection.execute(
            "SELECT todoId, llmCalls, promptTokens, completionTokens FROM turn_row_usage"
        ).fetchall()
    return {todo_id: (calls, prompt, completion) for todo_id, calls, prompt, completion in found}


async def test_a_twenty_row_plan_is_stopped_by_the_token_budget_with_usage_per_row(
    database: Database,
) -> None:
    final, events = await run_turn(database, Context(max_turn_tokens=1000))

    assert final["turnStatus"] == "budget_exhausted"
    # Ten calls of 110 tokens pass 1000: the planning call and nine rows closed.
    assert final["llmCalls"] == 10
    assert (final["promptTokens"], final["completionTokens"]) == (1000, 100)
    assert final["usageEstimated"] is False
    answer = final["messages"][-1].content
    assert "token budget of 1000" in answer and "1100 tokens" in answer
    assert "11 of 20 planned item(s) are still open" in answer

    todos = final["todos"]
    closed = [todo for todo in todos if todo["status"] == "completed"]
    assert len(closed) == 9
    for todo in closed:
        assert todo["usage"] == {"llmCalls": 1, "promptTokens": 100, "completionTokens": 10}
    assert all(todo["usage"]["llmCalls"] == 0 for todo in todos if todo["status"] != "completed")
    # The rows add up to the turn, less the planning call (made before any row was in progress).
    assert sum(todo["usage"]["promptTokens"] for todo in todos) + PROMPT == final["promptTokens"]
    assert (
        sum(todo["usage"]["completionTokens"] for todo in todos) + COMPLETION
        == final["completionTokens"]
    )
    # The same figures are in the table of our own.
    assert stored_usage(database) == {todo["id"]: (1, 100, 10) for todo in closed}
    # Plan events carry the running totals as the round began.
    completions = [event for event in events if event.get("event") == "completed"]
    assert [event["usage"]["llmCalls"] for event in completions] == list(range(2, 11))
    assert completions[-1]["usage"]["promptTokens"] == 1000


async def test_without_a_token_budget_the_same_plan_finishes(database: Database) -> None:
    final, _ = await run_turn(database, Context())
    assert final["turnStatus"] == "answered"
    assert final["llmCalls"] == 22
    assert final["promptTokens"] == 22 * PROMPT
    assert sum(todo["usage"]["promptTokens"] for todo in final["todos"]) == 20 * PROMPT


async def test_usage_is_estimated_from_characters_when_the_model_reports_none(
    database: Database,
) -> None:
    model = ScriptedChatModel(script=[AIMessage(content="x" * 400)])
    graph = build_graph(model, database=database, include_default_tools=False)
    final = await graph.ainvoke({"messages": [HumanMessage(content="hi")]}, context=Context())
    assert final["usageEstimated"] is True
    assert final["completionTokens"] == 100  # 400 characters, 4 a token
    sent = sum(len(str(message.content)) for message in model.prompts[0])
    assert final["promptTokens"] == -(-sent // 4)
    assert turn_usage(final) == TurnUsage(1, final["promptTokens"], 100, True)


def test_a_stage_in_progress_together_shares_each_call_evenly() -> None:
    update = usage_after_call(
        TurnUsage(3, 500, 50, False), {}, CallUsage(100, 10, False), ["a", "b", "c"]
    )
    shares = [update["rowUsage"][row] for row in ("a", "b", "c")]
    assert [share["promptTokens"] for share in shares] == [34, 33, 33]
    assert [share["completionTokens"] for share in shares] == [4, 3, 3]
    assert all(share["llmCalls"] == 1 for share in shares)
    assert (update["promptTokens"], update["completionTokens"]) == (600, 60)
    assert sum(split_evenly(7, 7)) == 7 and split_evenly(2, 3) == [1, 1, 0]


def test_a_token_budget_must_be_positive() -> None:
    assert Context(max_turn_tokens="500").max_turn_tokens == 500  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_turn_tokens must be at least 1"):
        Context(max_turn_tokens=0)


async def test_a_database_made_before_row_usage_existed_gains_its_table(tmp_path: Path) -> None:
    """A database from an earlier version (every table but ``turn_row_usage``) keeps its rows
    and gains the table the first time this version opens it."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'older.db'}"
    older = Database(url)
    await older.create_schema()
    await older.dispose()
    with closing(sqlite3.connect(tmp_path / "older.db")) as connection:
        connection.execute("DROP TABLE turn_row_usage")
        connection.execute(
            "INSERT INTO turn_todos (id, conversationId, turnId, title, createdAt) "
            "VALUES ('kept', 'c', 't', 'an older row', '2026-01-01T00:00:00Z')"
        )
        connection.commit()

    database = Database(url)
    final, _ = await run_turn(database, Context(max_turn_tokens=300))
    await database.dispose()

    assert final["turnStatus"] == "budget_exhausted"
    assert len(stored_usage(database)) == 2  # two rows closed before 330 tokens passed 300
    with closing(sqlite3.connect(tmp_path / "older.db")) as connection:
        assert connection.execute("SELECT title FROM turn_todos WHERE id='kept'").fetchall() == [
            ("an older row",)
        ]


def test_a_step_the_harness_answers_costs_nothing_and_two_requests_add_up() -> None:
    """The compact profile's harness may answer a step without the model (no request: no
    tokens, nothing estimated), or make two requests in one step (a plan, then a free answer)."""
    answer = AIMessage(content="built from the rows")
    prompt = [HumanMessage(content="x" * 4000)]
    assert call_usage(answer, prompt, UsageRecorder()) == CallUsage(0, 0, False)

    two = UsageRecorder()
    two.requests, two.reported = 2, [(300, 20), (310, 5)]
    assert call_usage(answer, prompt, two) == CallUsage(610, 25, False)

    silent = UsageRecorder()
    silent.requests = 2
    assert call_usage(answer, prompt, silent) == CallUsage(2000, 5, True)


def test_the_workers_of_one_round_add_up_in_the_turn_and_their_rows() -> None:
    before = TurnUsage(llm_calls=3, prompt_tokens=300, completion_tokens=30, estimated=False)
    rows = {"a": {"llmCalls": 1, "promptTokens": 100, "completionTokens": 10}}
    spent = [
        {"todoId": "a", "llmCalls": 2, "promptTokens": 500, "completionTokens": 40},
        {
            "todoId": "b",
            "llmCalls": 1,
            "promptTokens": 70,
            "completionTokens": 7,
            "estimated": True,
        },
    ]

    usage, after = usage_after_workers(before, rows, spent)

    assert (usage.prompt_tokens, usage.completion_tokens, usage.estimated) == (870, 77, True)
    assert after == {
        "a": {"llmCalls": 3, "promptTokens": 600, "completionTokens": 50},
        "b": {"llmCalls": 1, "promptTokens": 70, "completionTokens": 7},
    }
    assert rows["a"]["llmCalls"] == 1  # the state's own figures are not changed in place
