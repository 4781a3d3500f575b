"""The default database (a relative SQLite path) opens without blocking the event loop.

``langgraph dev`` fails a run with ``BlockingError`` when async code makes a blocking call; the
default URL ``sqlite+aiosqlite:///.turnplan/turnplan.db`` is relative, and resolving it (or
creating its folder) on the loop failed every run started the way README says.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from sqlalchemy import text

from storage import Database
from storage.engine import DATABASE_URL_ENV
from storage.repositories import TaskRepository
from tests.blocking import blocking_calls_refused


@pytest.fixture
def in_fresh_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working folder with no database in it and no database setting, as a new user has."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(DATABASE_URL_ENV, raising=False)
    return tmp_path


async def test_the_default_database_opens_without_blocking_the_event_loop(
    in_fresh_folder: Path,
) -> None:
    database = Database()
    try:
        with blocking_calls_refused():
            async with database.session() as session:
                await TaskRepository(session, "alice").add("Milk")
            async with database.session() as session:
                found = await TaskRepository(session, "alice").find()
        assert [task.title for task in found] == ["Milk"]
    finally:
        await database.dispose()

    # The rows are in the file README names, under the folder the run started in.
    stored = in_fresh_folder / ".turnplan" / "turnplan.db"
    with closing(sqlite3.connect(stored)) as connection:
        assert connection.execute("SELECT title FROM tasks").fetchall() == [("Milk",)]


async def test_the_relative_url_is_kept_as_given(in_fresh_folder: Path) -> None:
    database = Database()
    await database.create_schema()
    await database.dispose()
    assert database.url == "sqlite+aiosqlite:///.turnplan/turnplan.db"
    assert database.is_sqlite


async def test_raw_sql_needs_the_engine_opened_first(in_fresh_folder: Path) -> None:
    database = Database()
    with pytest.raises(RuntimeError, match="create_schema"):
        _ = database.engine
    await database.create_schema()
    async with database.engine.begin() as connection:
        assert (await connection.execute(text("SELECT 1"))).scalar_one() == 1
    await database.dispose()
