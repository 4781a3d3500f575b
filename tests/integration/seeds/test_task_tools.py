"""The five personal-task tools, run through the real tools node as the supervisor runs them."""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain_core.messages import ToolMessage
from sqlalchemy import func, select, text

from agent.context import Context
from agent.tools.personal_tasks import build_task_tools
from storage import Database
from storage.models import Task
from storage.repositories import TaskRepository, ToolAuditRepository
from tests.conftest import BOTH_BACKENDS
from tests.tool_harness import ToolCallSpec, run_tool_calls

pytestmark = BOTH_BACKENDS

TOOL_NAMES = ["add_task", "list_tasks", "complete_task", "update_task", "delete_task"]


async def run_as(
    database: Database, user_id: str, *calls: ToolCallSpec, turn_id: str = "turn-1"
) -> tuple[list[ToolMessage], dict[str, Any]]:
    return await run_tool_calls(
        build_task_tools(database), calls, context=Context(user_id=user_id), turn_id=turn_id
    )


def body(message: ToolMessage) -> dict[str, Any]:
    payload: dict[str, Any] = json.loads(str(message.content))
    return payload


def assert_error(message: ToolMessage, code: str) -> dict[str, Any]:
    payload = body(message)
    assert message.status == "error"
    assert payload["status"] == "error"
    assert payload["error"] == code, payload
    assert payload["message"]
    assert payload["suggestion"]
    return payload


async def add(database: Database, user_id: str, title: str) -> str:
    (message,), _ = await run_as(database, user_id, ("add_task", {"title": title}))
    task_id: str = body(message)["task_id"]
    return task_id


async def titles(database: Database, user_id: str, filter: str = "all") -> list[str]:
    (message,), _ = await run_as(database, user_id, ("list_tasks", {"filter": filter}))
    return [task["title"] for task in body(message)["tasks"]]


# --- what the model sees -------------------------------------------------------------------


def test_the_model_is_never_offered_a_user_conversation_or_turn_argument(
    database: Database,
) -> None:
    tools = build_task_tools(database)
    assert [tool.name for tool in tools] == TOOL_NAMES
    for tool in tools:
        schema = tool.tool_call_schema.model_json_schema()  # type: ignore[union-attr]
        fields = set(schema.get("properties", {}))
        assert not {f for f in fields if "user" in f or "conversation" in f or "turn" in f}
        assert not fields & {"runtime", "tasks"}
        # Sent with every call: one line on what the tool does; the rules and error codes of
        # all five are in the toolset's prompt section (test_personal_tasks_prompt).
        assert 0 < len(tool.description) <= 100 and "\n" not in tool.description


def test_the_list_filter_is_a_strict_enum_in_the_schema(database: Database) -> None:
    list_tool = build_task_tools(database)[1]
    schema = list_tool.tool_call_schema.model_json_schema()  # type: ignore[union-attr]
    assert schema["properties"]["filter"]["enum"] == ["all", "pending", "completed"]


async def test_a_user_id_sent_by_the_model_is_ignored(database: Database) -> None:
    (message,), _ = await run_as(
        database, "bob", ("add_task", {"title": "Forged", "user_id": "alice"})
    )
    assert body(message)["status"] == "success"
    assert await titles(database, "alice") == []
    assert await titles(database, "bob") == ["Forged"]


# --- the happy path and modifiedTasks ------------------------------------------------------


