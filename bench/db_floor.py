"""The floor under turnplan's database work: what the timed turn's own SQL costs when sent
without turnplan's repositories, and without SQLAlchemy (issue 26, checkpointed overhead).

``python -m bench.overhead --floor`` records every transaction of the timed turn (its mode, its
statements with their parameters, how it ended) and then replays them, in order, on a fresh
database of the same schema, three ways:

- **raw aiosqlite**: one ``execute`` per statement on one connection, ``BEGIN``/``COMMIT`` as
  statements; the least any asyncio SQLite path can cost;
- **SQLAlchemy Core, a connection per transaction**: ``exec_driver_sql`` on the engine turnplan
  builds (``storage.engine.Database``: SQLAlchemy's aiosqlite driver, the same BEGIN modes),
  checking a connection out of the pool for each transaction as turnplan does: what the
  statements cost through SQLAlchemy's async engine with no ORM session, no compilation and no
  Python of ours;
- **SQLAlchemy Core, one held connection**: the same on one connection kept for the whole
  replay, the pool's checkout and return left out.

The difference between two replays is what that layer costs per item with nothing else on the
event loop; set against the gap to todolist-seq it bounds what replacing the layer could buy.
(Inside the turn the same statements take longer: the checkpointer's writes and the turn's
other tasks share the loop, and each trip to aiosqlite's thread waits for the loop to wake.)
Every replay is checked: it must leave the turn's rows as the turn left them
(``row_statuses``, the same after each way).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

import aiosqlite
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from storage.engine import BEGIN_MODE_OPTION, Database


@dataclass
class RecordedTransaction:
    """One transaction of the turn as the database saw it."""

    begin: str | None
    """``IMMEDIATE`` or ``DEFERRED``; ``None`` for a statement sent alone (SQLite commits it)."""
    statements: list[tuple[str, Any, bool]] = field(default_factory=list)
    """Each statement's SQL, its parameters and whether it ran as ``executemany``."""
    committed: bool = True


@dataclass(frozen=True)
class DatabaseFloor:
    """Wall time per item of the three replays of one turn's transactions."""

    n: int
    transactions: int
    statements: int
    """The turn's statements, ``BEGIN`` and ``COMMIT`` not counted."""
    locking_transactions: int
    """Transactions opened with a ``BEGIN`` (the others are one statement sent alone)."""
    sqlalchemy_core_ms: float
    sqlalchemy_held_ms: float
    raw_aiosqlite_ms: float
    row_statuses: dict[str, int]
    """``turn_todos`` rows by status after each replay (the same after every way): the turn's
    rows, as it closed them."""


class TransactionRecorder:
    """Records the transactions of every engine while ``recording`` (engine events)."""

    def __init__(self) -> None:
        self.recording = False
        self.transactions: list[RecordedTransaction] = []
        self._open: dict[Connection, RecordedTransaction] = {}
        """The transactions open now, by the connection they run on (held only until they end)."""

    def clear(self) -> None:
        self.transactions.clear()
        self._open.clear()

    @contextmanager
    def installed(self) -> Iterator[None]:
        """Listen to every engine while inside."""
        listeners = (
            ("begin", self._on_begin),
            ("before_cursor_execute", self._on_statement),
            ("commit", self._on_commit),
            ("rollback", self._on_rollback),
        )
        for name, listener in listeners:
            event.listen(Engine, name, listener)
        try:
            yield
        finally:
            for name, listener in listeners:
                event.remove(Engine, name, listener)

    def _on_begin(self, connection: Connection) -> None:
        if self.recording:
            self._open[connection] = RecordedTransaction(begin=None)

    def _on_statement(
        self,
        connection: Connection,
        _cursor: Any,
        sql: str,
        parameters: Any,
        _context: Any,
        many: bool,
    ) -> None:
        if not self.recording:
            return
        transaction = self._open.get(connection)
        if transaction is None:
            return
        if sql.startswith("BEGIN "):
            transaction.begin = sql.split()[1]
            return
        transaction.statements.append((sql, parameters, many))

    def _on_commit(self, connection: Connection) -> None:
        self._close(connection, committed=True)

    def _on_rollback(self, connection: Connection) -> None:
        self._close(connection, committed=False)

    def _close(self, connection: Connection, *, committed: bool) -> None:
        transaction = self._open.pop(connection, None)
        if transaction is not None and transaction.statements:
            transaction.committed = committed
            self.transactions.append(transaction)


