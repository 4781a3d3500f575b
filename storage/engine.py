"""Engine and session factory built from a URL, with the schema created lazily on first use.

Concurrency on SQLite: a write transaction takes the write lock up front (``BEGIN IMMEDIATE``),
so two writers never both read and then fail to upgrade (SQLite answers that at once with
"database is locked", whatever the busy timeout). A transaction that cannot get the lock within
the busy timeout is begun again with backoff, up to ``LOCK_WAIT_SECONDS`` in all; once begun it
needs no other lock. Read-only sessions begin deferred and run beside writers (WAL). Creating
the schema is one such write transaction, so any number of first users, in any number of
processes, create it once.

A database whose tables have another shape than ours is refused before anything in it changes
(``SchemaMismatchError``): not switched to WAL, no table added.

Nothing here touches the disk at import time: ``Database`` only opens an engine when a session is
first asked for, which keeps ``agent.graph`` importable by the LangGraph dev server without side
effects. One engine is kept per event loop because aiosqlite connections are bound to the loop
that opened them; a test suite or a CLI that runs several loops therefore never shares a pooled
connection across loops.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Executable, create_engine, event, inspect, text
from sqlalchemy.engine.url import make_url
from sqlalchemy.exc import OperationalError
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)

from storage.loop_shutdown import call_at_loop_shutdown
from storage.models import Base

DATABASE_URL_ENV = "TURNPLAN_DATABASE_URL"
DEFAULT_DATABASE_PATH = Path(".turnplan") / "turnplan.db"
SQLITE_BUSY_TIMEOUT_MS = 2_000
"""How long one attempt waits for SQLite's write lock (its own busy handler)."""
LOCK_WAIT_SECONDS = 60.0
"""How long a transaction keeps trying to begin on a busy SQLite database before it fails."""
SCHEMA_LOCK_KEY = int.from_bytes(b"turnplan", "big")
"""The PostgreSQL advisory lock that processes creating turnplan's schema take turns on."""
BEGIN_MODE_OPTION = "turnplan_sqlite_begin"
"""The execution option that says which lock a SQLite transaction's BEGIN takes (``IMMEDIATE``,
the default, or ``DEFERRED`` for reads)."""

Write = tuple[Executable, Mapping[str, Any] | Sequence[Mapping[str, Any]]]
"""One write of ``Database.write_chain``: a statement and its parameters (a list: once per set)."""


class SchemaMismatchError(RuntimeError):
    """The database has a table of ours with other columns; nothing in it was changed."""


def default_database_url() -> str:
    """The URL used when the caller gives none: ``TURNPLAN_DATABASE_URL``, else a SQLite file
    ``.turnplan/turnplan.db`` under the working directory."""
    configured = os.environ.get(DATABASE_URL_ENV, "").strip()
    if configured:
        return configured
    return f"sqlite+aiosqlite:///{DEFAULT_DATABASE_PATH.as_posix()}"


def _engine_url(url: str) -> str:
    """``url`` ready for an engine: a SQLite file path made absolute, its folder created.

    This is the disk work of opening a database (the working directory, ``~``, ``mkdir``); it
    runs in a worker thread, never on the event loop. An absolute path also keeps SQLAlchemy's
    SQLite dialect from calling ``os.getcwd`` itself, and SQLite creates the file but not its
    folder. In-memory databases and ``file:`` URIs are passed through as written.
    """
    parsed = make_url(url)
    database = parsed.database
    if parsed.get_backend_name() != "sqlite" or not database or database == ":memory:":
        return url
    if database.startswith("file:"):
        return url
    path = Path(database).expanduser().absolute()
    path.parent.mkdir(parents=True, exist_ok=True)
    return parsed.set(database=str(path)).render_as_string(hide_password=False)


