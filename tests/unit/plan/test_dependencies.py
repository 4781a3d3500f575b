"""Dependencies between rows (issue 30): ``blockedBy`` on ``create_todo`` items, checked as a
batch, stored in ``todo_dependencies``, shown in ``list_todo``; rows start as soon as every row
they wait for closes, side by side, and are never completed or delegated before."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.tools import BaseTool
from langgraph.graph import END, START, StateGraph

from agent.context import Context
from agent.graph import build_graph
from agent.tools.delegate import build_delegate_tool
from agent.tools.todos import build_todo_tools
from agent.turn.lineage import copied_edges
from agent.turn.plan_rows import PlanLimits, TodoItemInput, TurnPlan
from agent.workers import Worker
from agent.workers.worker import WorkerState
from storage import Database
from storage.models import TurnTodo
from storage.repositories import NewTurnTodo, TurnScope, TurnTodoRepository, copy_dependencies
from tests.fakes import ScriptedChatModel, ai, plan_rows, plan_view, tool_call
from tests.tool_harness import run_tool_calls

DIAMOND = [
    {"title": "find the venue"},
    {"title": "book the venue", "blockedBy": [0]},
    {"title": "email the guests", "blockedBy": [0]},
    {"title": "send the invitations", "blockedBy": [1, 2]},
]
"""A -> (B, C) -> D."""


def table(database: Database, sql: str) -> list[tuple[Any, ...]]:
    path = database.url.split("///", 1)[1]
    with closing(sqlite3.connect(path)) as connection:
        return connection.execute(sql).fetchall()


def statuses(database: Database) -> dict[str, str]:
    return dict(table(database, "SELECT title, status FROM turn_todos"))  # type: ignore[arg-type]


@pytest.fixture
async def tools(database: Database) -> list[BaseTool]:
    await database.create_schema()
    return build_todo_tools(database)


async def results(
    tools: list[BaseTool], *calls: tuple[str, dict[str, Any]]
) -> list[dict[str, Any]]:
    messages, _ = await run_tool_calls(tools, list(calls))
    return [json.loads(str(message.content)) for message in messages]


async def plan(tools: list[BaseTool], items: list[dict[str, Any]]) -> dict[str, str]:
    (created,) = await results(tools, ("create_todo", {"items": items}))
    assert "error" not in created, created
    return {row["title"]: row["id"] for row in created["created"]}


def close(todo_id: str, status: str = "completed") -> tuple[str, dict[str, Any]]:
    return ("complete_todo", {"todoId": todo_id, "outcome": "done", "status": status})


# --- the graph ----------------------------------------------------------------------------------


async def test_a_diamond_runs_in_layers_with_both_branches_in_progress_together(
    database: Database,
) -> None:
    """A -> (B, C) -> D: one call per layer (plan, A, B+C, D, answer), and B and C are shown
    in progress together in the same call."""
    in_progress_seen: list[list[str]] = []

    def layered(messages: list[BaseMessage]) -> AIMessage:
        rows = plan_rows(plan_view(messages))
        if not rows:
            return ai(tool_call("create_todo", items=DIAMOND))
        working = [row for row in rows if row.mark == ">"]
        in_progress_seen.append([row.title for row in working])
        if not working:
            return AIMessage(content="The party is organised.")
        return ai(*(tool_call("complete_todo", todoId=r.id, outcome="done") for r in working))

    model = ScriptedChatModel(responder=layered)
    graph = build_graph(model, tools=[], database=database, include_default_tools=False)
    result = await graph.ainvoke(
        {"messages": [HumanMessage(content="Organise the party.")]}, context=Context()
    )

    assert result["turnStatus"] == "answered"
    assert in_progress_seen == [
        ["find the venue"],
        ["book the venue", "email the guests"],
        ["send the invitations"],
        [],
    ]
    assert model.calls == 5  # one per layer, plus the plan and the answer (sequential: 6)
    todos = {todo["title"]: todo for todo in result["todos"]}
    assert todos["send the invitations"]["blockedBy"] == [
        todos["book the venue"]["id"],
        todos["email the guests"]["id"],
    ]
    assert all(todo["ready"] and todo["status"] == "completed" for todo in todos.values())


# --- refused plans ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("items", "named"),
    [
        ([{"title": "a", "blockedBy": [1]}, {"title": "b", "blockedBy": [0]}], "cycle"),
        ([{"title": "a"}, {"title": "b", "blockedBy": [1]}], "itself"),
        ([{"title": "a"}, {"title": "b", "blockedBy": [5]}], "items 0 to 1"),
        ([{"title": "a", "blockedBy": ["7f0c7f9e-0000-4000-8000-000000000000"]}], "not an item"),
        ([{"title": "a", "blockedBy": [1]}, {"title": "b"}], "comes later"),
        ([{"title": "a", "order": 2}, {"title": "b", "order": 1, "blockedBy": [0]}], "comes later"),
    ],
)
async def test_an_invalid_dependency_refuses_the_whole_call_and_writes_nothing(
    tools: list[BaseTool], database: Database, items: list[dict[str, Any]], named: str
) -> None:
    (refused,) = await results(tools, ("create_todo", {"items": items}))

    assert refused["error"] == "INVALID_DEPENDENCY"
    assert named in refused["message"]
    assert table(database, "SELECT count(*) FROM turn_todos") == [(0,)]
    assert table(database, "SELECT count(*) FROM todo_dependencies") == [(0,)]


# --- BLOCKED ------------------------------------------------------------------------------------


async def test_completing_a_row_early_is_blocked_naming_its_open_blockers(
    tools: list[BaseTool], database: Database
) -> None:
    ids = await plan(tools, DIAMOND)

    (early,) = await results(tools, close(ids["send the invitations"]))

    assert early["error"] == "BLOCKED"
    assert "book the venue" in early["message"] and "email the guests" in early["message"]
    assert early["blockedBy"] == [ids["book the venue"], ids["email the guests"]]
    assert statuses(database)["send the invitations"] == "pending"


def idle_worker() -> Worker:
    async def do(state: WorkerState) -> dict[str, Any]:
        return {"messages": [AIMessage(content="did it")]}

    builder = StateGraph(WorkerState)
    builder.add_node("do", do)
    builder.add_edge(START, "do")
    builder.add_edge("do", END)
    return Worker("helper", "Does an item.", builder.compile(checkpointer=False))


async def test_delegating_a_row_early_is_blocked(tools: list[BaseTool], database: Database) -> None:
    items = [{"title": "a"}, {"title": "b", "blockedBy": [0], "agentType": "helper"}]
    ids = await plan(tools, items)
    delegate = build_delegate_tool({"helper": idle_worker()}, database)

    messages, _ = await run_tool_calls([*tools, delegate], [("delegate", {"todoId": ids["b"]})])

    refused = json.loads(str(messages[0].content))
    assert refused["error"] == "BLOCKED"
    assert refused["blockedBy"] == [ids["a"]]


# --- scheduling ---------------------------------------------------------------------------------


async def test_closing_the_last_blocker_starts_every_row_it_freed_and_names_them(
    tools: list[BaseTool], database: Database
) -> None:
    ids = await plan(tools, DIAMOND)
    assert statuses(database)["book the venue"] == "pending"

    (closed,) = await results(tools, close(ids["find the venue"]))

    assert [row["title"] for row in closed["started"]] == ["book the venue", "email the guests"]
    assert statuses(database) == {
        "find the venue": "completed",
        "book the venue": "in_progress",
        "email the guests": "in_progress",
        "send the invitations": "pending",
    }


async def test_a_cancelled_blocker_counts_as_closed_and_its_dependents_say_so(
    tools: list[BaseTool], database: Database
) -> None:
    ids = await plan(tools, DIAMOND)
    await results(tools, close(ids["find the venue"]))

    cancelled, completed = await results(
        tools, close(ids["book the venue"], "cancelled"), close(ids["email the guests"])
    )
    (listed,) = await results(tools, ("list_todo", {}))

    assert "started" not in cancelled
    assert completed["started"] == [
        {
            "id": ids["send the invitations"],
            "title": "send the invitations",
            "blockersCancelled": [ids["book the venue"]],
        }
    ]
    (last,) = listed["items"]
    assert last["status"] == "in_progress" and last["ready"] is True
    assert last["blockersCancelled"] == [ids["book the venue"]]


async def test_rows_without_blocked_by_keep_their_stages_beside_a_freed_row(
    tools: list[BaseTool], database: Database
) -> None:
    """``c`` waits only for ``a``: it starts when ``a`` closes, beside ``b`` (the next stage),
    and ``d`` still waits for ``b`` and ``c`` by order."""
    items = [{"title": "a"}, {"title": "b"}, {"title": "c", "blockedBy": [0]}, {"title": "d"}]
    ids = await plan(tools, items)

    await results(tools, close(ids["a"]))
    assert statuses(database) == {
        "a": "completed",
        "b": "in_progress",
        "c": "in_progress",
        "d": "pending",
    }
    await results(tools, close(ids["b"]))
    assert statuses(database)["d"] == "pending"
    await results(tools, close(ids["c"]))
    assert statuses(database)["d"] == "in_progress"


async def test_an_item_may_wait_for_a_row_of_an_earlier_call_by_its_id(
    tools: list[BaseTool], database: Database
) -> None:
    first = await plan(tools, [{"title": "a"}])
    later = await plan(tools, [{"title": "b", "blockedBy": [first["a"]]}])

    (listed,) = await results(tools, ("list_todo", {}))

    b = next(item for item in listed["items"] if item["title"] == "b")
    assert b["blockedBy"] == [first["a"]] and b["ready"] is False
    (closed,) = await results(tools, close(first["a"]))
    assert closed["started"] == [{"id": later["b"], "title": "b"}]


# --- storage ------------------------------------------------------------------------------------


async def test_an_existing_database_gains_the_dependency_table(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with closing(sqlite3.connect(path)) as connection:  # a database from before issue 30
        connection.execute(
            "CREATE TABLE turn_todos (id TEXT PRIMARY KEY, conversationId TEXT NOT NULL,"
            " turnId TEXT NOT NULL, title TEXT NOT NULL, context TEXT NOT NULL DEFAULT '',"
            " completionCriteria TEXT NOT NULL DEFAULT '', agentType TEXT,"
            " status TEXT NOT NULL DEFAULT 'pending', priority INTEGER NOT NULL DEFAULT 0,"
            " outcome TEXT, createdAt TEXT NOT NULL, startedAt TEXT, completedAt TEXT)"
        )
    database = Database(f"sqlite+aiosqlite:///{path}")
    try:
        ids = await plan(build_todo_tools(database), DIAMOND[:2])
    finally:
        await database.dispose()

    assert table(database, "SELECT todoId, blockedById FROM todo_dependencies") == [
        (ids["book the venue"], ids["find the venue"])
    ]


async def test_copy_dependencies_carries_the_edges_among_copied_rows_only(
    tools: list[BaseTool], database: Database
) -> None:
    """What continuing a plan in a new turn uses: edges to a row left behind are dropped."""
    ids = await plan(tools, DIAMOND)
    later = TurnScope("conv-1", "turn-2")
    async with database.session() as session:
        copies = await TurnTodoRepository(session).create_batch(
            later, [NewTurnTodo(title=title) for title in list(ids)[1:]]
        )
        old_to_new = {ids[c.title]: c.id for c in copies}
        copied = await copy_dependencies(session, later, old_to_new)
        rows = await TurnTodoRepository(session).find_by_turn(later)

    assert copied == 2  # "find the venue" was not copied: the edges to it are gone
    shown = {row.title: row.to_dict() for row in rows}
    assert shown["book the venue"]["blockedBy"] == []
    assert shown["send the invitations"]["blockedBy"] == [
        old_to_new[ids["book the venue"]],
        old_to_new[ids["email the guests"]],
    ]
    assert shown["send the invitations"]["ready"] is False


def test_a_fork_copies_its_snapshot_s_edges_onto_the_new_ids() -> None:
    todos = [{"id": "a", "title": "a"}, {"id": "b", "title": "b", "blockedBy": ["a"]}]
    copies = [TurnTodo(id="A2", title="a"), TurnTodo(id="B2", title="b")]

    assert copied_edges(todos, copies) == [("B2", "A2")]


async def test_an_edited_plan_replaces_the_open_rows_edges_with_its_own(
    tools: list[BaseTool], database: Database
) -> None:
    """Plan approval's edit replaces the open rows: their edges go with them."""
    await plan(tools, DIAMOND)
    edited = [TodoItemInput(title="x"), TodoItemInput(title="y", blockedBy=[0])]

    change = await TurnPlan(database, TurnScope("conv-1", "turn-1")).replace_open_items(
        edited, PlanLimits()
    )

    x, y = change.planned
    assert table(database, "SELECT todoId, blockedById FROM todo_dependencies") == [(y.id, x.id)]
