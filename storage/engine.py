"""Engine and session factory built from a URL, with the schema created lazily on first use.

Nothing here touches the disk at import time: ``Database`` only opens an engine when a session is
first asked for, which keeps ``agent.graph`` importable by the LangGraph dev server without side
effects. One engine is kept per event loop because aiosqlite connections are bound to the loop
that opened them; a test suite or a CLI that runs several loops therefore never shares a pooled
connection across loops.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine.url import make_url
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)

from storage.models import Base

DATABASE_URL_ENV = "TURNPLAN_DATABASE_URL"
DEFAULT_DATABASE_PATH = Path(".turnplan") / "turnplan.db"
SQLITE_BUSY_TIMEOUT_MS = 5_000


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
    lock instead of failing at once with 'database is locked'."""

    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
            cursor.execute("PRAGMA journal_mode = WAL")
            cursor.execute("PRAGMA synchronous = NORMAL")
            cursor.execute("PRAGMA foreign_keys = ON")
        finally:
            cursor.close()


@dataclass
class _LoopEngine:
    """What one event loop owns: its engine, its session factory, and whether the schema is
    known to exist (checked once per loop, then trusted)."""

    engine: AsyncEngine
    sessionmaker: async_sessionmaker[AsyncSession]
    schema_ready: bool = False


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
        self._echo = echo
        self._loops: dict[asyncio.AbstractEventLoop, _LoopEngine] = {}
        self._locks: dict[asyncio.AbstractEventLoop, asyncio.Lock] = {}

    @property
    def is_sqlite(self) -> bool:
        return make_url(self.url).get_backend_name() == "sqlite"

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
        engine = create_async_engine(_engine_url(self.url), echo=self._echo)
        if self.is_sqlite:
            _configure_sqlite(engine)
        return _LoopEngine(engine, async_sessionmaker(engine, expire_on_commit=False))

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
                # Drop engines of loops that have closed: their connections cannot be reused.
                for stale in [known for known in self._loops if known.is_closed()]:
                    del self._loops[stale]
                    self._locks.pop(stale, None)
                current = await asyncio.to_thread(self._build_engine)
                self._loops[loop] = current
            if not current.schema_ready:
                async with current.engine.begin() as connection:
                    await connection.run_sync(Base.metadata.create_all)
                current.schema_ready = True
        return current

    async def create_schema(self) -> None:
        """Create every table and index that is missing; safe to call any number of times."""
        await self._ready()

    @asynccontextmanager
    async def session(self) -> AsyncIterator[AsyncSession]:
        """A session inside one transaction: committed when the block ends, rolled back if it
        raises. The schema is created first if this process has not done so yet."""
        current = await self._ready()
        async with current.sessionmaker() as session, session.begin():
            yield session

    async def dispose(self) -> None:
        """Close the pooled connections of the running loop's engine."""
        loop = asyncio.get_running_loop()
        current = self._loops.pop(loop, None)
        self._locks.pop(loop, None)
        if current is not None:
            await current.engine.dispose()