async def replay_raw(path: Path, transactions: Sequence[RecordedTransaction]) -> float:
    """Seconds to send ``transactions`` through aiosqlite alone, with the pragmas turnplan
    sets (``storage.engine``)."""
    connection = await aiosqlite.connect(path, isolation_level=None)
    try:
        await connection.execute("PRAGMA journal_mode = WAL")
        await connection.execute("PRAGMA synchronous = NORMAL")
        await connection.execute("PRAGMA foreign_keys = ON")
        started = time.perf_counter()
        for transaction in transactions:
            if transaction.begin is not None:
                await connection.execute(f"BEGIN {transaction.begin}")
            for sql, parameters, many in transaction.statements:
                if many:
                    await connection.executemany(sql, parameters)
                else:
                    cursor = await connection.execute(sql, parameters)
                    if cursor.description is not None:
                        await cursor.fetchall()
            if transaction.begin is not None:
                await connection.execute("COMMIT" if transaction.committed else "ROLLBACK")
        return time.perf_counter() - started
    finally:
        await connection.close()


async def replay_core(
    engine: AsyncEngine, transactions: Sequence[RecordedTransaction], *, hold: bool
) -> float:
    """Seconds to send ``transactions`` through SQLAlchemy's async engine as driver SQL, a
    pooled connection per transaction or (``hold``) one connection for all."""
    started = time.perf_counter()
    held = await engine.connect() if hold else None
    try:
        for transaction in transactions:
            connection = held if held is not None else await engine.connect()
            try:
                await _replay_one(connection, transaction)
            finally:
                if held is None:
                    await connection.close()
    finally:
        if held is not None:
            await held.close()
    return time.perf_counter() - started


async def _replay_one(connection: AsyncConnection, transaction: RecordedTransaction) -> None:
    mode = transaction.begin or "IMMEDIATE"
    moded = await connection.execution_options(**{BEGIN_MODE_OPTION: mode})
    for sql, parameters, many in transaction.statements:
        result = await moded.exec_driver_sql(sql, list(parameters) if many else parameters)
        if result.returns_rows:
            result.fetchall()
    if transaction.committed:
        await moded.commit()
    else:
        await moded.rollback()


async def _fresh_database(folder: str, name: str) -> tuple[Path, Database]:
    path = Path(folder) / f"{name}.db"
    database = Database(f"sqlite+aiosqlite:///{path}")
    await database.create_schema()
    return path, database


async def measure_floor(
    n: int, transactions: Sequence[RecordedTransaction], *, repeats: int = 5
) -> DatabaseFloor:
    """Replay ``transactions`` (the timed turn's, with ``n`` items) ``repeats`` times each way
    on fresh databases; the fastest of each way is kept."""
    best = {"core": float("inf"), "held": float("inf"), "raw": float("inf")}
    statuses: dict[str, dict[str, int]] = {}
    with TemporaryDirectory(prefix="bench-floor-") as folder:
        for attempt in range(max(1, repeats)):
            for way in best:
                path, database = await _fresh_database(folder, f"{way}{attempt}")
                try:
                    if way == "raw":
                        await database.dispose()
                        seconds = await replay_raw(path, transactions)
                    else:
                        seconds = await replay_core(
                            database.engine, transactions, hold=way == "held"
                        )
                finally:
                    await database.dispose()
                best[way] = min(best[way], seconds)
                statuses[way] = await _row_statuses(path)
    if len({tuple(sorted(counts.items())) for counts in statuses.values()}) != 1:
        raise RuntimeError(f"the replays left different rows: {statuses}")
    return DatabaseFloor(
        n=n,
        transactions=len(transactions),
        statements=sum(len(transaction.statements) for transaction in transactions),
        locking_transactions=sum(1 for transaction in transactions if transaction.begin),
        sqlalchemy_core_ms=1000 * best["core"] / n,
        sqlalchemy_held_ms=1000 * best["held"] / n,
        raw_aiosqlite_ms=1000 * best["raw"] / n,
        row_statuses=statuses["raw"],
    )


async def _row_statuses(path: Path) -> dict[str, int]:
    async with aiosqlite.connect(path) as connection:
        cursor = await connection.execute("SELECT status, count(*) FROM turn_todos GROUP BY status")
        return {str(status): int(count) for status, count in await cursor.fetchall()}


def report_floor(floor: DatabaseFloor) -> str:
    rows = ", ".join(f"{count} {status}" for status, count in sorted(floor.row_statuses.items()))
    return "\n".join(
        [
            f"  database floor ({floor.transactions} transactions, {floor.statements} statements"
            " of the timed turn, replayed on a fresh database; ms/item):",
            f"    SQLAlchemy Core, pooled        {floor.sqlalchemy_core_ms:6.2f}"
            "  (the same SQL, a connection per transaction)",
            f"    SQLAlchemy Core, held          {floor.sqlalchemy_held_ms:6.2f}"
            "  (one connection for all)",
            f"    raw aiosqlite                  {floor.raw_aiosqlite_ms:6.2f}",
            f"    rows after each replay, as the turn left them: {rows}",
        ]
    )
