"""A PostgreSQL server for the benchmarks, from the ``pgserver`` wheel (the dev extra): the share
on PostgreSQL (``python -m bench --share-only --postgres``) runs each turn on a fresh database
of it, turnplan's tables and the checkpointer's alike, as a deployment on PostgreSQL would."""

from __future__ import annotations

import importlib
import tempfile
import uuid
import warnings
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver


@dataclass(frozen=True)
class PostgresBench:
    """A running server: its socket folder and a handle to run SQL as the superuser."""

    socket_dir: Path
    handle: Any

    def fresh_database(self) -> str:
        """A new, empty database on the server; its name."""
        name = f"bench_{uuid.uuid4().hex[:16]}"
        self.handle.psql(f"CREATE DATABASE {name};")
        return name

    def sqlalchemy_url(self, name: str) -> str:
        """The database ``name`` as turnplan's ``Database`` takes it (asyncpg)."""
        return f"postgresql+asyncpg://postgres@/{name}?host={self.socket_dir}"

    def conninfo(self, name: str) -> str:
        """The database ``name`` as psycopg (LangGraph's PostgreSQL checkpointer) takes it."""
        return f"postgresql://postgres@/{name}?host={self.socket_dir}"


@contextmanager
def postgres_server() -> Iterator[PostgresBench]:
    """Start PostgreSQL in a temporary folder (about 2 s) and stop it at the end."""
    with tempfile.TemporaryDirectory(prefix="bench-pg-") as folder:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # platformdirs, when XDG_RUNTIME_DIR is unset
            pgserver = importlib.import_module("pgserver")  # the dev extra's; untyped
            server = pgserver.get_server(folder, cleanup_mode="stop")
        try:
            yield PostgresBench(socket_dir=Path(folder), handle=server)
        finally:
            server.cleanup()


@asynccontextmanager
async def postgres_checkpointer(
    server: PostgresBench, name: str
) -> AsyncIterator[BaseCheckpointSaver[Any]]:
    """LangGraph's PostgreSQL checkpointer on the database ``name``, its tables created."""
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    async with AsyncPostgresSaver.from_conn_string(server.conninfo(name)) as saver:
        await saver.setup()
        yield saver
