"""The task and audit repositories against a real SQLite file."""

from __future__ import annotations

import pytest

from storage import Database
from storage.repositories import CallOrigin, TaskRepository, ToolAuditRepository
from tests.conftest import BOTH_BACKENDS

pytestmark = BOTH_BACKENDS


async def test_a_user_never_reads_or_changes_another_users_task(database: Database) -> None:
    async with database.session() as session:
        alice_task = await TaskRepository(session, "alice").add("Buy milk")
    async with database.session() as session:
        bob = TaskRepository(session, "bob")
        assert await bob.get(alice_task.id) is None
        assert await bob.find() == []
        alice_row = await TaskRepository(session, "alice").get(alice_task.id)
        assert alice_row is not None
        with pytest.raises(ValueError, match="another user"):
            await bob.soft_delete(alice_row)


async def test_deleted_tasks_disappear_from_every_read(database: Database) -> None:
    async with database.session() as session:
        tasks = TaskRepository(session, "alice")
        kept = await tasks.add("Keep me")
        gone = await tasks.add("Delete me")
        await tasks.soft_delete(gone)
    async with database.session() as session:
        tasks = TaskRepository(session, "alice")
        assert await tasks.get(gone.id) is None
        assert [task.id for task in await tasks.find()] == [kept.id]


async def test_find_filters_by_completion_and_keeps_creation_order(database: Database) -> None:
    async with database.session() as session:
        tasks = TaskRepository(session, "alice")
        first = await tasks.add("First")
        second = await tasks.add("Second", "details")
        third = await tasks.add("Third")
        await tasks.mark_completed(second)
    async with database.session() as session:
        tasks = TaskRepository(session, "alice")
        assert [t.title for t in await tasks.find()] == ["First", "Second", "Third"]
        assert [t.id for t in await tasks.find(completed=False)] == [first.id, third.id]
        assert [t.to_dict()["description"] for t in await tasks.find(completed=True)] == ["details"]


async def test_audit_rows_come_back_in_recording_order(database: Database) -> None:
    origin = CallOrigin(user_id="alice", conversation_id="c", turn_id="t", tool_call_id="call")
    async with database.session() as session:
        audit = ToolAuditRepository(session)
        await audit.record(origin, "add_task", {"title": "Á"}, status="success")
        await audit.record(
            origin, "delete_task", {"task_identifier": "x"}, status="error", error_code="NOT_FOUND"
        )
    async with database.session() as session:
        rows = await ToolAuditRepository(session).for_turn("c", "t")
    assert [(r.tool_name, r.status, r.error_code) for r in rows] == [
        ("add_task", "success", None),
        ("delete_task", "error", "NOT_FOUND"),
    ]
    assert rows[0].arguments == '{"title": "Á"}'
