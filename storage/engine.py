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


def _prepare_sqlite_file(url: str) -> None:
    """Create the folder of a SQLite file database; SQLite creates the file but not its folder."""
    parsed = make_url(url)
    database = parsed.database
    if parsed.get_backend_name() != "sqlite" or not database or database == ":memory:":
        return
    if database.startswith("file:"):
        return
    Path(database).expanduser().parent.mkdir(parents=True, exist_ok=True)


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


class Database:
    """A database reachable through one URL: engines, sessions and the schema.

    Build one per application (``Database(url)``) and hand it to ``build_graph``; call
    ``dispose()`` when done so pooled connections are closed on their own loop.
    """

    def __init__(self, url: str | None = None, *, echo: bool = False) -> None:
        self.url = url or default_database_url()
        self._echo = echo
        self._engines: dict[asyncio.AbstractEventLoop, AsyncEngine] = {}
        self._sessionmakers: dict[asyncio.AbstractEventLoop, async_sessionmaker[AsyncSession]] = {}
        self._schema_ready: set[asyncio.AbstractEventLoop] = set()
        self._schema_locks: dict[asyncio.AbstractEventLoop, asyncio.Lock] = {}

    @property
    def is_sqlite(self) -> bool:
        return make_url(self.url).get_backend_name() == "sqlite"

    def _engine_for_running_loop(self) -> AsyncEngine:
        loop = asyncio.get_running_loop()
        engine = self._engines.get(loop)
        if engine is None:
            # Drop engines of loops that have closed: their connections cannot be used again.
            for stale in [known for known in self._engines if known.is_closed()]:
                del self._engines[stale]
                self._sessionmakers.pop(stale, None)
                self._schema_ready.discard(stale)
                self._schema_locks.pop(stale, None)
            engine = create_async_engine(self.url, echo=self._echo)
            if self.is_sqlite:
                _configure_sqlite(engine)
            self._engines[loop] = engine
            self._sessionmakers[loop] = async_sessionmaker(engine, expire_on_commit=False)
        return engine

    @property
    def engine(self) -> AsyncEngine:
        """The engine of the running event loop (created on first access)."""
        return self._engine_for_running_loop()

    async def create_schema(self) -> None:
        """Create every table and index that is missing; safe to call any number of times."""
        engine = self._engine_for_running_loop()
        loop = asyncio.get_running_loop()
        if loop in self._schema_ready:
            return
        lock = self._schema_locks.setdefault(loop, asyncio.Lock())
        async with lock:
            if loop in self._schema_ready:
                return
            if self.is_sqlite:
                # Off the loop: servers such as `langgraph dev` reject blocking calls in async code.
                await asyncio.to_thread(_prepare_sqlite_file, self.url)
            async with engine.begin() as connection:
                await connection.run_sync(Base.metadata.create_all)
            self._schema_ready.add(loop)

    @asynccontextmanager
    async def session(self) -> AsyncIterator[AsyncSession]:
        """A session inside one transaction: committed when the block ends, rolled back if it
        raises. The schema is created first if this process has not done so yet."""
        await self.create_schema()
        sessionmaker = self._sessionmakers[asyncio.get_running_loop()]
        async with sessionmaker() as session, session.begin():
            yield session

    async def dispose(self) -> None:
        """Close the pooled connections of the running loop's engine."""
        loop = asyncio.get_running_loop()
        engine = self._engines.pop(loop, None)
        self._sessionmakers.pop(loop, None)
        self._schema_ready.discard(loop)
        self._schema_locks.pop(loop, None)
        if engine is not None:
            await engine.dispose()
