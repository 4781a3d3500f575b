"""Every run input that grows the server's work has a cap, and strict types: past the cap, or
of the wrong type, the input is refused with VALIDATION_ERROR and nothing changes (issue 41).

Caps: planEdits per run (``max_plan_edits``, 50), rows per plan after create_todo, planEdits or
a continuation (``max_plan_rows``, 100), a human message's size (``max_message_chars``, 32,000);
a run's context may lower them, never raise them past ``LIMIT_CEILINGS``."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from typing import Any

import pytest
from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.checkpoint.memory import InMemorySaver

from agent.context import LIMIT_CEILINGS, Context
from agent.errors import ErrorCode, ToolFailure
from agent.graph import build_graph
from agent.tools.todos import build_todo_tools
from agent.turn.continuation import continue_open_rows
from agent.turn.plan_rows import PlanLimits, TodoItemInput, TurnPlan
from storage import Database
from storage.repositories import TurnScope
from tests.fakes import ScriptedChatModel
from tests.unit.plan.test_plan_approval import CONFIG
from tests.unit.plan.test_plan_edits import audit_rows, ids_by_title, paused_for_approval
from tests.unit.plan.test_todo_tools import call


def open_rows(database: Database) -> list[tuple[str, str]]:
    path = database.url.split("///", 1)[1]
    with closing(sqlite3.connect(path)) as connection:
        return connection.execute(
            "SELECT turnId, title FROM turn_todos WHERE status IN ('pending', 'in_progress')"
            " ORDER BY turnId, priority"
        ).fetchall()


def adds(count: int, prefix: str = "Step") -> dict[str, Any]:
    return {"planEdits": [{"op": "add", "title": f"{prefix} {n}"} for n in range(count)]}


async def assert_refused_unchanged(
    graph: Any, run_input: dict[str, Any], todos: list[dict[str, Any]], expected: str
) -> dict[str, Any]:
    """The run's planEdits are refused with VALIDATION_ERROR naming ``expected``; the plan is
    as it was, and the paused turn is asked again."""
    result = await graph.ainvoke(run_input, CONFIG)
    problem = result["planEditResult"]
    assert problem["status"] == "error", problem
    assert problem["error"] == "VALIDATION_ERROR", problem
    assert expected in problem["message"], problem
    assert problem["suggestion"]
    assert result["todos"] == todos, "nothing changed"
    assert result["__interrupt__"][0].value["type"] == "plan_approval", "still paused"
    return problem


async def test_more_plan_edits_than_a_run_may_send_are_refused_whole(database: Database) -> None:
    graph, model = await paused_for_approval(database)
    calls = model.calls
    todos = (await graph.aget_state(CONFIG)).values["todos"]

    problem = await assert_refused_unchanged(graph, adds(51), todos, "at most 50")

    assert problem["limit"] == 50
    applied = await graph.ainvoke(adds(50), CONFIG)  # the cap itself is allowed
    assert applied["planEditResult"] == {"status": "applied", "applied": 50}
    assert len(applied["todos"]) == 52
    assert model.calls == calls


async def test_edits_that_would_pass_the_plan_rows_cap_are_refused_and_change_nothing(
    database: Database,
) -> None:
    graph, _ = await paused_for_approval(database)
    first = await graph.ainvoke(adds(50), CONFIG)
    assert first["planEditResult"]["status"] == "applied"  # 52 rows
    todos = first["todos"]

    problem = await assert_refused_unchanged(graph, adds(49, "More"), todos, "at most 100 rows")

    assert "101" in problem["message"]
    state = (await graph.aget_state(CONFIG)).values
    audited = await audit_rows(database, state["conversationId"], state["turnId"])
    assert [a.status for a in audited].count("error") == 1
    fits = await graph.ainvoke(adds(48, "More"), CONFIG)  # exactly 100 rows
    assert fits["planEditResult"]["status"] == "applied"
    assert len(fits["todos"]) == 100


@pytest.mark.parametrize(
    ("edits", "expected"),
    [
        ([], "planEdits is empty"),
        ([{"op": "move", "id": "ID", "position": True}], "position"),
        ([{"op": "move", "id": "ID", "position": "1"}], "position"),
        ([{"op": "move", "id": "ID", "position": 1.0}], "position"),
    ],
)
async def test_empty_plan_edits_and_positions_that_are_not_integers_are_refused(
    database: Database, edits: Any, expected: str
) -> None:
    graph, model = await paused_for_approval(database)
    calls = model.calls
    todos = (await graph.aget_state(CONFIG)).values["todos"]
    milk = ids_by_title(todos)["Add milk"]
    if isinstance(edits, list):
        edits = [{**e, "id": milk} if "id" in e else e for e in edits]

    await assert_refused_unchanged(graph, {"planEdits": edits}, todos, expected)

    assert model.calls == calls
    assert (await graph.aget_state(CONFIG)).values["planEdits"] is None


def never_called(messages: list[BaseMessage]) -> Any:
    raise AssertionError("a refused input must not reach the model")


async def test_continue_plan_must_be_a_real_boolean(database: Database) -> None:
    graph = build_graph(
        ScriptedChatModel(responder=never_called), database=database, checkpointer=InMemorySaver()
    )
    config: RunnableConfig = {"configurable": {"thread_id": "strict"}}

    result = await graph.ainvoke(
        {"messages": [HumanMessage(content="go on", id="m1")], "continuePlan": "yes"}, config
    )

    problem = result["inputError"]
    assert problem["error"] == "VALIDATION_ERROR"
    assert problem["field"] == "continuePlan"
    assert '"yes"' in problem["message"]
    assert result["messages"] == []  # the run's message is not kept
    assert not result.get("turnId")  # no turn started
    assert (await graph.aget_state(config)).values["continuePlan"] is False


async def test_an_oversized_message_is_refused_and_the_paused_turn_is_asked_again(
    database: Database,
) -> None:
    graph, model = await paused_for_approval(database)
    calls = model.calls
    before = (await graph.aget_state(CONFIG)).values

    result = await graph.ainvoke(
        {"messages": [HumanMessage(content="x" * 32_001, id="huge")]}, CONFIG
    )

    problem = result["inputError"]
    assert problem["error"] == "VALIDATION_ERROR"
    assert problem["limit"] == 32_000
    assert "32001 characters" in problem["message"]
    assert model.calls == calls
    assert [m.id for m in result["messages"]] == [m.id for m in before["messages"]]
    assert result["turnId"] == before["turnId"]
    assert result["__interrupt__"][0].value["type"] == "plan_approval"
    # A message of the cap's size is a turn like any other (the input error is cleared).
    ok = await graph.ainvoke({"messages": [HumanMessage(content="x" * 32_000)]}, CONFIG)
    assert ok["inputError"] is None
    assert model.calls > calls


async def test_the_cap_counts_every_message_a_run_sends_together(database: Database) -> None:
    """Splitting an oversized request into several messages of one run does not pass the cap:
    every one of them would be kept in the thread and sent with the turn's calls."""
    graph = build_graph(
        ScriptedChatModel(responder=never_called), database=database, checkpointer=InMemorySaver()
    )
    config: RunnableConfig = {"configurable": {"thread_id": "split"}}
    halves = [HumanMessage(content="x" * 20_000, id=f"half-{n}") for n in range(2)]

    result = await graph.ainvoke({"messages": halves}, config)

    assert result["inputError"]["error"] == "VALIDATION_ERROR"
    assert "40000 characters" in result["inputError"]["message"]
    assert result["messages"] == []


