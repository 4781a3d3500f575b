"""One way to record (issue 42), on both faces of turnplan: a free tool's result, its ledger
entry and its evidence commit in one transaction or not at all, and a tool that raises is
recorded the same way on both (``agent.turn.record_call``)."""

from __future__ import annotations

import itertools
import json
import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
from langchain_core.tools import BaseTool, tool
from sqlalchemy import event
from sqlalchemy.engine import Connection
from sqlalchemy.exc import OperationalError

from storage import Database
from storage.repositories import TodoEvidenceRepository
from tests.fakes import act, answer_with, close_row, plan_items, record, scripted_turn, tool_call
from tests.fakes import tool_results as results_of
from tests.unit.middleware.faces import Face


@dataclass
class Transactions:
    """The statements of every committed transaction on an engine, in commit order."""

    committed: list[list[str]] = field(default_factory=list)
    _open: dict[int, list[str]] = field(default_factory=dict)

    def touching(self, tool: str) -> list[list[str]]:
        """The committed transactions that wrote anything about calls of ``tool``, each as the
        tables it inserted into."""
        return [
            [line.split(" ", 1)[0] for line in statements if f"'{tool}'" in line]
            for statements in self.committed
            if any(f"'{tool}'" in line for line in statements)
        ]


@contextmanager
def watched(database: Database) -> Iterator[Transactions]:
    """Record the committed transactions of ``database``'s engine (SQLAlchemy's connection
    events: ``begin``, ``before_cursor_execute``, ``commit``, ``rollback``)."""
    seen = Transactions()
    numbers = itertools.count()
    engine = database.engine.sync_engine

    def begin(connection: Connection) -> None:
        number = next(numbers)
        connection.info["watched_transaction"] = number
        seen._open[number] = []

    def execute(
        connection: Connection, cursor: Any, statement: str, parameters: Any, *_: Any
    ) -> None:
        number = connection.info.get("watched_transaction")
        if number in seen._open and statement.lstrip().upper().startswith("INSERT"):
            table = statement.split("INTO", 1)[1].split()[0].strip('"')
            seen._open[number].append(f"{table} {parameters!r}")

    def commit(connection: Connection) -> None:
        statements = seen._open.pop(connection.info.pop("watched_transaction", -1), None)
        if statements:
            seen.committed.append(statements)

    def rollback(connection: Connection) -> None:
        seen._open.pop(connection.info.pop("watched_transaction", -1), None)

    hooks = {"begin": begin, "before_cursor_execute": execute, "commit": commit}
    hooks["rollback"] = rollback
    for name, hook in hooks.items():
        event.listen(engine, name, hook)
    try:
        yield seen
    finally:
        for name, hook in hooks.items():
            event.remove(engine, name, hook)


def count(database: Database, sql: str) -> int:
    path = database.url.split("///", 1)[1]
    with closing(sqlite3.connect(path)) as connection:
        return int(connection.execute(sql).fetchone()[0])


def note_turn(database: Database) -> Any:
    return scripted_turn(
        database,
        plan_items({"title": "Note milk"}),
        act(tool_call("record", note="milk")),
        close_row(outcome="noted"),
        answer_with("Noted."),
    )


async def test_a_free_call_writes_its_result_ledger_entry_and_evidence_in_one_transaction(
    face: Face, database: Database, recorded_notes: list[str]
) -> None:
    await database.create_schema()
    agent = face.build(note_turn(database), database, [record])

    with watched(database) as transactions:
        result = await face.run(agent, "note milk")

    assert result["turnStatus"] == "answered"
    assert recorded_notes == ["milk"]
    assert transactions.touching("record") == [["tool_results", "todo_evidence"]]
    assert count(database, "SELECT count(*) FROM todo_evidence WHERE toolName = 'record'") == 1


async def test_a_record_that_cannot_be_written_leaves_neither_the_result_nor_the_evidence(
    face: Face, database: Database, recorded_notes: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The write fails after the ledger entry and before the evidence (as a crash there would
    stop it): the transaction rolls back whole, and the model is told the store failed."""
    original = TodoEvidenceRepository.record_for_rows_in_progress

    async def failing(self: TodoEvidenceRepository, scope: Any, **values: Any) -> list[str]:
        if values["tool"] == "record":
            raise OperationalError("INSERT INTO todo_evidence", {}, Exception("disk I/O error"))
        return await original(self, scope, **values)

    monkeypatch.setattr(TodoEvidenceRepository, "record_for_rows_in_progress", failing)
    agent = face.build(note_turn(database), database, [record])

    result = await face.run(agent, "note milk")

    (answer,) = results_of(result, "record")
    assert answer.status == "error"
    assert json.loads(str(answer.content))["error"] == "DATABASE_ERROR"
    assert count(database, "SELECT count(*) FROM tool_results WHERE toolName = 'record'") == 0
    assert count(database, "SELECT count(*) FROM todo_evidence WHERE toolName = 'record'") == 0


def raising_tool() -> BaseTool:
    @tool
    async def fetch_page(url: str) -> str:
        """Fetch a page (stands in for a tool with a bug)."""
        raise RuntimeError(f"cannot reach {url}")

    return fetch_page


async def test_a_tool_that_raises_is_a_recorded_error_with_failed_evidence_on_both_faces(
    face: Face, database: Database
) -> None:
    model = scripted_turn(
        database,
        plan_items({"title": "Read the page"}),
        act(tool_call("fetch_page", url="example.org")),
        close_row(outcome="the page could not be read", status="cancelled"),
        answer_with("The page could not be read."),
    )
    await database.create_schema()
    agent = face.build(model, database, [raising_tool()])

    with watched(database) as transactions:
        result = await face.run(agent, "read example.org")

    (answer,) = results_of(result, "fetch_page")
    assert answer.status == "error"
    assert json.loads(str(answer.content))["error"] == "TOOL_ERROR"
    assert "cannot reach example.org" in str(answer.content)
    assert transactions.touching("fetch_page") == [["tool_results", "todo_evidence"]]
    failed = "SELECT count(*) FROM todo_evidence WHERE toolName = 'fetch_page' AND isError"
    assert count(database, failed) == 1
