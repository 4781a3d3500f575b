"""The one record path (issue 42): ``run_and_record_call`` runs a tool call and writes its
record and its evidence of the rows in progress together; ``replay_or_run_call`` is the same
for a caller outside the graph, returning the record instead of running a call twice; no
context variable carries anything on the way, and no SQL trigger writes for the code."""

from __future__ import annotations

import re
import sqlite3
from contextlib import closing
from pathlib import Path

from langchain_core.messages import ToolMessage
from langgraph.prebuilt.tool_node import ToolCallRequest

from agent.turn.evidence import todo_evidence
from agent.turn.record_call import replay_or_run_call
from storage import Database

ROOT = Path(__file__).resolve().parents[3]


async def _database_with_a_row_in_progress(tmp_path: Path) -> Database:
    path = tmp_path / "records.db"
    database = Database(f"sqlite+aiosqlite:///{path}")
    await database.create_schema()
    with closing(sqlite3.connect(path)) as connection:
        connection.execute(
            "INSERT INTO turn_todos (id, conversationId, turnId, title, status, createdAt)"
            " VALUES ('r1', 'c', 't', 'buy milk', 'in_progress', '2026-01-01T00:00:00Z')"
        )
        connection.commit()
    return database


def _request() -> ToolCallRequest:
    call = {"name": "note", "args": {"text": "milk"}, "id": "call-1", "type": "tool_call"}
    todos = [{"id": "r1", "status": "in_progress"}]  # the state's snapshot of the plan
    state = {"conversationId": "c", "turnId": "t", "messages": [], "todos": todos}
    return ToolCallRequest(tool_call=call, tool=None, state=state, runtime=None)  # type: ignore[arg-type]


async def test_a_call_run_outside_the_graph_is_recorded_with_its_evidence_and_runs_once(
    tmp_path: Path,
) -> None:
    database = await _database_with_a_row_in_progress(tmp_path)
    runs: list[str] = []

    async def execute(request: ToolCallRequest) -> ToolMessage:
        runs.append(request.tool_call["id"] or "")
        return ToolMessage(content="noted: milk", tool_call_id="call-1", name="note")

    first = await replay_or_run_call(database, _request(), execute, record_id="m1:call-1")
    second = await replay_or_run_call(database, _request(), execute, record_id="m1:call-1")
    evidence = await todo_evidence(database, "c", "r1")
    await database.dispose()

    assert runs == ["call-1"]  # the second call returned the record, the tool did not run again
    assert first.evidence == {"todoIds": ["r1"], "tool": "note", "isError": False}
    assert isinstance(first.result, ToolMessage) and first.result.content == "noted: milk"
    assert second.evidence is None  # a replay writes nothing and logs nothing again
    assert isinstance(second.result, ToolMessage) and second.result.content == "noted: milk"
    assert [(call["tool"], call["args"], call["result"]) for call in evidence] == [
        ("note", {"text": "milk"}, "noted: milk")
    ]


def _sources_matching(pattern: str, *folders: str) -> set[str]:
    return {
        str(path.relative_to(ROOT))
        for folder in folders
        for path in (ROOT / folder).rglob("*.py")
        if re.search(pattern, path.read_text(encoding="utf-8"))
    }


def test_no_context_variable_carries_anything() -> None:
    """agent/, storage/ and prompts/ pass what a call needs, and a graph's prompts, as
    arguments."""
    assert (
        _sources_matching(r"\bContextVar\b|\bcontextvars\b", "agent", "storage", "prompts") == set()
    )


def test_code_inside_a_graph_is_handed_its_prompts_never_the_environments() -> None:
    """``load_prompt``/``render_prompt`` read the environment's folder: in agent/ every text is
    rendered from the ``Prompts`` the graph or the middleware passed down."""
    assert _sources_matching(r"\b(load_prompt|render_prompt)\(", "agent") == set()


def test_no_sql_trigger_does_application_work() -> None:
    """The record path is Python (``agent.turn.record_call``): no trigger is created anywhere."""
    assert _sources_matching(r"(?i)create\s+trigger", "agent", "storage") == set()
