"""Exactly-once tool results, evidence and completion checks, and plan approval in LangChain's
HITL shape, on both faces of turnplan (the supervisor graph and ``create_agent`` with
``TurnPlanMiddleware``): one test body each."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from contextlib import closing, suppress
from typing import Annotated, Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.tools import BaseTool, InjectedToolCallId, tool
from langgraph.types import Command

from agent.context import Context
from agent.prompting.builder import ORPHAN_RESULT
from storage import Database
from tests.fakes import (
    ScriptedChatModel,
    act,
    ai,
    answer_with,
    close_row,
    plan_items,
    plan_rows,
    plan_view,
    record,
    scripted_turn,
    tool_call,
    tool_results,
    window_of,
)
from tests.unit.middleware.faces import Face


def count(database: Database, sql: str) -> int:
    path = database.url.split("///", 1)[1]
    with closing(sqlite3.connect(path)) as connection:
        return int(connection.execute(sql).fetchone()[0])


class Gate:
    """A tool that blocks until released (so the test can cancel the run there)."""

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.block = True

    def tool(self) -> BaseTool:
        @tool
        async def wait_here(note: str) -> str:
            """Wait (stands in for a slow tool)."""
            self.entered.set()
            if self.block:
                await asyncio.sleep(3600)
            return json.dumps({"waited": note})

        return wait_here


async def recorded(database: Database, tool_name: str) -> None:
    """Wait until a result of ``tool_name`` is recorded."""
    for _ in range(500):
        with suppress(sqlite3.OperationalError):
            sql = f"SELECT count(*) FROM tool_results WHERE toolName = '{tool_name}'"
            if count(database, sql):
                return
        await asyncio.sleep(0.02)
    raise AssertionError(f"no result of {tool_name} was recorded")


async def stopped_in_the_gate(
    face: Face, database: Database, model: ScriptedChatModel, first: BaseTool = record
) -> tuple[Any, Gate]:
    """Says "note milk" to ``face`` (tools: ``first`` and a gate) and cancels the run once it
    waits in the gate with ``first``'s result committed: a tools step stopped halfway, as a
    user pressing stop leaves it. Returns the agent (to resume, or for a new turn) and the gate,
    still closed."""
    gate = Gate()
    agent = face.build(model, database, [first, gate.tool()])
    run = asyncio.create_task(face.run(agent, "note milk"))
    await asyncio.wait_for(gate.entered.wait(), 10)
    await recorded(database, first.name)
    run.cancel()
    with suppress(asyncio.CancelledError):
        await run
    return agent, gate


# --- exactly once ------------------------------------------------------------------------------


async def resumed_after_the_gate(
    face: Face, database: Database, first: BaseTool, arguments: dict[str, Any]
) -> dict[str, Any]:
    """A turn that plans "Note milk", calls ``first`` and then the gate in one message, is
    stopped in the gate (``stopped_in_the_gate``), and is resumed: the resumed run's values."""
    model = scripted_turn(
        database,
        act(
            tool_call("create_todo", items=[{"title": "Note milk"}]),
            tool_call(first.name, **arguments),
            tool_call("wait_here", note="x"),
        ),
        close_row(0),
        answer_with("Noted."),
    )
    agent, gate = await stopped_in_the_gate(face, database, model, first)
    gate.block = False
    return await face.run(agent, None)


async def test_a_resumed_tools_step_returns_the_recorded_results_and_acts_once(
    face: Face, database: Database, recorded_notes: list[str]
) -> None:
    result = await resumed_after_the_gate(face, database, record, {"note": "milk"})

    assert result["turnStatus"] == "answered"
    assert recorded_notes == ["milk"], "record ran twice"
    assert count(database, "SELECT count(*) FROM turn_todos") == 1, "create_todo ran twice"
    (note,) = tool_results(result, "record")
    assert json.loads(str(note.content)) == {"recorded": "milk"}
    assert [t["status"] for t in result["todos"]] == ["completed"]


