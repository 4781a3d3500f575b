"""Exactly-once tool calls: a tools step that runs again (after a cancel, a crash, a resume)
returns the recorded results of the calls that had committed and never acts twice."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from contextlib import closing, suppress
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from agent.context import Context
from agent.graph import build_graph
from agent.prompting.builder import ORPHAN_RESULT, unreported_steps
from agent.turn.call_ledger import RecordBatch, record_result, recorded_results, replayable
from storage import Database
from storage.repositories import ToolCallKey
from tests.fakes import PlanOracle, ScriptedChatModel, ai, plan_rows, plan_view, tool_call

TITLES = ["one", "two", "three"]


def count(database: Database, sql: str) -> int:
    path = database.url.split("///", 1)[1]
    with closing(sqlite3.connect(path)) as connection:
        return int(connection.execute(sql).fetchone()[0])


class Gate:
    """A tool that blocks on its first call (so the test can cancel the run there)."""

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.block = True
        self.calls = 0

    def tool(self) -> Any:
        @tool
        async def wait_here(note: str) -> str:
            """Wait (stands in for a slow tool)."""
            self.calls += 1
            self.entered.set()
            if self.block:
                await asyncio.sleep(3600)
            return json.dumps({"done": note})

        return wait_here


async def cancelled_in_the_gate(
    graph: Any, request: str, config: dict[str, Any], context: Context, gate: Gate
) -> None:
    """Sends ``request`` and cancels the run once a call waits in ``gate``: a tools step stopped
    halfway, the calls before the gate committed, as a user pressing stop leaves it."""
    run = asyncio.create_task(
        graph.ainvoke({"messages": [HumanMessage(content=request)]}, config, context=context)
    )
    await asyncio.wait_for(gate.entered.wait(), 10)
    run.cancel()
    with suppress(asyncio.CancelledError):
        await run


async def test_a_cancelled_tools_step_resumes_without_repeating_committed_calls(
    database: Database,
) -> None:
    gate = Gate()
    oracle = PlanOracle(TITLES, lambda title: tool_call("add_task", title=title))
    first_calls = iter(
        [
            ai(
                tool_call("create_todo", items=[{"title": t} for t in TITLES]),
                tool_call("add_task", title="one"),
                tool_call("wait_here", note="x"),
            )
        ]
    )

    def respond(messages: list[Any]) -> AIMessage:
        return next(first_calls, None) or oracle(messages)

    model = ScriptedChatModel(responder=respond)
    graph = build_graph(model, tools=[gate.tool()], database=database, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "cancelled"}}
    context = Context(user_id="alice")

    await cancelled_in_the_gate(graph, "three things", config, context, gate)
    assert count(database, "SELECT count(*) FROM turn_todos") == 3
    assert count(database, "SELECT count(*) FROM tasks") == 1

    gate.block = False
    oracle.acted.add("one")
    result = await graph.ainvoke(None, config, context=context)

    assert result["turnStatus"] == "answered"
    assert count(database, "SELECT count(*) FROM turn_todos") == 3, "create_todo ran twice"
    assert count(database, "SELECT count(*) FROM tasks WHERE title = 'one'") == 1
    assert [todo["status"] for todo in result["todos"]] == ["completed"] * 3
    # The replayed calls told the model what the first run did, with the same ids.
    replayed = [m for m in result["messages"] if isinstance(m, ToolMessage)][:3]
    assert [m.name for m in replayed] == ["create_todo", "add_task", "wait_here"]
    assert all(m.status == "success" for m in replayed)
    assert [a["action"] for a in result["modifiedTasks"]].count("created") == 3


async def test_an_orphaned_call_that_committed_is_answered_with_its_result(
    database: Database,
) -> None:
    gate = Gate()
    calls = iter(
        [
            ai(tool_call("add_task", title="milk"), tool_call("wait_here", note="x")),
        ]
    )
    model = ScriptedChatModel(
        responder=lambda messages: next(calls, None) or AIMessage(content="Noted.")
    )
    graph = build_graph(model, tools=[gate.tool()], database=database, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "orphans"}}
    await cancelled_in_the_gate(graph, "add milk", config, Context(), gate)

    # A new turn on the thread instead of a resume: the old calls are orphans in its history.
    await graph.ainvoke({"messages": [HumanMessage(content="thanks")]}, config, context=Context())
    prompt = model.prompts[-1]
    answers = {m.name: m for m in prompt if isinstance(m, ToolMessage)}
    assert json.loads(str(answers["add_task"].content))["title"] == "milk"
    assert answers["add_task"].status == "success"
    assert answers["wait_here"].content == ORPHAN_RESULT
    assert count(database, "SELECT count(*) FROM tasks") == 1


async def test_a_server_that_reuses_call_ids_in_a_new_message_still_acts(
    database: Database,
) -> None:
    """Some OpenAI-compatible servers number tool calls afresh in every response."""
    same_id = {"name": "add_task", "id": "call_0", "type": "tool_call"}
    model = ScriptedChatModel(
        script=[
            AIMessage(content="", tool_calls=[{**same_id, "args": {"title": "milk"}}]),
            AIMessage(content="", tool_calls=[{**same_id, "args": {"title": "eggs"}}]),
            AIMessage(content="Both added."),
        ]
    )
    graph = build_graph(model, database=database)
    result = await graph.ainvoke({"messages": [HumanMessage(content="milk, then eggs")]})
    assert result["turnStatus"] == "answered"
    assert count(database, "SELECT count(*) FROM tasks") == 2


async def test_a_server_that_reuses_call_ids_sees_each_result_after_its_plan_and_acts_once(
    database: Database,
) -> None:
    """With every call numbered "call_0", the plan call's id is the action's too: the model
    must still be sent the action's result (not see it unanswered and call it again)."""

    def respond(messages: list[Any]) -> AIMessage:
        view = plan_view(messages)
        same_id = {"id": "call_0", "type": "tool_call"}
        if not view:
            items = {"items": [{"title": "add milk"}]}
            return AIMessage(
                content="", tool_calls=[{**same_id, "name": "create_todo", "args": items}]
            )
        rows = [row for row in plan_rows(view) if row.mark == ">"]
        acted = any(isinstance(m, ToolMessage) and m.name == "add_task" for m in messages)
        if rows and not acted:
            args = {"title": "milk"}
            return AIMessage(content="", tool_calls=[{**same_id, "name": "add_task", "args": args}])
        if rows:
            args = {"todoId": rows[0].id, "outcome": "added milk"}
            return AIMessage(
                content="", tool_calls=[{**same_id, "name": "complete_todo", "args": args}]
            )
        return AIMessage(content="Milk is on your list.")

    model = ScriptedChatModel(responder=respond)
    graph = build_graph(model, database=database)
    result = await graph.ainvoke({"messages": [HumanMessage(content="add milk")]})
    assert result["turnStatus"] == "answered"
    assert count(database, "SELECT count(*) FROM tasks") == 1
    assert len(model.prompts) == 4  # plan, act, close, answer: no call made twice


