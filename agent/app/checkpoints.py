"""Durable checkpoints for runs outside a LangGraph server (``turnplan run``, your scripts).

The dev server and LangGraph Server bring their own checkpointer. A command-line run keeps its
threads in the same database as its plan rows, so ``--thread`` continues a conversation from
another process and ``--resume`` finishes a turn whose process died:

- SQLite: LangGraph's ``AsyncSqliteSaver`` on the same file (its own tables beside ours);
- PostgreSQL: LangGraph's ``AsyncPostgresSaver`` on the same server (the ``postgres`` extra).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from sqlalchemy.engine.url import make_url

from agent.errors import ConfigurationError
from storage import Database


def sqlite_file(url: str) -> str | None:
    """The absolute file of a SQLite URL, or None for an in-memory database."""
    database = make_url(url).database
    if not database or database == ":memory:" or database.startswith("file:"):
        return None
    return str(Path(database).expanduser().resolve())


def postgres_conninfo(url: str) -> str:
    """A psycopg connection string for a SQLAlchemy ``postgresql+driver://`` URL."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


@asynccontextmanager
async def open_checkpointer(database: Database) -> AsyncIterator[BaseCheckpointSaver[str]]:
    """A checkpointer in ``database``'s own store, set up and open for the ``async with``."""
    backend = make_url(database.url).get_backend_name()
    if backend == "sqlite":
        path = await asyncio.to_thread(sqlite_file, database.url)
        if path is None:
            yield InMemorySaver()
            return
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        await asyncio.to_thread(Path(path).parent.mkdir, parents=True, exist_ok=True)
        async with AsyncSqliteSaver.from_conn_string(path) as saver:
            yield saver
        return
    if backend == "postgresql":
        try:
            from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
        except ImportError as error:
            raise ConfigurationError(
                "Checkpoints on PostgreSQL need the 'postgres' extra: "
                'pip install -e ".[postgres]"'
            ) from error
        from psycopg import OperationalError

        async with AsyncExitStack() as stack:
            try:
                pg_saver = await stack.enter_async_context(
                    AsyncPostgresSaver.from_conn_string(postgres_conninfo(database.url))
                )
            except OperationalError as error:
                shown = make_url(database.url).render_as_string(hide_password=True)
                raise ConfigurationError(
                    f"Cannot open the PostgreSQL database {shown}: {str(error).strip()}. "
                    "turnplan creates its tables, not the database: create it first "
                    "(createdb, or CREATE DATABASE in psql)."
                ) from error
            await pg_saver.setup()
            yield pg_saver
        return
    raise ConfigurationError(
        f"No checkpointer for {backend!r} databases: use SQLite or PostgreSQL."
    )
