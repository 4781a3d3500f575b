"""TurnTodoRepository: seed 004's data-access interface, async, scoped by conversation and turn."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from storage import Database
from storage.repositories import NewTurnTodo, TurnScope, TurnTodoRepository
from tests.conftest import BOTH_BACKENDS

pytestmark = BOTH_BACKENDS

SCOPE = TurnScope(conversation_id="conv-a", turn_id="turn-1")
OTHER_TURN = TurnScope(conversation_id="conv-a", turn_id="turn-2")
OTHER_CONVERSATION = TurnScope(conversation_id="conv-b", turn_id="turn-1")


async def test_create_returns_a_pending_row_with_id_and_timestamp(database: Database) -> None:
    async with database.session() as session:
        row = await TurnTodoRepository(session).create(SCOPE, NewTurnTodo(title="Buy milk"))
    assert row.status == "pending"
    assert len(row.id) == 36
    assert row.createdAt.endswith("Z")
    assert row.startedAt is None and row.completedAt is None and row.outcome is None


async def test_create_batch_and_find_by_turn_order_by_priority(database: Database) -> None:
    async with database.session() as session:
        repository = TurnTodoRepository(session)
        await repository.create_batch(
            SCOPE,
            [
                NewTurnTodo(title="second", priority=1),
                NewTurnTodo(title="first", priority=0),
                NewTurnTodo(title="third", priority=2, agent_type="researcher"),
            ],
        )
    async with database.session() as session:
        rows = await TurnTodoRepository(session).find_by_turn(SCOPE)
    assert [r.title for r in rows] == ["first", "second", "third"]
    assert rows[2].agentType == "researcher"


async def test_find_by_turn_filters_by_one_status_or_several(database: Database) -> None:
    async with database.session() as session:
        repository = TurnTodoRepository(session)
        a, b, _c = await repository.create_batch(
            SCOPE, [NewTurnTodo(title=t, priority=i) for i, t in enumerate("abc")]
        )
        await repository.update(a.id, status="completed", outcome="done")
        await repository.update(b.id, status="in_progress")
    async with database.session() as session:
        repository = TurnTodoRepository(session)
        assert [r.title for r in await repository.find_by_turn(SCOPE, "completed")] == ["a"]
        open_rows = await repository.find_by_turn(SCOPE, ["pending", "in_progress"])
        assert [r.title for r in open_rows] == ["b", "c"]


async def test_rows_of_other_turns_and_conversations_are_invisible(database: Database) -> None:
    async with database.session() as session:
        repository = TurnTodoRepository(session)
        mine = await repository.create(SCOPE, NewTurnTodo(title="mine"))
        await repository.create(OTHER_TURN, NewTurnTodo(title="other turn"))
        await repository.create(OTHER_CONVERSATION, NewTurnTodo(title="other conversation"))
    async with database.session() as session:
        repository = TurnTodoRepository(session)
        assert [r.title for r in await repository.find_by_turn(SCOPE)] == ["mine"]
        assert await repository.find_by_id(mine.id, OTHER_TURN) is None
        assert await repository.find_by_id(mine.id, OTHER_CONVERSATION) is None
        found = await repository.find_by_id(mine.id, SCOPE)
        assert found is not None and found.title == "mine"
        assert (await repository.count_by_status(OTHER_CONVERSATION))["pending"] == 1


async def test_update_changes_fields_and_rejects_unknown_ones(database: Database) -> None:
    async with database.session() as session:
        repository = TurnTodoRepository(session)
        row = await repository.create(SCOPE, NewTurnTodo(title="x"))
        updated = await repository.update(row.id, status="cancelled", outcome="not needed")
        assert updated is not None and updated.outcome == "not needed"
        assert await repository.update("missing-id", status="completed") is None
        with pytest.raises(ValueError, match="conversationId"):
            await repository.update(row.id, conversationId="elsewhere")


async def test_count_by_status_reports_every_status(database: Database) -> None:
    async with database.session() as session:
        repository = TurnTodoRepository(session)
        assert await repository.count_by_status(SCOPE) == {
            "pending": 0,
            "in_progress": 0,
            "completed": 0,
            "cancelled": 0,
        }
        rows = await repository.create_batch(SCOPE, [NewTurnTodo(title=str(i)) for i in range(3)])
        await repository.update(rows[0].id, status="completed")
        assert await repository.count_by_status(SCOPE) == {
            "pending": 2,
            "in_progress": 0,
            "completed": 1,
            "cancelled": 0,
        }


async def test_repository_flushes_but_the_caller_owns_the_transaction(database: Database) -> None:
    class Abort(Exception):
        pass

    with pytest.raises(Abort):
        async with database.session() as session:
            row = await TurnTodoRepository(session).create(SCOPE, NewTurnTodo(title="rolled back"))
            # Flushed: visible inside the transaction...
            assert await TurnTodoRepository(session).find_by_id(row.id) is not None
            raise Abort
    # ...but gone once the caller rolls back.
    async with database.session() as session:
        assert await TurnTodoRepository(session).find_by_turn(SCOPE) == []


async def test_items_sharing_a_priority_keep_the_order_they_were_given(
    database: Database,
) -> None:
    titles = [f"tied {i}" for i in range(12)]
    async with database.session() as session:
        await TurnTodoRepository(session).create_batch(
            SCOPE, [NewTurnTodo(title=t, priority=0) for t in titles]
        )
    async with database.session() as session:
        rows = await TurnTodoRepository(session).find_by_turn(SCOPE)
    assert [r.title for r in rows] == titles


async def test_a_cancel_records_who_cancelled_and_every_read_returns_it(
    database: Database,
) -> None:
    async with database.session() as session:
        repository = TurnTodoRepository(session)
        mine, theirs, done = await repository.create_batch(
            SCOPE, [NewTurnTodo(title=t, priority=i) for i, t in enumerate("abc")]
        )
        at = "2026-01-01T00:00:00.000000Z"
        assert await repository.close_if_open(
            mine.id, status="cancelled", outcome="not wanted", completed_at=at, cancelled_by="user"
        )
        assert await repository.close_if_open(
            theirs.id,
            status="cancelled",
            outcome="NOT_FOUND",
            completed_at=at,
            cancelled_by="agent",
        )
        assert await repository.close_if_open(
            done.id, status="completed", outcome="ok", completed_at=at
        )
        # A second cancel of a closed row changes nothing, and records nothing twice.
        assert not await repository.close_if_open(
            mine.id, status="cancelled", outcome="again", completed_at=at, cancelled_by="agent"
        )
        with pytest.raises(ValueError, match="cancelled_by"):
            await repository.close_if_open(
                done.id, status="cancelled", outcome="who?", completed_at=at
            )
    async with database.session(readonly=True) as session:
        rows = await TurnTodoRepository(session).find_by_turn(SCOPE)
    assert [(r.title, r.canceller()) for r in rows] == [("a", "user"), ("b", "agent"), ("c", None)]
    assert [r.to_dict().get("cancelledBy", "-") for r in rows] == ["user", "agent", "-"]


async def test_a_database_made_before_cancellations_were_recorded_gains_their_table(
    database: Database,
) -> None:
    """An existing database (SQLite or PostgreSQL) is not refused: the next process adds the
    table, and a row cancelled before it existed reads as cancelled by no one known."""
    async with database.session() as session:
        repository = TurnTodoRepository(session)
        old, new = await repository.create_batch(
            SCOPE, [NewTurnTodo(title="old"), NewTurnTodo(title="new")]
        )
    async with database.engine.begin() as connection:
        await connection.execute(text("DROP TABLE todo_cancellations"))
        await connection.execute(
            text("UPDATE turn_todos SET status = 'cancelled', outcome = 'gone' WHERE id = :id"),
            {"id": old.id},
        )
    reopened = Database(database.url)
    try:
        async with reopened.session() as session:
            repository = TurnTodoRepository(session)
            assert await repository.close_if_open(
                new.id,
                status="cancelled",
                outcome="not wanted",
                completed_at="2026-01-01T00:00:00.000000Z",
                cancelled_by="user",
            )
        async with reopened.session(readonly=True) as session:
            rows = await TurnTodoRepository(session).find_by_turn(SCOPE)
    finally:
        await reopened.dispose()
    assert {r.title: r.canceller() for r in rows} == {"old": None, "new": "user"}
