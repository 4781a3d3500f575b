"""The turn_todos schema is seed 004's DDL, read back from SQLite itself."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError

from agent.turn.evidence import record_call, todo_evidence
from storage import Database, default_database_url
from storage.repositories import ToolCallKey, TurnScope, record_with_evidence

EXPECTED_COLUMNS = [
    # name, type, notnull, default, pk
    ("id", "TEXT", 0, None, 1),
    ("conversationId", "TEXT", 1, None, 0),
    ("turnId", "TEXT", 1, None, 0),
    ("title", "TEXT", 1, None, 0),
    ("context", "TEXT", 1, "''", 0),
    ("completionCriteria", "TEXT", 1, "''", 0),
    ("agentType", "TEXT", 0, None, 0),
    ("status", "TEXT", 1, "'pending'", 0),
    ("priority", "INTEGER", 1, "0", 0),
    ("outcome", "TEXT", 0, None, 0),
    ("createdAt", "TEXT", 1, None, 0),
    ("startedAt", "TEXT", 0, None, 0),
    ("completedAt", "TEXT", 0, None, 0),
]


def _db_path(database: Database) -> str:
    return database.url.split("///", 1)[1]


async def test_columns_match_seed_ddl(database: Database) -> None:
    await database.create_schema()
    with closing(sqlite3.connect(_db_path(database))) as connection:
        rows = connection.execute("PRAGMA table_info(turn_todos)").fetchall()
    assert [(r[1], r[2], r[3], r[4], r[5]) for r in rows] == EXPECTED_COLUMNS


async def test_indexes_match_seed_ddl(database: Database) -> None:
    await database.create_schema()
    with closing(sqlite3.connect(_db_path(database))) as connection:
        indexes = {
            row[1]: [c[2] for c in connection.execute(f"PRAGMA index_info({row[1]})")]
            for row in connection.execute("PRAGMA index_list(turn_todos)")
            if row[3] == "c"  # created by CREATE INDEX, not the primary key
        }
    assert indexes == {
        "idx_turn_todos_turn": ["turnId", "status"],
        "idx_turn_todos_conversation": ["conversationId", "turnId"],
    }


async def test_status_check_constraint_is_stored_and_enforced(database: Database) -> None:
    await database.create_schema()
    with closing(sqlite3.connect(_db_path(database))) as connection:
        (sql,) = connection.execute(
            "SELECT sql FROM sqlite_master WHERE type='table' AND name='turn_todos'"
        ).fetchone()
    assert "CHECK (status IN ('pending', 'in_progress', 'completed', 'cancelled'))" in sql
    with pytest.raises(IntegrityError):
        async with database.session() as session:
            await session.execute(
                text(
                    "INSERT INTO turn_todos (id, conversationId, turnId, title, status, createdAt)"
                    " VALUES ('x', 'c', 't', 'title', 'done', '2026-01-01T00:00:00Z')"
                )
            )


async def test_defaults_fill_omitted_columns(database: Database) -> None:
    await database.create_schema()
    with closing(sqlite3.connect(_db_path(database))) as connection, connection:
        connection.execute(
            "INSERT INTO turn_todos (id, conversationId, turnId, title, createdAt)"
            " VALUES ('x', 'c', 't', 'title', '2026-01-01T00:00:00Z')"
        )
        row = connection.execute(
            "SELECT context, completionCriteria, status, priority FROM turn_todos"
        ).fetchone()
    assert row == ("", "", "pending", 0)


async def test_sqlite_runs_in_wal_mode_with_busy_timeout(database: Database) -> None:
    async with database.session() as session:
        journal = (await session.execute(text("PRAGMA journal_mode"))).scalar_one()
        timeout = (await session.execute(text("PRAGMA busy_timeout"))).scalar_one()
    assert journal == "wal"
    assert timeout >= 1000


async def test_schema_creation_is_idempotent(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'twice.db'}"
    first, second = Database(url), Database(url)
    await first.create_schema()
    await first.create_schema()
    await second.create_schema()
    await first.dispose()
    await second.dispose()
    with closing(sqlite3.connect(tmp_path / "twice.db")) as connection:
        tables = connection.execute(
            "SELECT name FROM sqlite_master WHERE type='table' AND name='turn_todos'"
        ).fetchall()
    assert tables == [("turn_todos",)]


async def test_default_url_is_a_file_under_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TURNPLAN_DATABASE_URL", raising=False)
    monkeypatch.chdir(tmp_path)
    assert default_database_url() == "sqlite+aiosqlite:///.turnplan/turnplan.db"
    database = Database()
    await database.create_schema()
    await database.dispose()
    assert (tmp_path / ".turnplan" / "turnplan.db").is_file()


def test_environment_variable_overrides_the_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TURNPLAN_DATABASE_URL", "sqlite+aiosqlite:////srv/other.db")
    assert Database().url == "sqlite+aiosqlite:////srv/other.db"


async def test_a_database_from_before_evidence_gains_its_table_and_keeps_its_rows(
    tmp_path: Path,
) -> None:
    path = tmp_path / "older.db"
    url = f"sqlite+aiosqlite:///{path}"
    older = Database(url)
    await older.create_schema()
    await older.dispose()
    with closing(sqlite3.connect(path)) as connection:  # as a database made before issue 29
        connection.execute("DROP TABLE todo_evidence")
        connection.execute(
            "INSERT INTO turn_todos (id, conversationId, turnId, title, status, createdAt)"
            " VALUES ('r1', 'c', 't', 'kept', 'in_progress', '2026-01-01T00:00:00Z')"
        )
        connection.commit()

    database = Database(url)
    await record_call(
        database, TurnScope("c", "t"), "call-1", "record", {"note": "milk"}, "ok", is_error=False
    )
    evidence = await todo_evidence(database, "c", "r1")
    await database.dispose()

    assert [(call["tool"], call["args"], call["result"]) for call in evidence] == [
        ("record", {"note": "milk"}, "ok")
    ]
    with closing(sqlite3.connect(path)) as connection:
        assert connection.execute("SELECT title FROM turn_todos").fetchall() == [("kept",)]


async def test_a_free_calls_record_and_its_evidence_are_written_once_together(
    tmp_path: Path,
) -> None:
    """A free call's record and its evidence commit in one transaction; a second run of the
    call is refused with its evidence, which is not written twice."""
    path = tmp_path / "records.db"
    url = f"sqlite+aiosqlite:///{path}"
    older = Database(url)
    await older.create_schema()
    await older.dispose()
    with closing(sqlite3.connect(path)) as connection:
        connection.execute(
            "INSERT INTO turn_todos (id, conversationId, turnId, title, status, createdAt)"
            " VALUES ('r1', 'c', 't', 'worked', 'in_progress', '2026-01-01T00:00:00Z')"
        )
        connection.commit()

    database = Database(url)
    record = (ToolCallKey("c", "t", "call-1", "record"), "ok", None)
    await record_with_evidence(database, [record], ['{"note": "milk"}'])
    with pytest.raises(IntegrityError):
        await record_with_evidence(database, [record], ['{"note": "again"}'])
    evidence = await todo_evidence(database, "c", "r1")
    await database.dispose()

    assert [(call["tool"], call["args"], call["result"]) for call in evidence] == [
        ("record", {"note": "milk"}, "ok")
    ]
    with closing(sqlite3.connect(path)) as connection:
        assert connection.execute("SELECT content FROM tool_results").fetchall() == [("ok",)]


async def test_a_database_from_before_the_plain_record_path_loses_its_view_and_trigger(
    tmp_path: Path,
) -> None:
    """A file made before f2afb2e held the view ``recorded_calls`` whose INSTEAD OF trigger
    wrote records and evidence; opening it drops both, so no SQL in it does application work."""
    path = tmp_path / "older.db"
    url = f"sqlite+aiosqlite:///{path}"
    older = Database(url)
    await older.create_schema()
    await older.dispose()
    with closing(sqlite3.connect(path)) as connection:  # the view and trigger as they were
        connection.execute(
            "CREATE VIEW recorded_calls AS SELECT conversationId, toolCallId, turnId, toolName, "
            "content, stateUpdate, createdAt, NULL AS arguments FROM tool_results WHERE 0"
        )
        connection.execute(
            "CREATE TRIGGER recorded_calls_insert INSTEAD OF INSERT ON recorded_calls BEGIN "
            "INSERT INTO tool_results (conversationId, toolCallId, turnId, toolName, content, "
            "stateUpdate, createdAt) VALUES (NEW.conversationId, NEW.toolCallId, NEW.turnId, "
            "NEW.toolName, NEW.content, NEW.stateUpdate, NEW.createdAt); END"
        )
        connection.commit()

    database = Database(url)
    await database.create_schema()
    await database.dispose()

    with closing(sqlite3.connect(path)) as connection:
        leftovers = connection.execute(
            "SELECT type, name FROM sqlite_master WHERE type IN ('view', 'trigger')"
        ).fetchall()
    assert leftovers == []
