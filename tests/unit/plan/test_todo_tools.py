"""create_todo / list_todo / complete_todo through the real tools node, as the model calls them."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.prebuilt import ToolRuntime

from agent.calls.tool_schemas import model_tool_schema
from agent.context import Context
from agent.state import SupervisorState
from agent.tools.todos import build_todo_tools
from storage import Database
from tests.tool_harness import run_tool_calls


@pytest.fixture
async def tools(database: Database) -> list[BaseTool]:
    await database.create_schema()
    return build_todo_tools(database)


def payload(message: ToolMessage) -> dict[str, Any]:
    data = json.loads(str(message.content))
    assert isinstance(data, dict)
    return data


async def call(
    tools: list[BaseTool], name: str, args: dict[str, Any], **kwargs: Any
) -> tuple[str, dict[str, Any]]:
    (message,), _ = await run_tool_calls(tools, [(name, args)], **kwargs)
    return message.status, payload(message)


async def plan(tools: list[BaseTool], *titles: str, **kwargs: Any) -> list[dict[str, Any]]:
    status, body = await call(
        tools, "create_todo", {"items": [{"title": t} for t in titles]}, **kwargs
    )
    assert status == "success", body
    created: list[dict[str, Any]] = body["created"]
    return created


def db_rows(database: Database) -> list[tuple[Any, ...]]:
    path = database.url.split("///", 1)[1]
    with closing(sqlite3.connect(path)) as connection:
        return connection.execute(
            "SELECT conversationId, turnId, title, status, priority FROM turn_todos"
            " ORDER BY conversationId, turnId, priority"
        ).fetchall()


# --- what the model is shown ------------------------------------------------------------------


@pytest.mark.parametrize("name", ["create_todo", "list_todo", "complete_todo"])
def test_schema_sent_to_the_model_has_no_ids_or_runtime(tools: list[BaseTool], name: str) -> None:
    (tool,) = [t for t in tools if t.name == name]
    sent = json.dumps(convert_to_openai_tool(tool))
    for hidden in ("conversationId", "turnId", "runtime", "conversation_id", "turn_id"):
        assert hidden not in sent
    assert convert_to_openai_tool(tool)["function"]["description"]


def test_create_todo_schema_uses_seed_field_names(tools: list[BaseTool]) -> None:
    (create,) = [t for t in tools if t.name == "create_todo"]
    schema = model_tool_schema(create)["function"]["parameters"]  # as the model is sent it
    item = schema["properties"]["items"]["items"]
    if "$ref" in item:
        item = schema["$defs"][item["$ref"].rsplit("/", 1)[1]]
    assert set(item["properties"]) == {
        "title",
        "context",
        "completionCriteria",
        "agentType",
        "order",
        "blockedBy",
    }
    assert item["required"] == ["title"]
    # Optional fields are optional by not being required: no null choice, no empty default.
    assert not any("anyOf" in field or "default" in field for field in item["properties"].values())


async def test_ids_sent_by_the_model_are_ignored(tools: list[BaseTool], database: Database) -> None:
    await call(
        tools,
        "create_todo",
        {"items": [{"title": "real"}], "turnId": "forged", "conversationId": "forged"},
        conversation_id="conv-real",
        turn_id="turn-real",
    )
    assert db_rows(database) == [("conv-real", "turn-real", "real", "in_progress", 0)]


# --- create_todo ------------------------------------------------------------------------------


async def test_create_todo_batch_returns_seed_output_and_starts_the_first(
    tools: list[BaseTool],
) -> None:
    status, body = await call(
        tools,
        "create_todo",
        {
            "items": [
                {
                    "title": "  Add groceries  ",
                    "context": "milk, eggs",
                    "completionCriteria": "in list",
                },
                {"title": "Do laundry"},
            ]
        },
    )
    assert status == "success"
    assert [(c["title"], c["order"]) for c in body["created"]] == [
        ("Add groceries", 1),
        ("Do laundry", 2),
    ]
    assert body["totalPending"] == 2
    assert body["current"]["title"] == "Add groceries"
    assert body["current"]["context"] == "milk, eggs"
    assert body["current"]["completionCriteria"] == "in list"


async def test_order_is_one_indexed_and_items_without_it_append(
    tools: list[BaseTool], database: Database
) -> None:
    await call(
        tools, "create_todo", {"items": [{"title": "b", "order": 2}, {"title": "a", "order": 1}]}
    )
    await call(tools, "create_todo", {"items": [{"title": "c"}]})
    assert [(r[2], r[4]) for r in db_rows(database)] == [("a", 0), ("b", 1), ("c", 2)]


@pytest.mark.parametrize(
    ("items", "fragment"),
    [
        ([{"title": "ok"}, {"title": "   "}], "Item 2 has an empty title"),
        ([{"title": "x" * 201}], "201 characters"),
        ([{"title": "ok", "context": "x" * 2001}], "`context` of 2001"),
        ([{"title": "ok", "completionCriteria": "x" * 2001}], "`completionCriteria` of 2001"),
        ([{"title": str(i)} for i in range(51)], "at most 50 items"),
        ([{"title": "ok", "order": 0}], "1-indexed"),
        ([], "at least one item"),
    ],
)
async def test_invalid_batches_write_nothing(
    tools: list[BaseTool], database: Database, items: list[dict[str, Any]], fragment: str
) -> None:
    status, body = await call(tools, "create_todo", {"items": items})
    assert status == "error"
    assert body["error"] == "VALIDATION_ERROR"
    assert fragment in body["message"]
    assert body["suggestion"]
    assert db_rows(database) == []


async def test_title_of_exactly_the_limit_is_accepted(tools: list[BaseTool]) -> None:
    status, _ = await call(tools, "create_todo", {"items": [{"title": "x" * 200}]})
    assert status == "success"


async def test_limits_are_settings(tools: list[BaseTool]) -> None:
    status, body = await call(
        tools,
        "create_todo",
        {"items": [{"title": "a"}, {"title": "b"}, {"title": "c"}]},
        context=Context(max_batch_items=2),
    )
    assert status == "error" and "at most 2 items" in body["message"]
    status, body = await call(
        tools, "create_todo", {"items": [{"title": "abcdef"}]}, context=Context(max_title_length=5)
    )
    assert status == "error" and "the limit is 5" in body["message"]


async def test_malformed_arguments_get_the_envelope_not_a_stack_trace(
    tools: list[BaseTool],
) -> None:
    status, body = await call(tools, "create_todo", {"items": [{"context": "no title"}]})
    assert status == "error"
    assert body["error"] == "VALIDATION_ERROR"
    assert "items.0.title" in body["message"]
    assert "Traceback" not in body["message"]


# --- list_todo --------------------------------------------------------------------------------


async def test_list_todo_defaults_to_remaining_items_with_a_summary(tools: list[BaseTool]) -> None:
    created = await plan(tools, "a", "b", "c")
    await call(tools, "complete_todo", {"todoId": created[0]["id"], "outcome": "done"})
    await call(
        tools,
        "complete_todo",
        {"todoId": created[2]["id"], "outcome": "not needed", "status": "cancelled"},
    )
    _, body = await call(tools, "list_todo", {})
    assert [(i["title"], i["status"]) for i in body["items"]] == [("b", "in_progress")]
    assert body["summary"] == {
        "total": 3,
        "pending": 0,
        "inProgress": 1,
        "completed": 1,
        "cancelled": 1,
    }
    item = body["items"][0]
    assert set(item) == {
        "id",
        "title",
        "context",
        "completionCriteria",
        "agentType",
        "status",
        "priority",
        "outcome",
        "createdAt",
        "startedAt",
        "completedAt",
        "blockedBy",  # issue 30: seed 004's fields, then the dependencies
        "ready",
        "continuedFrom",
        "continuedIn",
        "evidence",
    }
    assert item["continuedFrom"] is None and item["continuedIn"] is None
    assert item["evidence"] == {"calls": 0, "errors": 0, "tools": []}


@pytest.mark.parametrize(
    ("status", "titles"),
    [
        ("all", ["a", "b", "c"]),
        ("completed", ["a"]),
        ("in_progress", ["b"]),
        ("pending", ["c"]),
        ("cancelled", []),
    ],
)
async def test_list_todo_filters_by_status(
    tools: list[BaseTool], status: str, titles: list[str]
) -> None:
    created = await plan(tools, "a", "b", "c")
    await call(tools, "complete_todo", {"todoId": created[0]["id"], "outcome": "done"})
    _, body = await call(tools, "list_todo", {"status": status})
    assert [i["title"] for i in body["items"]] == titles


async def test_list_todo_rejects_an_unknown_status(tools: list[BaseTool]) -> None:
    status, body = await call(tools, "list_todo", {"status": "done"})
    assert status == "error" and body["error"] == "VALIDATION_ERROR"


# --- complete_todo ----------------------------------------------------------------------------


async def test_complete_todo_records_outcome_and_returns_the_next_item(
    tools: list[BaseTool],
) -> None:
    created = await plan(tools, "a", "b")
    status, body = await call(
        tools, "complete_todo", {"todoId": created[0]["id"], "outcome": "  bought milk "}
    )
    assert status == "success"
    assert body == {
        "id": created[0]["id"],
        "title": "a",
        "status": "completed",
        "remaining": 1,
        "next": {"id": created[1]["id"], "title": "b"},
    }  # no echo of the outcome nor completedAt: they are on the row, and resent per call
    _, listing = await call(tools, "list_todo", {"status": "all"})
    closed, current = listing["items"]
    assert (closed["outcome"], closed["status"]) == ("bought milk", "completed")
    assert closed["completedAt"].endswith("Z")
    assert current["status"] == "in_progress"
    assert current["startedAt"] is not None


async def test_completing_the_last_item_returns_no_next(tools: list[BaseTool]) -> None:
    (only,) = await plan(tools, "a")
    _, body = await call(tools, "complete_todo", {"todoId": only["id"], "outcome": "done"})
    assert body["remaining"] == 0 and "next" not in body


async def test_cancel_with_a_reason(tools: list[BaseTool]) -> None:
    (only,) = await plan(tools, "a")
    _, body = await call(
        tools,
        "complete_todo",
        {"todoId": only["id"], "outcome": "user withdrew it", "status": "cancelled"},
    )
    assert body["status"] == "cancelled"
    _, listing = await call(tools, "list_todo", {"status": "cancelled"})
    assert [item["outcome"] for item in listing["items"]] == ["user withdrew it"]


async def test_a_closed_item_cannot_be_closed_again(tools: list[BaseTool]) -> None:
    (only,) = await plan(tools, "a")
    await call(tools, "complete_todo", {"todoId": only["id"], "outcome": "done"})
    status, body = await call(
        tools, "complete_todo", {"todoId": only["id"], "outcome": "again", "status": "cancelled"}
    )
    assert status == "error" and body["error"] == "VALIDATION_ERROR"
    assert "already completed" in body["message"]


@pytest.mark.parametrize("outcome", ["", "   "])
async def test_outcome_is_required(tools: list[BaseTool], outcome: str) -> None:
    (only,) = await plan(tools, "a")
    status, body = await call(tools, "complete_todo", {"todoId": only["id"], "outcome": outcome})
    assert status == "error" and body["error"] == "VALIDATION_ERROR"
    status, body = await call(tools, "complete_todo", {"todoId": only["id"]})
    assert status == "error" and "outcome" in body["message"]


async def test_status_must_be_completed_or_cancelled(tools: list[BaseTool]) -> None:
    (only,) = await plan(tools, "a")
    status, body = await call(
        tools, "complete_todo", {"todoId": only["id"], "outcome": "x", "status": "pending"}
    )
    assert status == "error" and body["error"] == "VALIDATION_ERROR"


async def test_ids_are_checked(tools: list[BaseTool]) -> None:
    status, body = await call(tools, "complete_todo", {"todoId": "first one", "outcome": "x"})
    assert (status, body["error"]) == ("error", "INVALID_ID")
    status, body = await call(
        tools,
        "complete_todo",
        {"todoId": "00000000-0000-4000-8000-000000000000", "outcome": "x"},
    )
    assert (status, body["error"]) == ("error", "NOT_FOUND")


@pytest.mark.parametrize(
    "elsewhere", [{"turn_id": "turn-2"}, {"conversation_id": "conv-2"}], ids=["turn", "conv"]
)
async def test_rows_of_another_turn_or_conversation_are_not_found(
    tools: list[BaseTool], database: Database, elsewhere: dict[str, str]
) -> None:
    (row,) = await plan(tools, "a")
    status, body = await call(
        tools, "complete_todo", {"todoId": row["id"], "outcome": "x"}, **elsewhere
    )
    assert (status, body["error"]) == ("error", "NOT_FOUND")
    _, listing = await call(tools, "list_todo", {"status": "all"}, **elsewhere)
    assert listing["items"] == []
    assert db_rows(database)[0][3] == "in_progress"


# --- lifecycle --------------------------------------------------------------------------------


async def test_at_most_one_item_is_in_progress(tools: list[BaseTool], database: Database) -> None:
    first = await plan(tools, "a", "b")
    await plan(tools, "c", "d")
    await call(tools, "complete_todo", {"todoId": first[1]["id"], "outcome": "done early"})
    statuses = [r[3] for r in db_rows(database)]
    assert statuses.count("in_progress") == 1
    assert statuses == ["in_progress", "completed", "pending", "pending"]


async def test_calls_in_one_message_run_in_order(tools: list[BaseTool]) -> None:
    created = await plan(tools, "a", "b", "c")
    messages, _ = await run_tool_calls(
        tools,
        [
            ("complete_todo", {"todoId": created[0]["id"], "outcome": "1"}),
            ("complete_todo", {"todoId": created[1]["id"], "outcome": "2"}),
            ("list_todo", {"status": "all"}),
        ],
    )
    assert [payload(m).get("remaining") for m in messages[:2]] == [2, 1]
    listing = payload(messages[2])
    assert [i["status"] for i in listing["items"]] == ["completed", "completed", "in_progress"]


async def test_two_conversations_writing_at_once_see_only_their_own_rows(
    tools: list[BaseTool],
) -> None:
    async def conversation(name: str) -> dict[str, Any]:
        for step in range(5):
            await plan(tools, f"{name}-{step}", conversation_id=name, turn_id=f"{name}-turn")
        _, listing = await call(
            tools, "list_todo", {"status": "all"}, conversation_id=name, turn_id=f"{name}-turn"
        )
        return listing

    left, right = await asyncio.gather(conversation("left"), conversation("right"))
    assert [i["title"] for i in left["items"]] == [f"left-{s}" for s in range(5)]
    assert [i["title"] for i in right["items"]] == [f"right-{s}" for s in range(5)]


# --- database failures ------------------------------------------------------------------------


async def test_a_failure_mid_batch_gives_database_error_and_writes_nothing(
    tools: list[BaseTool], database: Database
) -> None:
    await database.create_schema()
    path = database.url.split("///", 1)[1]
    with closing(sqlite3.connect(path)) as connection, connection:
        connection.execute(
            "CREATE TRIGGER refuse_third BEFORE INSERT ON turn_todos WHEN NEW.title = 'boom'"
            " BEGIN SELECT RAISE(ABORT, 'disk says no'); END"
        )
    status, body = await call(
        tools, "create_todo", {"items": [{"title": "one"}, {"title": "two"}, {"title": "boom"}]}
    )
    assert (status, body["error"]) == ("error", "DATABASE_ERROR")
    assert "disk says no" in body["message"]
    assert "Traceback" not in json.dumps(body)
    assert db_rows(database) == []


async def test_a_read_only_database_gives_database_error(tmp_path: Path) -> None:
    path = tmp_path / "ro.db"
    writable = Database(f"sqlite+aiosqlite:///{path}")
    writable_tools = build_todo_tools(writable)
    await plan(writable_tools, "kept")
    await writable.dispose()

    read_only = Database(f"sqlite+aiosqlite:///file:{path}?mode=ro&uri=true")
    try:
        status, body = await call(
            build_todo_tools(read_only), "create_todo", {"items": [{"title": "x"}]}
        )
        assert (status, body["error"]) == ("error", "DATABASE_ERROR")
        assert "readonly" in body["message"]
    finally:
        await read_only.dispose()
    with closing(sqlite3.connect(path)) as connection:
        assert connection.execute("SELECT title, status FROM turn_todos").fetchall() == [
            ("kept", "in_progress")
        ]


def test_validating_a_call_does_not_walk_the_graph_state(database: Database) -> None:
    """langchain-core dumps every call's validated arguments, the injected runtime included; a
    runtime dumped with its state would cost a walk of the whole thread on every call."""
    complete_todo = {tool.name: tool for tool in build_todo_tools(database)}["complete_todo"]
    state = SupervisorState(messages=[HumanMessage(content="x")] * 100)
    runtime = ToolRuntime(
        state=state,
        context=Context(),
        config={},
        stream_writer=lambda _: None,
        tool_call_id="call_1",
        store=None,
    )
    schema = complete_todo.args_schema
    assert isinstance(schema, type)
    validated = schema.model_validate({"todoId": "x", "outcome": "y", "runtime": runtime})
    assert validated.runtime is runtime
    assert validated.model_dump()["runtime"] is None
