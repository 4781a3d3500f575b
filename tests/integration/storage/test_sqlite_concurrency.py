"""SQLite under concurrent use: first users racing to create the schema (in one process and
across processes), writers queueing for the lock instead of failing, and a foreign database that
is refused before anything in it changes."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest
from langchain_core.messages import HumanMessage
from langchain_core.tools import tool
from sqlalchemy import text

from agent.context import Context
from agent.graph import build_graph
from storage import Database
from storage.engine import SQLITE_BUSY_TIMEOUT_MS, SchemaMismatchError
from tests.fakes import PlanOracle, ScriptedChatModel, tool_call

REPO = Path(__file__).resolve().parents[3]

FIRST_USER = """
import asyncio, sys
from storage import Database
from agent.turn.plan_rows import PlanLimits, TodoItemInput, TurnPlan
from storage.repositories import TurnScope

async def main() -> None:
    database = Database(sys.argv[1])
    plan = TurnPlan(database, TurnScope("conv", sys.argv[2]))
    await plan.add_items([TodoItemInput(title="step")], PlanLimits())
    await database.dispose()

asyncio.run(main())
"""


def test_processes_racing_to_create_the_schema_all_succeed(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'fresh.db'}"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", FIRST_USER, url, f"turn-{n}"],
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(6)
    ]
    errors = [process.communicate(timeout=120)[1] for process in processes]
    assert [(p.returncode, e) for p, e in zip(processes, errors, strict=True) if p.returncode] == []
    with closing(sqlite3.connect(tmp_path / "fresh.db")) as connection:
        assert connection.execute("SELECT count(*) FROM turn_todos").fetchone() == (6,)


@tool
def note(text: str) -> str:
    """Note something down."""
    return text


async def test_sixteen_turns_on_a_fresh_database_each_with_its_own_graph_all_finish(
    tmp_path: Path,
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'fresh.db'}"
    databases = [Database(url) for _ in range(16)]

    async def one_turn(database: Database, n: int) -> dict[str, object]:
        oracle = PlanOracle([f"a{n}", f"b{n}", f"c{n}"], lambda t: tool_call("note", text=t))
        graph = build_graph(
            ScriptedChatModel(responder=oracle),
            tools=[note],
            database=database,
            include_default_tools=False,
        )
        result: dict[str, object] = await graph.ainvoke(
            {"messages": [HumanMessage(content="three notes")]}, context=Context()
        )
        return result

    try:
        results = await asyncio.gather(*(one_turn(db, n) for n, db in enumerate(databases)))
    finally:
        for database in databases:
            await database.dispose()
    assert [r["turnStatus"] for r in results] == ["answered"] * 16
    assert [r["toolErrors"] for r in results] == [0] * 16
    with closing(sqlite3.connect(tmp_path / "fresh.db")) as connection:
        assert connection.execute(
            "SELECT status, count(*) FROM turn_todos GROUP BY status"
        ).fetchall() == [("completed", 48)]


@pytest.mark.parametrize("alone", [False, True], ids=["in a transaction", "alone"])
async def test_a_writer_waits_past_the_busy_timeout_instead_of_failing(
    tmp_path: Path, alone: bool
) -> None:
    """Whether it writes in a transaction or as one statement alone (``Database.write_alone``,
    the step claims)."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'busy.db'}"
    first, second = Database(url), Database(url)
    holding = asyncio.Event()
    insert_second = text("INSERT INTO conversations VALUES ('c2', 'u', 'now')")

    async def hold_the_lock() -> None:
        async with first.session() as session:
            await session.execute(text("INSERT INTO conversations VALUES ('c1', 'u', 'now')"))
            holding.set()
            # Longer than one attempt's busy timeout: the other writer must retry, not fail.
            await asyncio.sleep(SQLITE_BUSY_TIMEOUT_MS / 1000 * 1.5)

    async def write_after() -> None:
        await holding.wait()
        if alone:
            assert await second.write_alone(insert_second, {}) == 1
            return
        async with second.session() as session:
            await session.execute(insert_second)

    try:
        await first.create_schema()
        await second.create_schema()  # its engine is open: what waits is the write itself
        await asyncio.gather(hold_the_lock(), write_after())
    finally:
        await first.dispose()
        await second.dispose()
    with closing(sqlite3.connect(tmp_path / "busy.db")) as connection:
        assert connection.execute("SELECT count(*) FROM conversations").fetchone() == (2,)


async def test_a_database_with_a_foreign_turn_todos_table_is_refused_untouched(
    tmp_path: Path,
) -> None:
    path = tmp_path / "theirs.db"
    with closing(sqlite3.connect(path)) as connection:
        connection.execute("CREATE TABLE turn_todos (id INTEGER PRIMARY KEY, label TEXT)")
        connection.commit()
    database = Database(f"sqlite+aiosqlite:///{path}")
    with pytest.raises(SchemaMismatchError) as refused:
        await database.create_schema()
    await database.dispose()
    assert "turn_todos" in str(refused.value) and "Nothing in it was changed" in str(refused.value)
    with closing(sqlite3.connect(path)) as connection:
        assert connection.execute("PRAGMA journal_mode").fetchone() == ("delete",)
        tables = connection.execute("SELECT name FROM sqlite_master WHERE type='table'")
        assert [name for (name,) in tables] == ["turn_todos"]


async def test_a_connection_handed_back_inside_a_transaction_is_rolled_back(
    database: Database,
) -> None:
    """A connection handed back to the pool inside a transaction (code that wrote on the
    driver and never committed) must not reach its next user with a half-written row or the
    write lock: the pool rolls it back."""
    await database.create_schema()
    async with database.engine.connect() as connection:
        raw = await connection.get_raw_connection()
        driver = raw.driver_connection
        assert driver is not None
        await driver.execute("BEGIN IMMEDIATE")
        await driver.execute(
            "INSERT INTO conversations (conversationId, ownerUserId, createdAt) "
            "VALUES ('half', 'u', 'now')"
        )
        assert driver.in_transaction
    async with database.session() as session:  # would wait for the lock if it were still held
        found = await session.scalar(text("SELECT count(*) FROM conversations"))
        await session.execute(
            text(
                "INSERT INTO conversations (conversationId, ownerUserId, createdAt) "
                "VALUES ('whole', 'u', 'now')"
            )
        )
    assert found == 0
