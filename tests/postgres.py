"""A real PostgreSQL 16 server for tests, from the ``pgserver`` wheel (no system install).

One server per test session, on a Unix socket in a temporary folder; every test that asks for
it gets a database of its own (``fresh_database_url``), so tests never see each other's rows.
"""

from __future__ import annotations

import uuid
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest


@dataclass(frozen=True)
class PostgresServer:
    """A running server: its socket folder and a handle to run SQL as the superuser."""

    socket_dir: Path
    handle: Any

    def fresh_database_url(self) -> str:
        """A new, empty database on the server, as a SQLAlchemy asyncpg URL."""
        name = f"t_{uuid.uuid4().hex[:16]}"
        self.handle.psql(f"CREATE DATABASE {name};")
        return f"postgresql+asyncpg://postgres@/{name}?host={self.socket_dir}"


@pytest.fixture(scope="session")
def postgres_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PostgresServer]:
    """Start PostgreSQL once for the session (about 2 s) and stop it at the end."""
    pgserver = pytest.importorskip("pgserver", reason="the dev extra installs pgserver")
    folder = tmp_path_factory.mktemp("pg")
    with warnings.catch_warnings():
        # platformdirs warns when XDG_RUNTIME_DIR is unset (as in CI); nothing to act on.
        warnings.simplefilter("ignore")
        server = pgserver.get_server(folder, cleanup_mode="stop")
    try:
        yield PostgresServer(socket_dir=folder, handle=server)
    finally:
        server.cleanup()