async def test_a_turn_of_changes_is_recorded_in_modified_tasks_in_order(
    database: Database,
) -> None:
    messages, state = await run_as(
        database,
        "alice",
        ("add_task", {"title": "  Buy milk  ", "description": "2 litres"}),
        ("add_task", {"title": "Call mom"}),
        ("list_tasks", {}),
        ("complete_task", {"task_identifier": "buy milk"}),
        ("update_task", {"task_identifier": "Call mom", "new_title": "Call mum"}),
        ("delete_task", {"task_identifier": "call mum"}),
        ("delete_task", {"task_identifier": "call mum"}),
    )
    added = body(messages[0])
    assert added["title"] == "Buy milk"  # trimmed
    assert added["description"] == "2 litres"
    assert added["completed"] is False
    call_mom_id = body(messages[1])["task_id"]
    listed = body(messages[2])
    assert listed["count"] == 2
    assert [t["title"] for t in listed["tasks"]] == ["Buy milk", "Call mom"]
    assert body(messages[3]) == {
        "status": "success",
        "task_id": added["task_id"],
        "title": "Buy milk",
        "completed": True,
    }
    assert body(messages[4])["title"] == "Call mum"
    assert body(messages[5])["deleted"] is True
    assert_error(messages[6], "NOT_FOUND")  # a deleted task is gone for good

    assert state["modifiedTasks"] == [
        {"action": "created", "task_id": added["task_id"], "title": "Buy milk"},
        {"action": "created", "task_id": call_mom_id, "title": "Call mom"},
        {"action": "completed", "task_id": added["task_id"], "title": "Buy milk"},
        {"action": "updated", "task_id": call_mom_id, "title": "Call mum"},
        {"action": "deleted", "task_id": call_mom_id, "title": "Call mum"},
    ]
    assert [m.tool_call_id for m in messages] == [f"call_{i}" for i in range(7)]
    assert [m.name for m in messages[3:6]] == ["complete_task", "update_task", "delete_task"]


async def test_list_filters_pending_and_completed(database: Database) -> None:
    await add(database, "alice", "Done already")
    await add(database, "alice", "Still to do")
    await run_as(database, "alice", ("complete_task", {"task_identifier": "Done already"}))
    assert await titles(database, "alice", "pending") == ["Still to do"]
    assert await titles(database, "alice", "completed") == ["Done already"]
    assert await titles(database, "alice", "all") == ["Done already", "Still to do"]


async def test_completing_a_done_task_succeeds_without_reporting_a_change(
    database: Database,
) -> None:
    task_id = await add(database, "alice", "Water plants")
    messages, state = await run_as(
        database,
        "alice",
        ("complete_task", {"task_identifier": task_id}),
        ("complete_task", {"task_identifier": task_id}),
    )
    assert body(messages[1])["already_completed"] is True
    assert [entry["action"] for entry in state["modifiedTasks"]] == ["completed"]


async def test_update_can_change_only_the_description_or_clear_it(database: Database) -> None:
    task_id = await add(database, "alice", "Party")
    messages, _ = await run_as(
        database,
        "alice",
        ("update_task", {"task_identifier": task_id, "new_description": "bring cake"}),
        ("update_task", {"task_identifier": "party", "new_description": ""}),
    )
    assert body(messages[0])["description"] == "bring cake"
    assert body(messages[0])["title"] == "Party"
    assert body(messages[1])["description"] == ""


# --- resolving task_identifier -------------------------------------------------------------


async def test_an_exact_title_wins_over_partial_matches(database: Database) -> None:
    await add(database, "alice", "Buy milk and eggs")
    milk_id = await add(database, "alice", "Buy milk")
    (message,), _ = await run_as(
        database, "alice", ("complete_task", {"task_identifier": "BUY MILK"})
    )
    assert body(message)["task_id"] == milk_id
    assert await titles(database, "alice", "pending") == ["Buy milk and eggs"]


async def test_several_partial_matches_name_every_candidate_and_change_nothing(
    database: Database,
) -> None:
    milk_id = await add(database, "alice", "Buy milk")
    bread_id = await add(database, "alice", "Buy bread")
    messages, state = await run_as(database, "alice", ("delete_task", {"task_identifier": "buy"}))
    payload = assert_error(messages[0], "VALIDATION_ERROR")
    assert milk_id in payload["message"] and bread_id in payload["message"]
    assert "'Buy milk'" in payload["message"] and "'Buy bread'" in payload["message"]
    assert {c["id"] for c in payload["candidates"]} == {milk_id, bread_id}
    assert state["modifiedTasks"] == []
    assert await titles(database, "alice") == ["Buy milk", "Buy bread"]


async def test_no_match_is_not_found_with_a_way_forward(database: Database) -> None:
    await add(database, "alice", "Buy milk")
    (message,), _ = await run_as(database, "alice", ("complete_task", {"task_identifier": "xyz"}))
    payload = assert_error(message, "NOT_FOUND")
    assert "'xyz'" in payload["message"]
    assert "list_tasks" in payload["suggestion"]


