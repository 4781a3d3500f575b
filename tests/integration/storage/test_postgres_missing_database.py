"""README's PostgreSQL section: turnplan creates its tables, not the database. A database that
does not exist yet is reported in one actionable line, not a traceback."""

from __future__ import annotations

import pytest

from agent.app.checkpoints import open_checkpointer
from agent.errors import ConfigurationError
from storage import Database
from tests.postgres import PostgresServer

pytestmark = pytest.mark.integration


async def test_a_database_that_does_not_exist_yet_says_to_create_it(
    postgres_server: PostgresServer,
) -> None:
    url = f"postgresql+asyncpg://postgres@/not_created_yet?host={postgres_server.socket_dir}"
    database = Database(url)
    try:
        with pytest.raises(ConfigurationError) as raised:
            async with open_checkpointer(database):
                pass
    finally:
        await database.dispose()
    message = str(raised.value)
    assert 'database "not_created_yet" does not exist' in message
    assert "create it first (createdb, or CREATE DATABASE in psql)" in message