async def test_create_todo_past_the_plan_rows_cap_is_refused_and_writes_nothing(
    database: Database,
) -> None:
    await database.create_schema()
    tools: list[BaseTool] = build_todo_tools(database)
    fifty = {"items": [{"title": f"Step {n}"} for n in range(50)]}
    for _ in range(2):
        status, body = await call(tools, "create_todo", fifty)
        assert status == "success", body

    status, body = await call(tools, "create_todo", {"items": [{"title": "One more"}]})

    assert status == "error"
    assert body["error"] == "VALIDATION_ERROR"
    assert "at most 100 rows" in body["message"]
    assert len(open_rows(database)) == 100


async def test_an_outcome_past_the_text_cap_is_refused_and_the_row_stays_open(
    database: Database,
) -> None:
    await database.create_schema()
    tools: list[BaseTool] = build_todo_tools(database)
    status, body = await call(tools, "create_todo", {"items": [{"title": "Write it up"}]})
    assert status == "success", body
    todo_id = body["created"][0]["id"]

    status, body = await call(tools, "complete_todo", {"todoId": todo_id, "outcome": "x" * 10_001})

    assert status == "error"
    assert body["error"] == "VALIDATION_ERROR"
    assert "the limit is 10000" in body["message"]
    assert open_rows(database) == [(open_rows(database)[0][0], "Write it up")]


async def plant_open_rows(database: Database, conversation: str, turns: int, rows: int) -> None:
    """Earlier turns of ``conversation`` that each left ``rows`` rows open."""
    await database.create_schema()
    limits = PlanLimits(max_batch_items=rows, max_plan_rows=rows)
    for turn in range(turns):
        plan = TurnPlan(database, TurnScope(conversation, f"old-{turn}"))
        await plan.add_items([TodoItemInput(title=f"t{turn} r{n}") for n in range(rows)], limits)


async def test_a_continuation_past_the_plan_rows_cap_is_refused_and_copies_nothing(
    database: Database,
) -> None:
    await plant_open_rows(database, "cont", turns=2, rows=60)
    graph = build_graph(
        ScriptedChatModel(responder=never_called), database=database, checkpointer=InMemorySaver()
    )
    config: RunnableConfig = {"configurable": {"thread_id": "cont"}}

    result = await graph.ainvoke({"continuePlan": True}, config)

    problem = result["inputError"]
    assert problem["error"] == "VALIDATION_ERROR"
    assert problem["field"] == "continuePlan"
    assert "120" in problem["message"] and "at most 100 rows" in problem["message"]
    left = open_rows(database)
    assert len(left) == 120 and {turn for turn, _ in left} == {"old-0", "old-1"}
    assert not result.get("turnId")  # no turn started


def test_a_run_context_may_lower_the_caps_but_never_raise_them_past_the_ceilings() -> None:
    assert Context(max_plan_rows=10, max_plan_edits=5, max_message_chars=100).max_plan_rows == 10
    for name, ceiling in LIMIT_CEILINGS.items():
        with pytest.raises(ValueError, match=f"at most {ceiling}"):
            Context(**{name: ceiling + 1})


async def test_the_continue_tool_past_the_plan_rows_cap_is_refused_and_closes_nothing(
    database: Database,
) -> None:
    """The model's ``continue_open_todos`` shares the cap with ``continuePlan``: the copy is
    checked in its own transaction, so nothing is closed or copied."""
    await plant_open_rows(database, "cont", turns=2, rows=60)

    with pytest.raises(ToolFailure) as refused:
        await continue_open_rows(database, TurnScope("cont", "new"), None, PlanLimits())

    assert refused.value.code == ErrorCode.VALIDATION_ERROR
    assert "at most 100 rows" in refused.value.message
    assert len(open_rows(database)) == 120
    assert {turn for turn, _ in open_rows(database)} == {"old-0", "old-1"}