def _configure_sqlite(engine: AsyncEngine) -> None:
    """WAL lets readers run beside a writer; the busy timeout makes a second writer wait for the
    lock. The driver's own implicit BEGIN is turned off so that ours says which lock to take."""

    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
            cursor.execute("PRAGMA journal_mode = WAL")
            cursor.execute("PRAGMA synchronous = NORMAL")
            cursor.execute("PRAGMA foreign_keys = ON")
        finally:
            cursor.close()

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(connection: Connection) -> None:
        mode = connection.get_execution_options().get(BEGIN_MODE_OPTION, "IMMEDIATE")
        connection.exec_driver_sql(f"BEGIN {mode}")


RETIRED_VIEW = "recorded_calls"
"""A view (and its INSTEAD OF trigger, which wrote a call's record and evidence) that SQLite
files made before f2afb2e still hold; nothing uses it, and opening the file drops it (with its
trigger), so no SQL in the database does the application's work."""


def _is_busy(error: OperationalError) -> bool:
    text = str(error.orig or error).lower()
    return "database is locked" in text or "database is busy" in text


def schema_mismatches(connection: Connection) -> list[str]:
    """Our tables that exist with other columns, described (empty when all is well)."""
    inspector = inspect(connection)
    existing = set(inspector.get_table_names())
    problems = []
    for table in Base.metadata.sorted_tables:
        if table.name not in existing:
            continue
        found = {column["name"] for column in inspector.get_columns(table.name)}
        expected = {column.name for column in table.columns}
        if found != expected:
            missing = ", ".join(sorted(expected - found)) or "none"
            extra = ", ".join(sorted(found - expected)) or "none"
            problems.append(f"{table.name} (missing: {missing}; unexpected: {extra})")
    return problems


def _check_sqlite_file(url: str) -> None:
    """Refuse an existing SQLite file whose tables have another shape, reading it read-only so
    that nothing (not even its journal mode) changes first. Blocking: run it in a thread."""
    database = make_url(url).database
    if not database or database == ":memory:" or database.startswith("file:"):
        return
    path = Path(database)
    if not path.exists() or path.stat().st_size == 0:
        return
    reader = create_engine(f"sqlite:///file:{path}?mode=ro&uri=true")
    try:
        with reader.connect() as connection:
            problems = schema_mismatches(connection)
    finally:
        reader.dispose()
    if problems:
        raise SchemaMismatchError(_mismatch_message(url, problems))


def _mismatch_message(url: str, problems: list[str]) -> str:
    return (
        f"The database {make_url(url).render_as_string(hide_password=True)} has tables named "
        f"like turnplan's with other columns: {'; '.join(problems)}. Nothing in it was changed. "
        "Point TURNPLAN_DATABASE_URL at another database, or move those tables away."
    )


@dataclass
class _LoopEngine:
    """What one event loop owns: its engine, its session factory, whether the schema is known
    to exist (checked once per loop, then trusted), and the hook that disposes the engine when
    ``asyncio.run`` ends the loop."""

    engine: AsyncEngine
    sessionmaker: async_sessionmaker[AsyncSession]
    alone: AsyncEngine
    """The same engine (and pool) for ``Database.write_alone``: on PostgreSQL in autocommit
    (one round trip, no BEGIN or COMMIT); on SQLite the engine itself (a write transaction)."""
    schema_ready: bool = False
    shutdown_hook: AsyncGenerator[None, None] | None = None


