"""SQLite through aiosqlite with one trip to its thread per write (storage.aiosqlite_one_trip).

What a user relies on: every kind of statement the storage layer runs gives the same results as
through SQLAlchemy's own adapter (rows, counts of changed rows, generated keys, RETURNING,
errors that roll back cleanly), and a write costs one handoff to aiosqlite's thread (a query
two), not three or four, which is what makes a plan item cheap. Trips are counted on the public
aiosqlite calls the connection makes (``OneTripConnection.trip``).
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import insert, select, text, update
from sqlalchemy.exc import IntegrityError

from storage import Database
from storage.aiosqlite_one_trip import OneTripConnection
from storage.models import ToolAuditEntry, Turn

ROW = {
    "conversationId": "c",
    "messageId": "m",
    "step": 1,
    "taskId": "t",
    "createdAt": "2026-01-01T00:00:00.000000Z",
    "updatedAt": "2026-01-01T00:00:00.000000Z",
}


@pytest.fixture
def trips(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The calls made on aiosqlite's thread, by the name of the aiosqlite method that made
    each."""
    calls: list[str] = []
    original = OneTripConnection.trip

    async def counted(self: OneTripConnection, call: Any, *args: Any) -> Any:
        calls.append(call.__name__)
        return await original(self, call, *args)

    monkeypatch.setattr(OneTripConnection, "trip", counted)
    yield calls


async def test_the_engine_connects_through_the_one_trip_connection(database: Database) -> None:
    async with database.session() as session:
        connection = await session.connection()
        raw = await connection.get_raw_connection()
        assert isinstance(raw.driver_connection, OneTripConnection)


async def test_a_write_is_one_trip_a_query_two_and_a_transaction_adds_begin_and_commit(
    database: Database, trips: list[str]
) -> None:
    await database.create_schema()
    trips.clear()
    async with database.session() as session:
        await session.execute(insert(Turn).values(turnId="a", **ROW))
        await session.execute(insert(Turn).values(turnId="b", **ROW))
        found = (await session.execute(select(Turn.turnId).order_by(Turn.turnId))).scalars().all()
    assert found == ["a", "b"]
    # BEGIN IMMEDIATE and two inserts: a trip each; the select, a trip to run it and one to
    # fetch its rows; then COMMIT.
    assert trips == ["execute"] * 4 + ["fetchall", "commit"]


async def test_changed_row_counts_are_those_of_the_statement(database: Database) -> None:
    async with database.session() as session:
        await session.execute(insert(Turn).values(turnId="a", **ROW))
        await session.execute(insert(Turn).values(turnId="b", **ROW))
        moved = await session.execute(update(Turn).where(Turn.step == 1).values(step=2))
        unmoved = await session.execute(update(Turn).where(Turn.step == 1).values(step=3))
    assert moved.rowcount == 2  # type: ignore[attr-defined]
    assert unmoved.rowcount == 0  # type: ignore[attr-defined]


async def test_returning_rows_and_generated_keys_come_back(database: Database) -> None:
    audit = {
        "tool_name": "add_task",
        "arguments": "{}",
        "status": "success",
        "user_id": "u",
        "conversation_id": "c",
        "turn_id": "t",
        "tool_call_id": "call",
        "created_at": "2026-01-01T00:00:00.000000Z",
    }
    async with database.session() as session:
        first = await session.execute(insert(ToolAuditEntry).values(**audit))
        returned = await session.execute(
            insert(ToolAuditEntry).values(**audit).returning(ToolAuditEntry.id)
        )
        entry = ToolAuditEntry(**audit)
        session.add(entry)
        await session.flush()
    assert first.inserted_primary_key == (1,)
    assert returned.scalar_one() == 2
    assert entry.id == 3


async def test_many_rows_are_inserted_at_once_and_read_back_in_pieces(database: Database) -> None:
    rows = [{"turnId": f"turn-{index:02}", **ROW} for index in range(25)]
    async with database.session() as session:
        await session.execute(insert(Turn), rows)
    async with database.session(readonly=True) as session:
        result = await session.execute(select(Turn.turnId).order_by(Turn.turnId))
        first = result.fetchmany(10)
        rest = result.fetchall()
        streamed = [
            turn.turnId
            async for turn in await session.stream_scalars(select(Turn).order_by(Turn.turnId))
        ]
    assert [row.turnId for row in [*first, *rest]] == [row["turnId"] for row in rows]
    assert streamed == [row["turnId"] for row in rows]


async def test_a_failed_statement_raises_and_its_transaction_leaves_nothing(
    database: Database,
) -> None:
    with pytest.raises(IntegrityError):
        async with database.session() as session:
            await session.execute(insert(Turn).values(turnId="a", **ROW))
            await session.execute(insert(Turn).values(turnId="a", **ROW))
    async with database.session() as session:
        count = (await session.execute(text("SELECT count(*) FROM turns"))).scalar_one()
        await session.execute(insert(Turn).values(turnId="a", **ROW))
    assert count == 0


async def test_a_statement_written_alone_is_one_trip_committed_with_its_count(
    database: Database, trips: list[str]
) -> None:
    """``Database.write_alone`` (the step claim of every graph step): no BEGIN, no COMMIT, and
    the change is there for every other connection at once."""
    async with database.session() as session:
        await session.execute(insert(Turn).values(turnId="a", **ROW))
    trips.clear()

    moved = await database.write_alone(update(Turn).where(Turn.step == 1).values(step=2), {})
    unmoved = await database.write_alone(update(Turn).where(Turn.step == 1).values(step=3), {})

    assert (moved, unmoved) == (1, 0)
    assert trips == ["execute"] * 2
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


LEAVES_A_CONNECTION_OPEN = """
import asyncio, sys
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine
from storage.aiosqlite_one_trip import one_trip_dbapi

async def main() -> None:
    engine = create_async_engine(f"sqlite+aiosqlite:///{sys.argv[1]}", module=one_trip_dbapi())
    connection = await engine.connect()
    await connection.execute(text("SELECT 1"))
    globals()["kept"] = connection  # never closed, never disposed

asyncio.run(main())
print("done", flush=True)
"""


def test_a_script_that_leaves_a_connection_open_still_exits(tmp_path: Path) -> None:
    """The connection's thread is a daemon, as SQLAlchemy makes aiosqlite's: a script that
    forgets to close its engine ends instead of hanging on that thread."""
    finished = subprocess.run(
        [sys.executable, "-c", LEAVES_A_CONNECTION_OPEN, str(tmp_path / "open.db")],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).resolve().parents[3],
        check=False,
    )
    assert finished.stdout.strip() == "done", finished.stderr
    assert finished.returncode == 0, finished.stderr
