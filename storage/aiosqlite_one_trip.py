"""aiosqlite for SQLAlchemy with one trip to the connection's thread per write statement,
through aiosqlite's public API only.

aiosqlite runs every sqlite3 call on a thread of its own; each call is a handoff to that thread
and a wake-up of the event loop when it is done (about 0.1 ms on a small machine, far more than
SQLite needs for a row). SQLAlchemy's aiosqlite adapter makes three or four such calls per
statement: open a cursor, execute, fetch the rows, close the cursor. A plan item runs about
seven statements, all writes, so those handoffs were a third of turnplan's overhead per item.

``OneTripConnection`` is an ``aiosqlite.Connection`` whose ``cursor()`` hands SQLAlchemy a
``BufferedCursor``, which opens no cursor ahead of time: a statement goes through the
connection's own ``execute`` (one trip, in which sqlite3 makes a cursor and runs the statement),
a statement that returns rows fetches them in a second trip, and the result is kept for
SQLAlchemy to read. A write is one trip, a query or a ``RETURNING`` two. The sqlite3 cursor is
not closed, which would be one more trip: a statement run to its end (a write, or a query whose
rows are all fetched) has been reset by sqlite3 and holds no lock, and the cursor is freed with
its last reference, as with aiosqlite's own ``await connection.execute(...)``. Commit and
rollback make no trip when no transaction is open (a statement run on its own, which SQLite
commits itself).

Everything else (the URL, connect arguments, pooling, error translation, the dialect, the
worker thread made a daemon) stays SQLAlchemy's own: ``one_trip_dbapi()`` is SQLAlchemy's
aiosqlite DBAPI adapter given the aiosqlite module with ``connect`` returning a
``OneTripConnection``, passed to ``create_async_engine`` as its ``module``.

Results are buffered whole, as SQLAlchemy's adapter already does for every non-streaming
statement; a ``stream()`` gets its rows from the buffer too.
"""

from __future__ import annotations

import sqlite3
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Iterable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

import aiosqlite
from sqlalchemy.dialects.sqlite.aiosqlite import AsyncAdapt_aiosqlite_dbapi

Row = tuple[Any, ...]
T = TypeVar("T")


class BufferedCursor:
    """The cursor SQLAlchemy's adapter drives (aiosqlite's ``Cursor`` interface), whose
    ``execute`` is the only call that leaves the event loop."""

    def __init__(self, connection: OneTripConnection) -> None:
        self._connection = connection
        self._rows: deque[Row] = deque()
        self.description: Any = None
        self.rowcount = -1
        self.lastrowid: int | None = None
        self.arraysize = 1

    def __await__(self) -> Generator[Any, None, BufferedCursor]:
        # ``await connection.cursor()``, as older SQLAlchemy versions open a cursor.
        return self._ready().__await__()

    async def _ready(self) -> BufferedCursor:
        return self

    async def __aenter__(self) -> BufferedCursor:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def execute(self, operation: str, parameters: Any = None) -> BufferedCursor:
        connection = self._connection
        return await self._finish(await connection.trip(connection.execute, operation, parameters))

    async def executemany(self, operation: str, parameters: Sequence[Any]) -> BufferedCursor:
        connection = self._connection
        cursor = await connection.trip(connection.executemany, operation, parameters)
        return await self._finish(cursor)

    async def _finish(self, cursor: aiosqlite.Cursor) -> BufferedCursor:
        """Keep what the statement left behind; fetch its rows if it returns any."""
        description = cursor.description
        # Tuples: SQLAlchemy's connections set no row factory (aiosqlite types them as Rows).
        rows: Iterable[Any] = (
            await self._connection.trip(cursor.fetchall) if description is not None else ()
        )
        self.description = description
        self._rows = deque(rows)
        # Read after the fetch: for a statement with RETURNING, sqlite3 counts rows as they
        # are stepped.
        self.rowcount = cursor.rowcount
        self.lastrowid = cursor.lastrowid
        return self

    async def fetchone(self) -> Row | None:
        return self._rows.popleft() if self._rows else None

    async def fetchmany(self, size: int | None = None) -> list[Row]:
        count = min(len(self._rows), self.arraysize if size is None else size)
        return [self._rows.popleft() for _ in range(count)]

    async def fetchall(self) -> list[Row]:
        rows = list(self._rows)
        self._rows.clear()
        return rows

    async def close(self) -> None:
        self._rows.clear()

    async def setinputsizes(self, *sizes: object) -> None:
        """Accepted and ignored, as sqlite3 does."""

    def setoutputsize(self, size: object, column: object = None) -> None:
        """Accepted and ignored, as sqlite3 does."""

    def __aiter__(self) -> AsyncIterator[Row]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Row]:
        while self._rows:
            yield self._rows.popleft()


class OneTripConnection(aiosqlite.Connection):
    """An aiosqlite connection whose cursors run each statement in as few calls on its thread
    as its result needs (one for a write)."""

    def cursor(self) -> BufferedCursor:  # type: ignore[override]
        # aiosqlite's own ``cursor()`` is itself a trip to the thread; a buffered cursor needs
        # no sqlite3 cursor until it executes, and then the connection's ``execute`` makes it.
        return BufferedCursor(self)

    async def trip(self, call: Callable[..., Awaitable[T]], *args: Any) -> T:
        """Await one call of aiosqlite's public API that runs on the connection's thread: one
        trip there and back. Every trip this class makes for SQLAlchemy passes here, so that it
        can be counted (``bench.overhead``, the tests)."""
        return await call(*args)

    async def commit(self) -> None:
        """Commit the open transaction; with none open (a statement run on its own, which
        SQLite commits itself) there is nothing to send, and no trip is made."""
        if self.in_transaction:
            await self.trip(super().commit)

    async def rollback(self) -> None:
        """Roll back the open transaction; with none open, no trip is made."""
        if self.in_transaction:
            await self.trip(super().rollback)


def connect(database: str | Path, *, iter_chunk_size: int = 64, **kwargs: Any) -> OneTripConnection:
    """``aiosqlite.connect`` returning a ``OneTripConnection``."""

    def connector() -> sqlite3.Connection:
        connection: sqlite3.Connection = sqlite3.connect(database, **kwargs)
        return connection

    return OneTripConnection(connector, iter_chunk_size)


def _driver_module() -> ModuleType:
    """The aiosqlite module as SQLAlchemy's adapter uses it (its errors, version and
    ``Connection``), with ``connect`` returning a ``OneTripConnection``."""
    module = ModuleType("aiosqlite", aiosqlite.__doc__)
    for name in aiosqlite.__all__:
        setattr(module, name, getattr(aiosqlite, name))
    setattr(module, "connect", connect)  # noqa: B010 (mypy does not know ModuleType's names)
    return module


def one_trip_dbapi() -> AsyncAdapt_aiosqlite_dbapi:
    """The DBAPI module to give ``create_async_engine(..., module=...)`` for a
    ``sqlite+aiosqlite`` URL."""
    return AsyncAdapt_aiosqlite_dbapi(_driver_module(), sqlite3)