async def test_a_truncated_id_is_invalid_id(database: Database) -> None:
    (message,), _ = await run_as(
        database, "alice", ("delete_task", {"task_identifier": "550e8400-e29b-41d4-a716"})
    )
    assert_error(message, "INVALID_ID")


async def test_an_unknown_well_formed_id_is_not_found(database: Database) -> None:
    (message,), _ = await run_as(
        database,
        "alice",
        ("complete_task", {"task_identifier": "550e8400-e29b-41d4-a716-446655440000"}),
    )
    assert_error(message, "NOT_FOUND")


# --- validation ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (("add_task", {"title": "   "}), "title"),
        (("add_task", {"title": "x" * 201}), "title"),
        (("add_task", {"title": "ok", "description": "d" * 2001}), "description"),
        (("add_task", {}), "title"),
        (("list_tasks", {"filter": "done"}), "filter"),
        (("update_task", {"task_identifier": "ok", "new_title": " "}), "new_title"),
        (("complete_task", {"task_identifier": "  "}), "task_identifier"),
    ],
)
async def test_invalid_arguments_are_validation_errors_and_write_nothing(
    database: Database, call: ToolCallSpec, field: str
) -> None:
    await add(database, "alice", "ok")
    messages, state = await run_as(database, "alice", call)
    payload = assert_error(messages[0], "VALIDATION_ERROR")
    assert field in payload["message"]
    assert state["modifiedTasks"] == []
    assert await titles(database, "alice") == ["ok"]


async def test_the_limits_themselves_are_accepted(database: Database) -> None:
    (message,), _ = await run_as(
        database, "alice", ("add_task", {"title": "t" * 200, "description": "d" * 2000})
    )
    assert len(body(message)["title"]) == 200


async def test_update_with_nothing_to_change_is_a_validation_error(database: Database) -> None:
    await add(database, "alice", "Party")
    (message,), state = await run_as(
        database, "alice", ("update_task", {"task_identifier": "Party"})
    )
    payload = assert_error(message, "VALIDATION_ERROR")
    assert "new_title" in payload["message"]
    assert state["modifiedTasks"] == []


# --- isolation -----------------------------------------------------------------------------


async def test_users_with_look_alike_titles_never_touch_each_others_tasks(
    database: Database,
) -> None:
    alice_id = await add(database, "alice", "Buy milk")
    bob_id = await add(database, "bob", "Buy milk")

    messages, state = await run_as(
        database,
        "bob",
        ("complete_task", {"task_identifier": alice_id}),
        ("update_task", {"task_identifier": alice_id, "new_title": "hijacked"}),
        ("delete_task", {"task_identifier": alice_id}),
        ("complete_task", {"task_identifier": "buy milk"}),
        ("list_tasks", {}),
    )
    for message in messages[:3]:
        payload = assert_error(message, "NOT_FOUND")
        assert "hijacked" not in payload["message"]
    assert body(messages[3])["task_id"] == bob_id  # the title resolves to bob's own task
    assert [t["id"] for t in body(messages[4])["tasks"]] == [bob_id]
    assert [entry["task_id"] for entry in state["modifiedTasks"]] == [bob_id]

    (alice_list,), _ = await run_as(database, "alice", ("list_tasks", {}))
    assert body(alice_list)["tasks"][0] | {"updated_at": None} == {
        "id": alice_id,
        "title": "Buy milk",
        "description": "",
        "completed": False,
        "created_at": body(alice_list)["tasks"][0]["created_at"],
        "updated_at": None,
    }


# --- deleted tasks -------------------------------------------------------------------------


async def test_a_deleted_task_is_invisible_to_every_tool(database: Database) -> None:
    task_id = await add(database, "alice", "Old chore")
    await run_as(database, "alice", ("delete_task", {"task_identifier": task_id}))
    messages, _ = await run_as(
        database,
        "alice",
        ("list_tasks", {}),
        ("complete_task", {"task_identifier": task_id}),
        ("update_task", {"task_identifier": "Old chore", "new_title": "New"}),
        ("delete_task", {"task_identifier": task_id}),
    )
    assert body(messages[0])["count"] == 0
    for message in messages[1:]:
        assert_error(message, "NOT_FOUND")
    async with database.session() as session:  # soft delete: the row is kept, just hidden
        assert await session.scalar(select(func.count()).select_from(Task)) == 1