def test_a_failed_plan_call_stays_in_the_prompt_when_a_later_call_reuses_its_id() -> None:
    """Only the results right after a message are its calls': a later successful call under
    the same id does not make a failed ``create_todo`` look done (and drop its error)."""
    same_id = {"args": {}, "id": "call_0", "type": "tool_call"}
    turn = [
        AIMessage(content="", tool_calls=[{**same_id, "name": "create_todo"}]),
        ToolMessage("bad items", tool_call_id="call_0", status="error", name="create_todo"),
        AIMessage(content="", tool_calls=[{**same_id, "name": "list_tasks"}]),
        ToolMessage("[]", tool_call_id="call_0", name="list_tasks"),
    ]

    assert unreported_steps(turn) == turn


async def test_a_call_id_repeated_within_one_message_acts_once(database: Database) -> None:
    """The calls of a message share one ledger read made before any of them ran; a call that
    repeats an earlier call's id must still not act again."""
    same_id = {"name": "add_task", "id": "call_0", "type": "tool_call"}
    model = ScriptedChatModel(
        script=[
            AIMessage(
                content="",
                tool_calls=[
                    {**same_id, "args": {"title": "milk"}},
                    {**same_id, "args": {"title": "milk"}},
                ],
            ),
            AIMessage(content="Added."),
        ]
    )
    graph = build_graph(model, database=database)
    result = await graph.ainvoke({"messages": [HumanMessage(content="add milk")]})
    assert result["turnStatus"] == "answered"
    assert count(database, "SELECT count(*) FROM tasks") == 1
    answers = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    assert [m.status for m in answers] == ["success", "success"]
    assert answers[0].content == answers[1].content


async def test_free_calls_finishing_together_are_each_recorded(database: Database) -> None:
    """The free calls of one message record their results in shared statements; every one of
    them is still recorded, so a tools step run again replays each instead of acting."""
    ran: list[str] = []

    @tool
    async def note(text: str) -> str:
        """Note something down (a free call: it keeps no record itself)."""
        ran.append(text)
        await asyncio.sleep(0)
        return json.dumps({"noted": text})

    texts = [f"n{index}" for index in range(6)]
    model = ScriptedChatModel(
        script=[ai(*(tool_call("note", text=text) for text in texts)), AIMessage(content="Ok.")]
    )
    graph = build_graph(model, tools=[note], database=database)
    result = await graph.ainvoke({"messages": [HumanMessage(content="note six things")]})
    assert result["turnStatus"] == "answered"
    assert sorted(ran) == texts
    assert count(database, "SELECT count(*) FROM tool_results WHERE toolName = 'note'") == 6


