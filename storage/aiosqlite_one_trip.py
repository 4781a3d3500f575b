"""aiosqlite for SQLAlchemy with one trip to the connection's thread per statement.

aiosqlite runs every sqlite3 call on a thread of its own; each call is a handoff to that thread
and a wake-up of the event loop when it is done (about 0.1 ms on a small machine, far more than
SQLite needs for a row). SQLAlchemy's aiosqlite adapter makes three or four such calls per
statement: open a cursor, execute, fetch the rows, close the cursor. A plan item runs about a
dozen statements, so those handoffs were a third of turnplan's overhead per item.

``OneTripConnection`` hands SQLAlchemy a ``BufferedCursor`` instead: the statement is executed,
its rows fetched and the sqlite3 cursor closed in one call on aiosqlite's thread, and the
result is kept for SQLAlchemy to read. Everything else (the URL, connect arguments, pooling,
error translation, the dialect) stays SQLAlchemy's own; ``one_trip_dbapi()`` is passed to
``create_async_engine`` as its ``module``.

Results are buffered whole, as SQLAlchemy's adapter already does for every non-streaming
statement; a ``stream()`` gets its rows from the buffer too.
"""

from __future__ import annotations

import sqlite3
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any

import aiosqlite
from sqlalchemy.dialects.sqlite.aiosqlite import AsyncAdapt_aiosqlite_dbapi

Row = tuple[Any, ...]


@dataclass(frozen=True)
class _Finished:
    """What one statement left behind, read on aiosqlite's thread before its cursor closed."""

    description: tuple[tuple[Any, ...], ...] | None
    rows: list[Row]
    rowcount: int
    lastrowid: int | None


def _run_statement(
    connection: aiosqlite.Connection, operation: str, parameters: Any, many: bool
) -> _Finished:
    """Execute one statement and collect its result (runs on aiosqlite's thread)."""
    cursor = connection._conn.cursor()
    try:
        if many:
            cursor.executemany(operation, parameters)
        else:
            cursor.execute(operation, parameters)
        description = cursor.description
        rows = cursor.fetchall() if description is not None else []
        # Read after the fetch: for a statement with RETURNING, sqlite3 counts rows as they
        # are stepped.
        return _Finished(description, rows, cursor.rowcount, cursor.lastrowid)
    finally:
        cursor.close()


class BufferedCursor:
    """The cursor SQLAlchemy's adapter drives (aiosqlite's ``Cursor`` interface), whose
    ``execute`` is the only call that leaves the event loop."""

    def __init__(self, connection: OneTripConnection) -> None:
        self._connection = connection
        self._rows: deque[Row] = deque()
        self.description: tuple[tuple[Any, ...], ...] | None = None
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
        return await self._run(operation, () if parameters is None else parameters, many=False)

    async def executemany(self, operation: str, parameters: Sequence[Any]) -> BufferedCursor:
        return await self._run(operation, parameters, many=True)

    async def _run(self, operation: str, parameters: Any, *, many: bool) -> BufferedCursor:
        on_thread: Callable[..., Awaitable[_Finished]] = self._connection._execute
        finished = await on_thread(_run_statement, self._connection, operation, parameters, many)
        self.description = finished.description
        self._rows = deque(finished.rows)
        self.rowcount = finished.rowcount
        self.lastrowid = finished.lastrowid
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
    """An aiosqlite connection whose cursors run each statement in one call on its thread."""

    def cursor(self) -> BufferedCursor:  # type: ignore[override]
        # aiosqlite's own ``cursor()`` is itself a trip to the thread; a buffered cursor needs
        # no sqlite3 cursor until it executes.
        return BufferedCursor(self)

    async def commit(self) -> None:
        """Commit the open transaction; with none open (a statement run on its own, which
        SQLite commits itself) there is nothing to send, and no trip is made."""
        if self._connection is not None and self._connection.in_transaction:
            await super().commit()

    async def rollback(self) -> None:
        """Roll back the open transaction; with none open, no trip is made."""
        if self._connection is not None and self._connection.in_transaction:
            await super().rollback()


def one_trip_connect(database: str, **kwargs: Any) -> OneTripConnection:
    """``aiosqlite.connect`` returning a ``OneTripConnection``."""

    def connector() -> sqlite3.Connection:
        connection: sqlite3.Connection = sqlite3.connect(database, **kwargs)
        return connection

    connection = OneTripConnection(connector, iter_chunk_size=64)
    # As SQLAlchemy does for aiosqlite's own connections: a connection left open must not keep
    # the interpreter from exiting.
    connection._thread.daemon = True
    return connection


class _OneTripAiosqliteDbapi(AsyncAdapt_aiosqlite_dbapi):
    """SQLAlchemy's aiosqlite DBAPI adapter, connecting through ``one_trip_connect``."""

    def connect(self, *args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("async_creator_fn", one_trip_connect)
        return super().connect(*args, **kwargs)


def one_trip_dbapi() -> AsyncAdapt_aiosqlite_dbapi:
    """The DBAPI module to give ``create_async_engine(..., module=...)`` for a
    ``sqlite+aiosqlite`` URL."""
    return _OneTripAiosqliteDbapi(aiosqlite, sqlite3)
