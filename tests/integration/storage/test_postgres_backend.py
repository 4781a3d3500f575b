"""PostgreSQL as a first-class backend, on a real server (``pgserver``): seed 004's schema with
its quoted camelCase columns, the todo tools, exactly-once replay, durable checkpoints, and many
turns at once. (The storage, task and full-turn test modules also run on both backends.)"""

from __future__ import annotations

import asyncio
import io

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from sqlalchemy import insert, select, text, update
from sqlalchemy.exc import IntegrityError

from agent.app.checkpoints import open_checkpointer
from agent.app.run_turn import run_turn
from agent.context import Context
from agent.graph import build_graph
from storage import Database
from storage.models import Turn
from tests.fakes import PlanOracle, ScriptedChatModel, tool_call
from tests.postgres import PostgresServer

TITLES = ["first", "second", "third"]


@tool
def note(text: str) -> str:
    """Note something down."""
    return text


def oracle_model(titles: list[str]) -> ScriptedChatModel:
    return ScriptedChatModel(
        responder=PlanOracle(titles, lambda title: tool_call("note", text=title))
    )


async def test_turn_todos_has_seed_004s_columns_and_indexes(
    postgres_server: PostgresServer,
) -> None:
    database = Database(postgres_server.fresh_database_url())
    try:
        await database.create_schema()
        async with database.session(readonly=True) as session:
            columns = await session.execute(
                text(
                    "SELECT column_name, data_type, is_nullable FROM information_schema.columns "
                    "WHERE table_name = 'turn_todos' ORDER BY ordinal_position"
                )
            )
            indexes = await session.execute(
                text("SELECT indexname FROM pg_indexes WHERE tablename = 'turn_todos'")
            )
            found = {name: (kind, nullable) for name, kind, nullable in columns}
            index_names = {name for (name,) in indexes}
    finally:
        await database.dispose()
    assert list(found) == [
        "id",
        "conversationId",
        "turnId",
        "title",
        "context",
        "completionCriteria",
        "agentType",
        "status",
        "priority",
        "outcome",
        "createdAt",
        "startedAt",
        "completedAt",
    ]
    assert found["turnId"] == ("text", "NO") and found["priority"] == ("integer", "NO")
    assert {"idx_turn_todos_turn", "idx_turn_todos_conversation"} <= index_names


async def test_a_planned_turn_drains_on_postgres_with_durable_checkpoints(
    postgres_server: PostgresServer,
) -> None:
    url = postgres_server.fresh_database_url()
    database = Database(url)
    config = {"configurable": {"thread_id": "pg-thread"}}
    try:
        async with open_checkpointer(database) as checkpointer:
            graph = build_graph(
                oracle_model(TITLES),
                tools=[note],
                database=database,
                include_default_tools=False,
                checkpointer=checkpointer,
            )
            result = await graph.ainvoke(
                {"messages": [HumanMessage(content="three notes")]}, config, context=Context()
            )
        # Another connection, as another process would open it, finds the thread.
        async with open_checkpointer(Database(url)) as reopened:
            saved = await reopened.aget_tuple(config)
        # The rows' usage is written as the turn ends (a failure there is only logged).
        async with database.session(readonly=True) as session:
            charged = (
                await session.execute(
                    text('SELECT "todoId", "llmCalls" FROM turn_row_usage WHERE "turnId" = :turn'),
                    {"turn": result["turnId"]},
                )
            ).all()
    finally:
        await database.dispose()
    assert result["turnStatus"] == "answered"
    assert [todo["status"] for todo in result["todos"]] == ["completed"] * 3
    assert {todo_id for todo_id, _ in charged} == {todo["id"] for todo in result["todos"]}
    assert all(calls >= 1 for _, calls in charged)
    assert saved is not None
    assert saved.checkpoint["channel_values"]["turnStatus"] == "answered"


async def test_turnplan_run_continues_a_thread_on_postgres(
    postgres_server: PostgresServer,
) -> None:
    url = postgres_server.fresh_database_url()
    out = io.StringIO()
    first = await run_turn(
        "hello",
        model=ScriptedChatModel(responder=lambda _: AIMessage(content="Hi!")),
        database_url=url,
        thread_id="t",
        out=out,
    )
    second_model = ScriptedChatModel(responder=lambda _: AIMessage(content="Again."))
    second = await run_turn("again", model=second_model, database_url=url, thread_id="t", out=out)
    assert (first.status, second.status) == ("answered", "answered")
    history = [str(m.content) for m in second_model.prompts[-1][1:]]
    assert history == ["hello", "Hi!", "again"]


async def test_sixteen_concurrent_turns_on_postgres_have_no_tool_errors(
    postgres_server: PostgresServer,
) -> None:
    url = postgres_server.fresh_database_url()
    setup = Database(url)
    await setup.create_schema()
    await setup.dispose()

    async def one_turn(n: int) -> dict[str, object]:
        database = Database(url)
        graph = build_graph(
            oracle_model([f"a{n}", f"b{n}", f"c{n}"]),
            tools=[note],
            database=database,
            include_default_tools=False,
        )
        try:
            result: dict[str, object] = await graph.ainvoke(
                {"messages": [HumanMessage(content="notes")]}, context=Context()
            )
        finally:
            await database.dispose()
        return result

    results = await asyncio.gather(*(one_turn(n) for n in range(16)))
    assert [r["turnStatus"] for r in results] == ["answered"] * 16
    assert sum(int(str(r["toolErrors"])) for r in results) == 0
    assert all(
        [todo["status"] for todo in r["todos"]] == ["completed"] * 3  # type: ignore[attr-defined]
        for r in results
    )


async def test_server_workers_starting_together_create_the_schema_once(
    postgres_server: PostgresServer,
) -> None:
    # Each worker of a multi-worker server has its own engine and meets an empty database at
    # its first turn; PostgreSQL's CREATE TABLE races ("duplicate key value violates unique
    # constraint pg_type_typname_nsp_index") unless the creators take turns.
    url = postgres_server.fresh_database_url()
    workers = [Database(url) for _ in range(8)]
    try:
        await asyncio.gather(*(db.create_schema() for db in workers))
        async with workers[0].session() as session:
            tables = await session.execute(
                text("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'")
            )
            assert tables.scalar_one() >= 7
    finally:
        for db in workers:
            await db.dispose()


async def test_a_statement_written_alone_commits_by_itself_and_a_failed_one_changes_nothing(
    postgres_server: PostgresServer,
) -> None:
    """``Database.write_alone`` runs in autocommit here (one round trip, no BEGIN or COMMIT):
    its change is committed with its count, a failed one changes nothing, and the pooled
    connection is fit for the next transaction."""
    database = Database(postgres_server.fresh_database_url())
    row = {"conversationId": "c", "messageId": "m", "step": 1, "taskId": "t"}
    stamps = {"createdAt": "2026-01-01T00:00:00Z", "updatedAt": "2026-01-01T00:00:00Z"}
    try:
        assert await database.write_alone(insert(Turn), [{"turnId": "a", **row, **stamps}]) == 1
        moved = await database.write_alone(update(Turn).where(Turn.step == 1).values(step=2), {})
        with pytest.raises(IntegrityError):
            await database.write_alone(insert(Turn).values(turnId="a", **row, **stamps), {})
        async with database.session() as session:
            await session.execute(insert(Turn).values(turnId="b", **row, **stamps))
        async with database.session(readonly=True) as session:
            found = await session.execute(select(Turn.turnId, Turn.step).order_by(Turn.turnId))
            assert (moved, found.all()) == (1, [("a", 2), ("b", 1)])
    finally:
        await database.dispose()
