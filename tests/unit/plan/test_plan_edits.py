"""``planEdits``: a run with edits and no new message changes the current turn's plan with no
LLM call; a paused turn stays paused, asked again with the edited plan; an ended one stays
ended; a bad edit changes nothing and says why; every edit is audited."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from agent.context import Context
from agent.graph import build_graph
from agent.turn import plan_edits
from agent.turn.plan_edits import apply_plan_edits
from agent.turn.plan_rows import TurnPlan, plan_limits
from storage import Database
from storage.repositories import ToolAuditRepository, TurnScope
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
    assert rows["Add milk"]["cancelledBy"] == "user"  # the user's choice: the turn may answer
    (card,) = [ui for ui in edited["ui"] if ui["name"] == "plan"]  # the card shows the edits
    assert [(r["title"], r["status"]) for r in card["props"]["todos"]] == [
        (r["title"], r["status"]) for r in edited["todos"]
    ]
    assert "Add eggs" in [r["title"] for r in card["props"]["todos"]]
    state = await graph.aget_state(CONFIG)
    assert state.values["planEdits"] is None  # taken once

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


def run_config(run_id: str, checkpoint_id: str | None = None) -> RunnableConfig:
    """The config a LangGraph Server gives every attempt of one run (its ``run_id``), on the
    checkpoint the thread had saved when the attempt started."""
    configurable: dict[str, Any] = {**CONFIG["configurable"], "run_id": run_id}
    if checkpoint_id is not None:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


async def test_a_re_picked_run_applies_its_edits_once_and_a_new_run_applies_them_again(
    database: Database,
) -> None:
    graph, model = await paused_for_approval(database)
    calls = model.calls
    paused = await graph.aget_state(CONFIG)
    ids = ids_by_title(paused.values["todos"])
    edits = {
        "planEdits": [
            {"op": "add", "title": "Add eggs"},
            {"op": "cancel", "id": ids["Add milk"], "reason": "have some"},
        ]
    }

    first = await graph.ainvoke(edits, run_config("run-1"))
    # The worker died before its checkpoints were saved: the server starts the same run over
    # from its input, on the checkpoint the thread had (the paused one), and again on the newer.
    lost = await graph.ainvoke(
        edits, run_config("run-1", paused.config["configurable"]["checkpoint_id"])
    )
    again = await graph.ainvoke(edits, run_config("run-1"))

    assert first["planEditResult"] == {"status": "applied", "applied": 2}
    assert lost["planEditResult"] == again["planEditResult"] == first["planEditResult"]
    expected = [("Add bread", "in_progress"), ("Add milk", "cancelled"), ("Add eggs", "pending")]
    for result in (first, lost, again):
        assert [(r["title"], r["status"]) for r in result["todos"]] == expected
        assert result["__interrupt__"][0].value["type"] == "plan_approval"
    conversation, turn = first["conversationId"], first["turnId"]
    assert len(await audit_rows(database, conversation, turn)) == 2  # audited once

    # Another run with the same edits is a new request of the user's: applied again (the add;
    # the cancel fails, since the row is closed now, and the batch with it).
    other = await graph.ainvoke(
        {"planEdits": [{"op": "add", "title": "Add eggs"}]}, run_config("run-2")
    )
    assert other["planEditResult"] == {"status": "applied", "applied": 1}
    assert [r["title"] for r in other["todos"]].count("Add eggs") == 2
    assert len(await audit_rows(database, conversation, turn)) == 3
    assert model.calls == calls

    done = await graph.ainvoke(Command(resume={"decisions": [{"type": "approve"}]}), CONFIG)
    assert done["turnStatus"] == "answered"
    assert await task_titles(database) == ["bread", "eggs", "eggs"]


async def test_a_re_picked_run_whose_edits_failed_gets_the_same_error_audited_once(
    database: Database,
) -> None:
    graph, _ = await paused_for_approval(database)
    todos = (await graph.aget_state(CONFIG)).values["todos"]
    bad = {"planEdits": [{"op": "add", "title": "Add tea"}, {"op": "add", "title": " "}]}

    first = await graph.ainvoke(bad, run_config("run-bad"))
    again = await graph.ainvoke(bad, run_config("run-bad"))

    assert first["planEditResult"]["status"] == "error"
    assert again["planEditResult"] == first["planEditResult"]
    assert again["todos"] == todos, "nothing changed"
    audited = await audit_rows(database, first["conversationId"], first["turnId"])
    assert [(a.status, a.error_code) for a in audited] == [("error", "VALIDATION_ERROR")]


async def test_two_attempts_of_a_run_racing_apply_the_edits_once(
    database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    graph, _ = await paused_for_approval(database)
    state = (await graph.aget_state(CONFIG)).values
    scope = TurnScope(state["conversationId"], state["turnId"])
    add = [{"op": "add", "title": "Add eggs"}]
    limits = plan_limits(Context())
    first = await apply_plan_edits(
        database, scope, add, limits, user_id="u", start_next=True, run_key="run-race"
    )
    # The second attempt looked for the record before the first wrote it.
    monkeypatch.setattr(plan_edits, "_recorded", _not_recorded_at_first(plan_edits._recorded))

    second = await apply_plan_edits(
        database, scope, add, limits, user_id="u", start_next=True, run_key="run-race"
    )

    assert second.applied == first.applied == 1
    assert [row.title for row in second.rows] == ["Add bread", "Add milk", "Add eggs"]
    assert len(await audit_rows(database, scope.conversation_id, scope.turn_id)) == 1


def _not_recorded_at_first(
    recorded: Callable[[Database, TurnScope, str], Awaitable[dict[str, Any] | None]],
) -> Callable[[Database, TurnScope, str], Awaitable[dict[str, Any] | None]]:
    looked = False

    async def lookup(database: Database, scope: TurnScope, call_id: str) -> dict[str, Any] | None:
        nonlocal looked
        if not looked:
            looked = True
            return None
        return await recorded(database, scope, call_id)

    return lookup


async def test_edits_from_a_state_edited_to_name_another_users_conversation_change_nothing(
    database: Database,
) -> None:
    """Bob edits his own thread's state to name Alice's conversation and turn, then sends
    plan edits: they are refused, and Alice's rows stay as they were."""
    graph = build_graph(
        ScriptedChatModel(responder=plans_and_stalls),
        database=database,
        checkpointer=InMemorySaver(),
    )
    alice: RunnableConfig = {"configurable": {"thread_id": "alice-thread"}}
    bob: RunnableConfig = {"configurable": {"thread_id": "bob-thread"}}
    request = {"messages": [HumanMessage(content="add bread and milk")]}
    await graph.ainvoke(request, alice, context=Context(user_id="alice"))
    await graph.ainvoke(request, bob, context=Context(user_id="bob"))
    hers = (await graph.aget_state(alice)).values
    await graph.aupdate_state(
        bob, {"conversationId": hers["conversationId"], "turnId": hers["turnId"]}
    )

    edited = await graph.ainvoke(
        {
            "planEdits": [
                {"op": "add", "title": "bob was here"},
                {"op": "cancel", "id": hers["todos"][0]["id"], "reason": "mine now"},
            ]
        },
        bob,
        context=Context(user_id="bob"),
    )

    assert edited["planEditResult"]["status"] == "error"
    assert edited["planEditResult"]["error"] == "NOT_RUN"
    assert "belongs to another user" in edited["planEditResult"]["message"]
    scope = TurnScope(hers["conversationId"], hers["turnId"])
    rows, _ = await TurnPlan(database, scope).rows()
    assert [(row.title, row.status) for row in rows] == [
        (todo["title"], todo["status"]) for todo in hers["todos"]
    ]