TASKS_NOTED: list[str] = []


@tool
def note_task(title: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> Command[Any]:
    """Note a task, and add it to the turn's changed tasks (a caller's tool that updates the
    agent's state as well as answering)."""
    TASKS_NOTED.append(title)
    answer = ToolMessage(content=json.dumps({"noted": title}), tool_call_id=tool_call_id)
    change = {"action": "created", "task_id": f"t-{title}", "title": title}
    return Command(update={"messages": [answer], "modifiedTasks": [change]})


async def test_a_tool_returning_a_command_acts_once_and_its_update_is_replayed(
    face: Face, database: Database
) -> None:
    TASKS_NOTED.clear()
    result = await resumed_after_the_gate(face, database, note_task, {"title": "milk"})

    assert result["turnStatus"] == "answered"
    assert TASKS_NOTED == ["milk"], "note_task ran twice"
    (note,) = tool_results(result, "note_task")
    assert json.loads(str(note.content)) == {"noted": "milk"}
    assert result["modifiedTasks"] == [{"action": "created", "task_id": "t-milk", "title": "milk"}]


@tool
def note_tasks(title: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> list[Command[Any]]:
    """Note a task, answering with a list of updates (``ToolNode`` lets a tool return one)."""
    TASKS_NOTED.append(title)
    answer = ToolMessage(content=json.dumps({"noted": title}), tool_call_id=tool_call_id)
    change = {"action": "created", "task_id": f"t-{title}", "title": title}
    return [Command(update={"messages": [answer]}), Command(update={"modifiedTasks": [change]})]


@pytest.mark.parametrize("planned", [False, True])
async def test_a_tool_returning_a_list_of_commands_answers_and_updates_the_state(
    face: Face, database: Database, planned: bool
) -> None:
    """Directly, and while a plan item is in progress (the call is then that item's
    evidence, with the text of its message)."""
    TASKS_NOTED.clear()
    plan = [plan_items({"title": "Note milk"})] if planned else []
    close = [close_row(0, outcome="noted milk")] if planned else []
    model = scripted_turn(
        database,
        *plan,
        act(tool_call("note_tasks", title="milk")),
        *close,
        answer_with("Noted milk."),
    )
    result = await face.run(face.build(model, database, [note_tasks]), "note milk")

    assert result["turnStatus"] == "answered"
    assert TASKS_NOTED == ["milk"]
    (note,) = tool_results(result, "note_tasks")
    assert note.status == "success" and json.loads(str(note.content)) == {"noted": "milk"}
    assert [task["title"] for task in result["modifiedTasks"]] == ["milk"]
    sql = "SELECT toolName || ' ' || result FROM todo_evidence WHERE toolName = 'note_tasks'"
    path = database.url.split("///", 1)[1]
    with closing(sqlite3.connect(path)) as connection:
        evidence = [text for (text,) in connection.execute(sql)]
    assert evidence == (['note_tasks {"noted": "milk"}'] if planned else [])


async def test_a_call_reusing_an_earlier_calls_id_with_other_arguments_is_refused_not_run(
    face: Face, database: Database, recorded_notes: list[str]
) -> None:
    """Two calls of one message under one id would share one record: the second would get the
    first's result (or be lost). The second is refused, says why, and nothing of it runs."""
    first = {"name": "record", "args": {"note": "eggs"}, "id": "dup", "type": "tool_call"}
    second = {**first, "args": {"note": "milk"}}
    model = scripted_turn(database, act(first, second), answer_with("Noted eggs."))
    result = await face.run(face.build(model, database, [record]), "note eggs and milk")

    assert recorded_notes == ["eggs"]
    eggs, milk = tool_results(result, "record")
    assert json.loads(str(eggs.content)) == {"recorded": "eggs"}
    assert milk.status == "error"
    assert json.loads(str(milk.content))["error"] == "VALIDATION_ERROR"
    assert "reuses the id 'dup'" in str(milk.content)
    assert count(database, "SELECT count(*) FROM tool_results") == 1


async def test_a_call_left_unanswered_by_a_stopped_run_shows_its_recorded_result_later(
    face: Face, database: Database, recorded_notes: list[str]
) -> None:
    model = scripted_turn(
        database,
        act(tool_call("record", note="milk"), tool_call("wait_here", note="x")),
        answer_with("You're welcome."),
    )
    agent, _ = await stopped_in_the_gate(face, database, model)

    # A new turn instead of a resume: the stopped run's calls are orphans in its history.
    result = await face.run(agent, "thanks")

    assert result["turnStatus"] == "answered"
    answers = {m.name: m for m in model.prompts[-1] if isinstance(m, ToolMessage)}
    assert json.loads(str(answers["record"].content)) == {"recorded": "milk"}
    assert answers["wait_here"].content == ORPHAN_RESULT
    assert recorded_notes == ["milk"]


# --- evidence and completion checks ------------------------------------------------------------


def recorded_for_real(row: dict[str, Any], evidence: list[dict[str, Any]]) -> str | None:
    """No close until ``record`` ran without error while the row was in progress."""
    if any(call["tool"] == "record" and not call["isError"] for call in evidence):
        return None
    return f"'{row['title']}' was closed but record was never called"


async def test_a_completion_check_reads_the_calls_made_for_the_row(
    face: Face, database: Database
) -> None:
    model = scripted_turn(
        database,
        plan_items({"title": "Note milk"}),
        close_row(outcome="noted"),  # too early: nothing was done
        act(tool_call("record", note="milk")),
        close_row(outcome="noted"),
        answer_with(),
    )
    checks = {"*": recorded_for_real}
    agent = face.build(model, database, [record], completion_checks=checks)
    result = await face.run(agent, "note milk")

    refused, closed = tool_results(result, "complete_todo")
    assert refused.status == "error"
    assert json.loads(str(refused.content))["error"] == "COMPLETION_REFUSED"
    assert json.loads(str(closed.content))["status"] == "completed"
    assert result["turnStatus"] == "answered"
    evidence = "SELECT count(*) FROM todo_evidence WHERE toolName = 'record'"
    assert count(database, evidence) == 1


# --- plan approval -----------------------------------------------------------------------------


def approval_aware_model(messages: list[BaseMessage]) -> AIMessage:
    """Plans two notes and writes the first in the same message; then writes the note in
    progress unless its last write went through, in which case it closes it and writes the
    next; answers when nothing is open."""
    rows = plan_rows(plan_view(messages))
    if not rows:
        items = [{"title": "milk"}, {"title": "bread"}]
        return ai(tool_call("create_todo", items=items), tool_call("record", note="milk"))
    current = next((row for row in rows if row.mark == ">"), None)
    if current is None:
        return AIMessage(content=f"Done: {len(rows)} items.")
    results = []
    for message in reversed(window_of(messages)):
        if not isinstance(message, ToolMessage):
            break
        results.append(message)
    if not any(m.name == "record" and m.status != "error" for m in results):
        return ai(tool_call("record", note=current.title))
    following = next((row for row in rows if row.mark == " "), None)
    close = tool_call("complete_todo", todoId=current.id, outcome=f"noted {current.title}")
    return ai(close, *([tool_call("record", note=following.title)] if following else []))


async def paused(face: Face, database: Database) -> tuple[Any, dict[str, Any]]:
    model = ScriptedChatModel(responder=approval_aware_model)
    agent = face.build(model, database, [record], context=Context(approve_plan=True))
    return agent, await face.run(agent, "note milk and bread")


async def test_a_new_plan_waits_for_approval_in_the_hitl_shape_and_nothing_runs_before(
    face: Face, database: Database, recorded_notes: list[str]
) -> None:
    agent, result = await paused(face, database)

    (pause,) = result["__interrupt__"]
    (action,) = pause.value["action_requests"]
    assert action["name"] == "create_todo"
    assert [item["title"] for item in action["args"]["items"]] == ["milk", "bread"]
    (review,) = pause.value["review_configs"]
    assert review["allowed_decisions"] == ["approve", "edit", "reject"]
    assert recorded_notes == []
    (refused,) = tool_results(result, "record")
    assert '"NOT_RUN"' in str(refused.content)

    done = await face.invoke(agent, Command(resume={"decisions": [{"type": "approve"}]}))

    assert done["turnStatus"] == "answered"
    assert [t["status"] for t in done["todos"]] == ["completed", "completed"]
    assert recorded_notes == ["milk", "bread"]


async def test_a_rejected_plan_is_cancelled_and_nothing_of_it_runs(
    face: Face, database: Database, recorded_notes: list[str]
) -> None:
    agent, _ = await paused(face, database)
    reject = {"decisions": [{"type": "reject", "message": "not today"}]}
    done = await face.invoke(agent, Command(resume=reject))

    assert done["turnStatus"] == "answered"
    assert [t["status"] for t in done["todos"]] == ["cancelled", "cancelled"]
    assert recorded_notes == []


async def test_an_edited_plan_replaces_the_items_and_the_turn_works_the_new_ones(
    face: Face, database: Database, recorded_notes: list[str]
) -> None:
    agent, _ = await paused(face, database)
    edited = {"name": "create_todo", "args": {"items": [{"title": "eggs"}]}}
    edit = {"decisions": [{"type": "edit", "edited_action": edited}]}
    done = await face.invoke(agent, Command(resume=edit))

    assert done["turnStatus"] == "answered"
    assert [t["content"] for t in done["todos"] if t["status"] == "completed"] == ["eggs"]
    assert recorded_notes == ["eggs"]


async def test_after_a_rejection_an_action_without_a_plan_runs(
    face: Face, database: Database, recorded_notes: list[str]
) -> None:
    def plans_then_acts_alone(messages: list[BaseMessage]) -> AIMessage:
        rows = plan_rows(plan_view(messages))
        if not rows and not any(isinstance(m, ToolMessage) for m in messages):
            items = [{"title": "milk"}, {"title": "bread"}]
            return ai(tool_call("create_todo", items=items))
        if not any(isinstance(m, ToolMessage) and m.name == "record" for m in messages):
            return ai(tool_call("record", note="just milk"))
        return AIMessage(content="Noted just milk.")

    model = ScriptedChatModel(responder=plans_then_acts_alone)
    agent = face.build(model, database, [record], context=Context(approve_plan=True))
    await face.run(agent, "note milk and bread")
    reject = {"decisions": [{"type": "reject", "message": "only milk, no plan"}]}
    done = await face.invoke(agent, Command(resume=reject))

    assert done["turnStatus"] == "answered"
    assert recorded_notes == ["just milk"]
    (note,) = tool_results(done, "record")
    assert note.status == "success"


async def test_a_message_while_the_plan_waits_decides_it_yes_approves_else_rejects(
    face: Face, database: Database, recorded_notes: list[str]
) -> None:
    agent, _ = await paused(face, database)
    done = await face.run(agent, "yes")

    assert done["turnStatus"] == "answered"
    assert [t["status"] for t in done["todos"]] == ["completed", "completed"]
    assert recorded_notes == ["milk", "bread"]
    assert not any(m.content == "yes" for m in done["messages"])


async def test_a_message_other_than_yes_rejects_the_plan_with_its_words(
    face: Face, database: Database, recorded_notes: list[str]
) -> None:
    agent, _ = await paused(face, database)
    done = await face.run(agent, "no, not today")

    assert done["turnStatus"] == "answered"
    assert [t["status"] for t in done["todos"]] == ["cancelled", "cancelled"]
    assert all("not today" in t["outcome"] for t in done["todos"])
    assert recorded_notes == []
