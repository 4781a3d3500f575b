"""``planEdits``: a run with edits and no new message changes the current turn's plan with no
LLM call; a paused turn stays paused, asked again with the edited plan; an ended one stays
ended; a bad edit changes nothing and says why; every edit is audited."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from agent.context import Context
from agent.graph import build_graph
from storage import Database
from storage.repositories import ToolAuditRepository
from tests.fakes import ScriptedChatModel
from tests.unit.plan.test_ask_user import CONFIG as ASK_CONFIG
from tests.unit.plan.test_ask_user import AmbiguousTitleModel, setup
from tests.unit.plan.test_plan_approval import (
    CONFIG,
    approval_aware_model,
    plans_and_stalls,
    task_titles,
)


async def paused_for_approval(database: Database) -> tuple[Any, ScriptedChatModel]:
    model = ScriptedChatModel(responder=approval_aware_model)
    graph = build_graph(model, database=database, checkpointer=InMemorySaver())
    await graph.ainvoke(
        {"messages": [HumanMessage(content="add bread and milk")]},
        CONFIG,
        context=Context(approve_plan=True),
    )
    return graph, model


def ids_by_title(todos: list[dict[str, Any]]) -> dict[str, str]:
    return {todo["title"]: str(todo["id"]) for todo in todos}


async def audit_rows(database: Database, conversation: str, turn: str) -> list[Any]:
    async with database.session() as session:
        rows = await ToolAuditRepository(session).for_turn(conversation, turn)
    return [row for row in rows if row.tool_name == "plan_edit"]


async def test_edits_on_a_plan_awaiting_approval_ask_again_and_the_approval_works_them(
    database: Database,
) -> None:
    graph, model = await paused_for_approval(database)
    before = model.calls
    todos = (await graph.aget_state(CONFIG)).values["todos"]
    milk = ids_by_title(todos)["Add milk"]

    edited = await graph.ainvoke(
        {
            "planEdits": [
                {"op": "add", "title": "Add eggs", "description": "a dozen"},
                {"op": "cancel", "id": milk, "reason": "have some"},
                {"op": "move", "id": ids_by_title(todos)["Add bread"], "position": 0},
            ]
        },
        CONFIG,
    )

    assert model.calls == before  # no LLM call
    assert edited["planEditResult"] == {"status": "applied", "applied": 3}
    (pause,) = edited["__interrupt__"]
    assert pause.value["type"] == "plan_approval"
    assert pause.value["action_requests"][0]["args"]["items"] == [
        {"title": "Add bread"},
        {"title": "Add eggs", "context": "a dozen"},
    ]
    rows = {row["title"]: row for row in edited["todos"]}
    assert rows["Add milk"]["status"] == "cancelled"
    assert rows["Add milk"]["outcome"] == "Cancelled by the user: have some"
    state = await graph.aget_state(CONFIG)
    assert state.values["planEdits"] == []

    done = await graph.ainvoke(Command(resume={"decisions": [{"type": "approve"}]}), CONFIG)

    assert done["turnStatus"] == "answered"
    assert await task_titles(database) == ["bread", "eggs"]
    audited = await audit_rows(database, done["conversationId"], done["turnId"])
    assert [(a.status, a.error_code) for a in audited] == [("success", None)] * 3


async def test_an_edit_while_a_question_is_pending_asks_it_again_and_the_answer_goes_on(
    database: Database,
) -> None:
    graph, _ = await setup(database, AmbiguousTitleModel())
    model_calls = len((await graph.aget_state(ASK_CONFIG)).values["messages"])

    edited = await graph.ainvoke({"planEdits": [{"op": "add", "title": "Tell dad"}]}, ASK_CONFIG)

    (pause,) = edited["__interrupt__"]
    assert pause.value["type"] == "question"
    assert pause.value["question"] == "Which call task?"
    assert [row["title"] for row in edited["todos"]] == ["Complete the call task", "Tell dad"]
    assert len(edited["messages"]) == model_calls  # nothing said, nothing asked of the model
    result = await graph.ainvoke(Command(resume="call dad"), ASK_CONFIG)
    assert result["turnStatus"] == "answered"
    assert [(r["title"], r["status"]) for r in result["todos"]] == [
        ("Complete the call task", "completed"),
        ("Tell dad", "completed"),
    ]


async def test_edits_on_an_ended_turn_with_open_rows_leave_it_ended(database: Database) -> None:
    model = ScriptedChatModel(responder=plans_and_stalls)
    graph = build_graph(model, database=database, checkpointer=InMemorySaver())
    ended = await graph.ainvoke({"messages": [HumanMessage(content="bread, milk")]}, CONFIG)
    assert ended["turnStatus"] == "stalled"
    calls = model.calls
    ids = ids_by_title(ended["todos"])

    edited = await graph.ainvoke(
        {
            "planEdits": [
                {"op": "move", "id": ids["Add milk"], "position": 1},
                {"op": "cancel", "id": ids["Add bread"], "reason": "not needed"},
            ]
        },
        CONFIG,
    )

    assert model.calls == calls
    assert "__interrupt__" not in edited
    assert edited["turnStatus"] == "stalled"
    assert [(r["title"], r["status"]) for r in edited["todos"]] == [
        ("Add bread", "cancelled"),
        ("Add milk", "pending"),  # an ended turn starts nothing
    ]


async def test_bad_edits_change_nothing_and_say_which_and_why(database: Database) -> None:
    graph, model = await paused_for_approval(database)
    calls = model.calls
    todos = (await graph.aget_state(CONFIG)).values["todos"]
    ids = ids_by_title(todos)
    cases = [
        ([{"op": "cancel", "id": "0f8fad5b-d9cb-469f-a165-70867728950e"}], "NOT_FOUND"),
        ([{"op": "add", "title": "Add tea"}, {"op": "add", "title": "  "}], "empty title"),
        ([{"op": "move", "id": ids["Add milk"], "position": 0}], "second row in progress"),
        ([{"op": "move", "id": ids["Add milk"], "position": 5}], "past the end"),
        (
            [{"op": "cancel", "id": ids["Add milk"]}, {"op": "cancel", "id": ids["Add milk"]}],
            "already cancelled",
        ),
        ([{"op": "rename", "id": ids["Add milk"]}], "planEdits is malformed"),
    ]
    for edits, expected in cases:
        result = await graph.ainvoke({"planEdits": edits}, CONFIG)
        problem = result["planEditResult"]
        assert problem["status"] == "error", edits
        assert expected in f"{problem['error']} {problem['message']}", problem
        assert problem["suggestion"]
        assert result["todos"] == todos, "nothing changed"
        assert result["__interrupt__"][0].value["type"] == "plan_approval", "still paused"

    assert model.calls == calls
    state = await graph.aget_state(CONFIG)
    audited = await audit_rows(database, state.values["conversationId"], state.values["turnId"])
    assert [a.status for a in audited] == ["error"] * len(cases)
    assert '"title": "  "' in audited[1].arguments  # the failing edit is the one recorded