# --- audit ---------------------------------------------------------------------------------


async def test_every_call_is_audited_with_its_outcome_and_origin(database: Database) -> None:
    await run_as(
        database,
        "alice",
        ("add_task", {"title": "Buy milk", "user_id": "mallory"}),
        ("list_tasks", {"filter": "pending"}),
        ("list_tasks", {"filter": "done"}),
        ("complete_task", {"task_identifier": "nothing like it"}),
        ("update_task", {"task_identifier": "milk", "new_title": "Buy oat milk"}),
        ("delete_task", {"task_identifier": "550e8400-e29b"}),
        turn_id="turn-7",
    )
    async with database.session() as session:
        rows = await ToolAuditRepository(session).for_user("alice")
    assert [(r.tool_name, r.status, r.error_code) for r in rows] == [
        ("add_task", "success", None),
        ("list_tasks", "success", None),
        ("list_tasks", "error", "VALIDATION_ERROR"),
        ("complete_task", "error", "NOT_FOUND"),
        ("update_task", "success", None),
        ("delete_task", "error", "INVALID_ID"),
    ]
    assert {(r.conversation_id, r.turn_id) for r in rows} == {("conv-1", "turn-7")}
    assert [r.tool_call_id for r in rows] == [f"call_{i}" for i in range(6)]
    # The model's arguments are kept as sent, forged user id included; the runtime is not.
    assert json.loads(rows[0].arguments) == {"title": "Buy milk", "user_id": "mallory"}


# --- database failures ---------------------------------------------------------------------


async def test_a_database_failure_is_reported_audited_and_leaves_nothing_behind(
    database: Database,
) -> None:
    await add(database, "alice", "Before the outage")
    async with database.engine.begin() as connection:
        await connection.execute(text("ALTER TABLE tasks RENAME TO tasks_offline"))

    messages, state = await run_as(
        database,
        "alice",
        ("add_task", {"title": "During the outage"}),
        ("list_tasks", {}),
    )
    for message in messages:
        payload = assert_error(message, "DATABASE_ERROR")
        assert "nothing was saved" in payload["message"]
        reason = payload["message"].split("(", 1)[1].split("); nothing was saved")[0]
        assert "tasks" in reason, "the user is not told why (the driver names the missing table)"
    assert state["modifiedTasks"] == []

    async with database.engine.begin() as connection:
        await connection.execute(text("ALTER TABLE tasks_offline RENAME TO tasks"))
    assert await titles(database, "alice") == ["Before the outage"]
    async with database.session() as session:
        rows = await ToolAuditRepository(session).for_user("alice")
    assert [(r.tool_name, r.error_code) for r in rows if r.status == "error"] == [
        ("add_task", "DATABASE_ERROR"),
        ("list_tasks", "DATABASE_ERROR"),
    ]


async def test_a_change_whose_audit_cannot_be_written_is_rolled_back(
    database: Database,
) -> None:
    await database.create_schema()
    async with database.engine.begin() as connection:
        await connection.execute(text("DROP TABLE tool_audit"))

    (message,), state = await run_as(database, "alice", ("add_task", {"title": "Unaudited"}))

    assert_error(message, "DATABASE_ERROR")
    assert state["modifiedTasks"] == []
    async with database.session() as session:
        assert await TaskRepository(session, "alice").find() == []


async def test_a_run_without_a_user_cannot_reach_any_tasks(database: Database) -> None:
    await add(database, "alice", "Private")
    (message,), _ = await run_as(database, "", ("list_tasks", {}))
    payload = assert_error(message, "VALIDATION_ERROR")
    assert "no authenticated user" in payload["message"]
    async with database.session() as session:
        rows = await ToolAuditRepository(session).for_user("")
    assert [(r.tool_name, r.error_code) for r in rows] == [("list_tasks", "VALIDATION_ERROR")]