class Database:
    """A database reachable through one URL: engines, sessions and the schema.

    Build one per application (``Database(url)``) and hand it to ``build_graph``; call
    ``dispose()`` when done so pooled connections are closed on their own loop.

    Engines are built in a worker thread on first use in each loop: building one resolves a
    relative SQLite path against the working directory and creates its folder, and
    ``langgraph dev`` refuses such blocking calls on the event loop (``BlockingError``).
    """

    def __init__(self, url: str | None = None, *, echo: bool = False) -> None:
        self.url = url or default_database_url()
        self._is_sqlite: bool | None = None
        self._echo = echo
        self._loops: dict[asyncio.AbstractEventLoop, _LoopEngine] = {}
        self._locks: dict[asyncio.AbstractEventLoop, asyncio.Lock] = {}

    @property
    def is_sqlite(self) -> bool:
        """Whether the URL names SQLite (parsed on first use, then kept: every transaction
        asks, and a URL that does not parse fails where it is used, not where it is named)."""
        if self._is_sqlite is None:
            self._is_sqlite = make_url(self.url).get_backend_name() == "sqlite"
        return self._is_sqlite

    @property
    def engine(self) -> AsyncEngine:
        """The running loop's engine, for raw SQL; it exists once ``create_schema()`` or
        ``session()`` has run on this loop (building it needs a thread, so a property cannot)."""
        current = self._loops.get(asyncio.get_running_loop())
        if current is None:
            raise RuntimeError(
                "Database.engine is not open on this event loop yet: "
                "await database.create_schema() (or open a session) first."
            )
        return current.engine

    def _build_engine(self) -> _LoopEngine:
        """A new engine and session factory (blocking: run it in a worker thread)."""
        url = _engine_url(self.url)
        if self.is_sqlite:
            _check_sqlite_file(url)
        if self.is_sqlite:
            engine = create_async_engine(url, echo=self._echo)
            _configure_sqlite(engine)
            alone = engine
        else:
            engine = create_async_engine(url, echo=self._echo)
            alone = engine.execution_options(isolation_level="AUTOCOMMIT")
        return _LoopEngine(engine, async_sessionmaker(engine, expire_on_commit=False), alone)

    async def _ready(self) -> _LoopEngine:
        """The running loop's engine with the schema in place, built on first use."""
        loop = asyncio.get_running_loop()
        current = self._loops.get(loop)
        if current is not None and current.schema_ready:
            return current
        lock = self._locks.setdefault(loop, asyncio.Lock())
        async with lock:
            current = self._loops.get(loop)
            if current is None:
                current = await asyncio.to_thread(self._build_engine)
                self._loops[loop] = current
                # A loop that asyncio.run ends closes its engine first, so a script running one
                # loop per turn leaves no connection (or its thread) behind.
                current.shutdown_hook = await call_at_loop_shutdown(self._dispose_on_shutdown)
            if not current.schema_ready:
                await self._create_schema(current.engine)
                current.schema_ready = True
        return current

    async def _create_schema(self, engine: AsyncEngine) -> None:
        """Check and create the tables in one write transaction (retried while busy); on
        PostgreSQL, one creator at a time (a transaction-scoped advisory lock)."""
        deadline = time.monotonic() + LOCK_WAIT_SECONDS
        for attempt in range(1_000_000):
            try:
                async with engine.begin() as connection:
                    if not self.is_sqlite:
                        # PostgreSQL's CREATE TABLE is not safe against a concurrent one (server
                        # workers meeting an empty database at once): take turns, until commit.
                        await connection.execute(
                            text("SELECT pg_advisory_xact_lock(:key)"), {"key": SCHEMA_LOCK_KEY}
                        )
                    problems = await connection.run_sync(schema_mismatches)
                    if problems:
                        raise SchemaMismatchError(_mismatch_message(self.url, problems))
                    await connection.run_sync(Base.metadata.create_all)
                    if self.is_sqlite:
                        await connection.execute(text(f"DROP VIEW IF EXISTS {RETIRED_VIEW}"))
                return
            except OperationalError as error:
                if not (self.is_sqlite and _is_busy(error)) or time.monotonic() > deadline:
                    raise
                await asyncio.sleep(_backoff(attempt))

    async def create_schema(self) -> None:
        """Create every table and index that is missing; safe to call any number of times."""
        await self._ready()

    @asynccontextmanager
    async def session(self, *, readonly: bool = False) -> AsyncIterator[AsyncSession]:
        """A session inside one transaction: committed when the block ends, rolled back if it
        raises. The schema is created first if this process has not done so yet.

        On SQLite the transaction has its lock before the block runs (``readonly`` sessions need
        none); a busy database is retried with backoff for up to ``LOCK_WAIT_SECONDS``.
        """
        current = await self._ready()
        options = {BEGIN_MODE_OPTION: "DEFERRED" if readonly else "IMMEDIATE"}
        deadline = time.monotonic() + LOCK_WAIT_SECONDS
        attempt = 0
        while True:
            session = current.sessionmaker()
            try:
                transaction = await session.begin()
                await session.connection(execution_options=options)
                break
            except OperationalError as error:
                await session.close()
                if not (self.is_sqlite and _is_busy(error)) or time.monotonic() > deadline:
                    raise
                await asyncio.sleep(_backoff(attempt))
                attempt += 1
            except BaseException:
                await session.close()
                raise
        try:
            yield session
            await transaction.commit()
        except BaseException:
            await transaction.rollback()
            raise
        finally:
            await session.close()

    async def write_alone(
        self, statement: Executable, parameters: Mapping[str, Any] | Sequence[Mapping[str, Any]]
    ) -> int:
        """Run one write statement as a transaction of its own; returns how many rows it
        changed. A list of parameter sets runs the statement once per set in that one
        transaction. See ``write_chain``, which this is with one write."""
        return (await self.write_chain([(statement, parameters)]))[0]

    async def write_chain(self, writes: Sequence[Write]) -> list[int]:
        """Run ``writes`` in order as one transaction of their own, each only if the one before
        it changed a row; returns how many rows each that ran changed (a shorter list when one
        changed none). This is the step claim and the model answer's record of every model
        step (``storage.repositories.turn_steps``), so it is kept to the fewest trips: on
        PostgreSQL each statement runs in autocommit (one round trip where a transaction takes
        three; a later write that fails leaves the earlier ones committed), on SQLite it is an
        ordinary write transaction (``BEGIN IMMEDIATE``, the statements, ``COMMIT``): sending
        one without BEGIN measured under half a point of a turn's share (bench/RESULTS.md). A
        busy SQLite database is retried with backoff for up to ``LOCK_WAIT_SECONDS``, as
        ``session`` does."""
        current = await self._ready()
        deadline = time.monotonic() + LOCK_WAIT_SECONDS
        attempt = 0
        while True:
            try:
                async with current.alone.connect() as connection:
                    changed: list[int] = []
                    for statement, parameters in writes:
                        result = await connection.execute(statement, parameters)
                        changed.append(int(result.rowcount or 0))
                        if not changed[-1]:
                            break
                    await connection.commit()  # on PostgreSQL (autocommit) a no-op
                    return changed
            except OperationalError as error:
                if not (self.is_sqlite and _is_busy(error)) or time.monotonic() > deadline:
                    raise
                await asyncio.sleep(_backoff(attempt))
                attempt += 1

    async def dispose(self) -> None:
        """Close the pooled connections of the running loop's engine."""
        hook = await self._dispose_on_shutdown()
        if hook is not None:
            await hook.aclose()  # its cleanup finds nothing left to dispose

    async def _dispose_on_shutdown(self) -> AsyncGenerator[None, None] | None:
        """Dispose the running loop's engine (as the loop ends, or from ``dispose``); returns
        the loop's shutdown hook, which no longer needs to run."""
        loop = asyncio.get_running_loop()
        current = self._loops.pop(loop, None)
        self._locks.pop(loop, None)
        if current is None:
            return None
        await current.engine.dispose()
        hook, current.shutdown_hook = current.shutdown_hook, None
        return hook

    @property
    def open_loops(self) -> int:
        """Event loops this database holds an engine for (one per live loop that used it)."""
        return len(self._loops)


def _backoff(attempt: int) -> float:
    """Seconds before the next try on a busy database: doubling from 20 ms to 1 s, jittered so
    waiting writers do not all retry at once."""
    return float(min(1.0, 0.02 * 2**attempt) * random.uniform(0.5, 1.5))