async def test_a_batch_of_records_with_one_already_recorded_keeps_the_others(
    database: Database,
) -> None:
    """A record another run of the same call wrote first fails the shared statement on the
    primary key; the other records of the batch are written all the same."""
    keys = [ToolCallKey("c", "t", f"m/call_{name}", "note") for name in "abc"]
    await record_result(RecordBatch(database), keys[1], "from the other run")
    batch = RecordBatch(database)
    # The first record is written alone; the two that wait behind it share a statement.
    await asyncio.gather(
        *(record_result(batch, key, f"this run {key.tool_call_id}") for key in keys)
    )
    recorded = await recorded_results(database, "c", [key.tool_call_id for key in keys])
    assert [recorded[key.tool_call_id].content for key in keys] == [
        "this run m/call_a",
        "from the other run",
        "this run m/call_c",
    ]


async def test_every_shape_of_result_replays_as_it_was_returned_whichever_way_it_was_recorded(
    database: Database,
) -> None:
    """``record_result`` is the one way a result is recorded: in the change's transaction or
    after the call, a text, a tool message or a ``Command`` updating any state keys with JSON
    values replays as the tool returned it."""
    await database.create_schema()
    modified = [{"action": "created", "task_id": "t-1", "title": "Milk"}]
    outputs: dict[str, Any] = {
        "text": "plain text",
        "message": ToolMessage(content="a message", tool_call_id="x"),
        "command": Command(
            update={
                "messages": [ToolMessage(content="with tasks", tool_call_id="x")],
                "modifiedTasks": modified,
                "notes": {"kept": ["a", 1, None]},
            }
        ),
    }
    keys = {
        (shape, where): ToolCallKey("c", "t", f"m/{shape}-{where}", "note")
        for shape in outputs
        for where in ("with the change", "after the call")
    }
    for (shape, where), key in keys.items():
        if where == "with the change":
            async with database.session() as session:
                await record_result(session, key, outputs[shape])
        else:
            await record_result(RecordBatch(database), key, outputs[shape])
    await record_result(RecordBatch(database), ToolCallKey("", "t", "m/none", "note"), "x")
    async with database.session() as session:
        await record_result(session, ToolCallKey("c", "t", "", "note"), "nothing to replay")

    recorded = await recorded_results(database, "c", [key.tool_call_id for key in keys.values()])
    for (shape, _), key in keys.items():
        replayed = recorded[key.tool_call_id].as_tool_result("call")
        if shape == "command":
            assert isinstance(replayed, Command) and isinstance(replayed.update, dict)
            assert replayed.update["modifiedTasks"] == modified
            assert replayed.update["notes"] == {"kept": ["a", 1, None]}
            assert replayed.update["messages"][0].content == "with tasks"
        else:
            assert isinstance(replayed, ToolMessage)
            assert replayed.content == {"text": "plain text", "message": "a message"}[shape]
    assert count(database, "SELECT count(*) FROM tool_results") == len(keys)


def test_only_a_command_that_replays_whole_is_recorded() -> None:
    """A ``Command`` that routes, resumes, carries other messages or values JSON cannot hold
    is not recorded (README, Limits): half of it replayed would say less than the call did."""
    said = ToolMessage(content="ok", tool_call_id="x")
    assert replayable(Command(update={"messages": [said], "notes": ["a"]}))
    assert replayable("text") and replayable(said)
    assert not replayable(Command(update={"messages": [said]}, goto="execute"))
    assert not replayable(Command(update={"messages": [said, AIMessage(content="and")]}))
    assert not replayable(Command(update={"messages": [said], "when": object()}))
    assert not replayable(Command(update={"notes": ["no message"]}))
    assert not replayable([Command(update={"messages": [said]})])  # type: ignore[arg-type]


def test_only_the_call_ledger_writes_tool_results() -> None:
    """No second way to record a result grows elsewhere: the table's writers are called only
    from ``agent.turn.call_ledger``."""
    root = Path(__file__).resolve().parents[3]
    assert (root / "agent/turn/call_ledger.py").exists()  # the real tree is read
    writers = ("ToolResultRepository", "record_alone")
    allowed = {
        root / "agent/turn/call_ledger.py",
        root / "storage/repositories/tool_results.py",
        root / "bench/write_bound.py",  # names the writers to make them no-ops, writes nothing
    }
    users = [
        str(path.relative_to(root))
        for folder in ("agent", "storage", "bench")
        for path in sorted((root / folder).rglob("*.py"))
        if path not in allowed
        and path.name != "__init__.py"
        and any(writer in path.read_text(encoding="utf-8") for writer in writers)
    ]
    assert users == []
