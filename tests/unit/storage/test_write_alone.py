"""``Database.write_alone`` on SQLite: one write statement as a transaction of its own (the step
claim of every model step and the model answer's record; on PostgreSQL, in autocommit:
``tests/integration/storage/test_postgres_backend.py``). What a caller
relies on: the count of changed rows, the change visible to every other connection at once, and
a failed statement that changes nothing and leaves the connection fit for the next transaction.
And the transactions beside it: one that cannot get SQLite's write lock in time fails as any
database error does, and leaves the database fit for the next."""

from __future__ import annotations

import sqlite3
from contextlib import closing

import pytest
from sqlalchemy import insert, select, update
from sqlalchemy.exc import IntegrityError, OperationalError, SQLAlchemyError

import storage.engine
from storage import Database
from storage.models import Turn

ROW = {
    "conversationId": "c",
    "messageId": "m",
    "step": 1,
    "taskId": "t",
    "createdAt": "2026-01-01T00:00:00.000000Z",
    "updatedAt": "2026-01-01T00:00:00.000000Z",
}


async def test_a_statement_written_alone_is_committed_with_its_count(database: Database) -> None:
    async with database.session() as session:
        await session.execute(insert(Turn).values(turnId="a", **ROW))

    moved = await database.write_alone(update(Turn).where(Turn.step == 1).values(step=2), {})
    unmoved = await database.write_alone(update(Turn).where(Turn.step == 1).values(step=3), {})

    assert (moved, unmoved) == (1, 0)
    async with database.session(readonly=True) as session:
        assert (await session.execute(select(Turn.step))).scalars().all() == [2]
    path = database.url.split("///", 1)[1]
    with closing(sqlite3.connect(path)) as other:
        assert other.execute("SELECT step FROM turns").fetchall() == [(2,)]


async def test_a_statement_written_alone_that_fails_changes_nothing(database: Database) -> None:
    async with database.session() as session:
        await session.execute(insert(Turn).values(turnId="a", **ROW))
    with pytest.raises(IntegrityError):
        await database.write_alone(insert(Turn).values(turnId="a", **ROW), {})
    async with database.session() as session:
        await session.execute(insert(Turn).values(turnId="b", **ROW))
        found = (await session.execute(select(Turn.turnId).order_by(Turn.turnId))).scalars()
        assert found.all() == ["a", "b"]


async def test_a_chain_of_writes_stops_at_the_first_that_changes_nothing(
    database: Database,
) -> None:
    """``write_chain``: the step claim and the answer's record in one transaction; an answer is
    never recorded for a step another run had taken."""
    async with database.session() as session:
        await session.execute(insert(Turn).values(turnId="a", **ROW))
    moved_then_added = [
        (update(Turn).where(Turn.step == 1).values(step=2), {}),
        (insert(Turn).values(turnId="b", **ROW), {}),
    ]
    assert await database.write_chain(moved_then_added) == [1, 1]
    assert await database.write_chain(
        [
            (update(Turn).where(Turn.turnId == "none").values(step=3), {}),
            (insert(Turn).values(turnId="c", **ROW), {}),
        ]
    ) == [0]
    async with database.session(readonly=True) as session:
        found = (await session.execute(select(Turn.turnId, Turn.step).order_by(Turn.turnId))).all()
    assert [tuple(row) for row in found] == [("a", 2), ("b", 1)]


async def test_a_transaction_that_cannot_get_the_write_lock_fails_as_a_database_error(
    database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lock still held when the wait is over is reported as SQLAlchemy's error (the callers
    turn that into DATABASE_ERROR), not the driver's."""
    monkeypatch.setattr(storage.engine, "SQLITE_BUSY_TIMEOUT_MS", 50)
    monkeypatch.setattr(storage.engine, "LOCK_WAIT_SECONDS", 0.0)
    await database.create_schema()
    path = database.url.split("///", 1)[1]
    with closing(sqlite3.connect(path, isolation_level=None)) as other:
        other.execute("BEGIN IMMEDIATE")
        with pytest.raises(OperationalError) as raised:
            async with database.session() as session:
                await session.execute(insert(Turn).values(turnId="a", **ROW))
        assert isinstance(raised.value, SQLAlchemyError)
        assert "locked" in str(raised.value)
        other.execute("ROLLBACK")
    async with database.session() as session:
        await session.execute(insert(Turn).values(turnId="b", **ROW))
    async with database.session(readonly=True) as session:
        assert (await session.execute(select(Turn.turnId))).scalars().all() == ["b"]
