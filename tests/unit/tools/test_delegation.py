"""Delegation to workers: the supervisor hands an item over, awaits the worker, and drains on."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from agent.context import Context
from agent.graph import build_graph
from agent.tools.delegate import build_delegate_tool
from agent.tools.task_worker import build_task_worker
from agent.tools.todos import TODO_TOOL_NAMES, build_todo_tools
from agent.turn.plan_rows import PlanLimits, TodoItemInput, TurnPlan
from agent.workers import (
    Worker,
    WorkerRegistry,
    build_worker,
    worker_tool_names,
)
from storage import Database
from storage.repositories import ToolAuditRepository, TurnScope
from storage.repositories.tasks import TaskRepository
from tests.delegating import DONE, DelegatingSupervisor, record, worker_model
from tests.fakes import ScriptedChatModel, ai, plan_rows, plan_view, tool_call
from tests.tool_harness import run_tool_calls

TASK_TOOLS = {"add_task", "list_tasks", "complete_task", "update_task", "delete_task"}


@pytest.fixture(autouse=True)
def _clear_done() -> None:
    DONE.clear()


def rows_in_db(database: Database) -> list[tuple[str, str, str | None, str | None]]:
    path = database.url.split("///", 1)[1]
    with closing(sqlite3.connect(path)) as connection:
        return connection.execute(
            "SELECT title, status, outcome, agentType FROM turn_todos ORDER BY priority"
        ).fetchall()


def supervisor_graph(
    supervisor: ScriptedChatModel, database: Database, workers: list[Worker] | None
) -> Any:
    return build_graph(
        supervisor, tools=[record], database=database, include_default_tools=False, workers=workers
    )


async def run(graph: Any, text: str = "note a, add groceries, note c") -> Any:
    return await graph.ainvoke(
        {"messages": [HumanMessage(content=text, id="turn-1")]}, context=Context(user_id="alice")
    )


# --- the whole turn ---------------------------------------------------------------------------


async def test_delegated_item_is_awaited_and_the_drain_loop_resumes(database: Database) -> None:
    supervisor = ScriptedChatModel(responder=DelegatingSupervisor())
    worker = worker_model()
    graph = supervisor_graph(supervisor, database, [build_task_worker(worker, database)])

    result = await run(graph)

    assert result["turnStatus"] == "answered"
    assert result["messages"][-1].content == "All three items are done."
    assert DONE == ["a", "c"]  # items 1 and 3 by the supervisor, after the delegation
    assert supervisor.calls == 5 and worker.calls == 2
    rows = rows_in_db(database)
    assert [(title, status) for title, status, _, _ in rows] == [
        ("Note a", "completed"),
        ("Add the groceries task", "completed"),
        ("Note c", "completed"),
    ]
    assert rows[1][2] == "worker: Added 'buy groceries'." and rows[1][3] == "tasks"

    delegated = next(
        m for m in result["messages"] if isinstance(m, ToolMessage) and m.name == "delegate"
    )
    assert json.loads(str(delegated.content)) == {
        "todoId": plan_rows(supervisor.plan_view(2))[1].id,
        "agentType": "tasks",
        "result": "Added 'buy groceries'.",
        "toolCalls": 1,
        "llmCalls": 2,
    }
    assert result["llmCalls"] == 5 + 2  # the worker's calls are the turn's
    async with database.session() as session:
        alice = await TaskRepository(session, "alice").find()
        bob = await TaskRepository(session, "bob").find()
        audit = await ToolAuditRepository(session).for_turn(result["conversationId"], "turn-1")
    assert [task.title for task in alice] == ["buy groceries"] and bob == []
    assert [(entry.tool_name, entry.user_id) for entry in audit] == [("add_task", "alice")]
    assert [(m["action"], m["title"]) for m in result["modifiedTasks"]] == [
        ("created", "buy groceries")
    ]


async def test_worker_sees_the_item_and_the_request_but_no_plan_tools(database: Database) -> None:
    supervisor = ScriptedChatModel(responder=DelegatingSupervisor())
    worker = worker_model()
    await run(supervisor_graph(supervisor, database, [build_task_worker(worker, database)]))

    assert set(worker.bound_tool_names) == TASK_TOOLS
    assert not set(worker.bound_tool_names) & (TODO_TOOL_NAMES | {"delegate"})
    hand_over = str(worker.prompts[0][-1].content)
    assert "Add the groceries task" in hand_over and "Task title: buy groceries" in hand_over
    assert "the task exists" in hand_over and "note a, add groceries, note c" in hand_over
    assert '"tasks" worker' in worker.system_prompt(0)
    assert worker.plan_view(0) == ""


async def test_a_failing_worker_is_an_error_result_and_the_turn_goes_on(
    database: Database,
) -> None:
    supervisor = ScriptedChatModel(responder=DelegatingSupervisor())
    broken = ScriptedChatModel(script=[RuntimeError("model server down")])
    graph = supervisor_graph(supervisor, database, [build_task_worker(broken, database)])

    result = await run(graph)

    failed = next(
        m for m in result["messages"] if isinstance(m, ToolMessage) and m.name == "delegate"
    )
    assert failed.status == "error"
    envelope = json.loads(str(failed.content))
    assert envelope["error"] == "WORKER_ERROR" and "model server down" in envelope["message"]
    # The item the worker failed at was not done: the turn says so, it did not answer it all.
    assert result["turnStatus"] == "incomplete"
    assert [status for _, status, _, _ in rows_in_db(database)] == [
        "completed",
        "cancelled",
        "completed",
    ]
    assert "Not done" in str(result["messages"][-1].content)
    assert DONE == ["a", "c"]


async def test_delegation_events_appear_in_the_custom_stream(database: Database) -> None:
    supervisor = ScriptedChatModel(responder=DelegatingSupervisor())
    graph = supervisor_graph(supervisor, database, [build_task_worker(worker_model(), database)])
    events = [
        chunk
        async for chunk in graph.astream(
            {"messages": [HumanMessage(content="three things", id="turn-1")]},
            context=Context(user_id="alice"),
            stream_mode="custom",
        )
    ]
    kinds = [event["event"] for event in events]
    assert kinds.index("delegated") < kinds.index("returned")
    returned = next(event for event in events if event["event"] == "returned")
    assert returned["title"] == "Add the groceries task"
    assert returned["agentType"] == "tasks" and returned["error"] is None
    assert returned["status"] == "in_progress"  # closing it is the supervisor's next step
    assert set(returned) >= {"type", "id", "title", "status", "outcome", "turnId"}


# --- prompt and wiring ------------------------------------------------------------------------


def plan_one_close_it_answer(messages: list[BaseMessage]) -> AIMessage:
    """Plan one item, close it, answer: the calls after the plan bind the tools to work it."""
    rows = plan_rows(plan_view(messages))
    if not rows:
        return ai(tool_call("create_todo", items=[{"title": "note a"}]))
    current = next((row for row in rows if row.mark == ">"), None)
    if current is not None:
        return ai(tool_call("complete_todo", todoId=current.id, outcome="noted"))
    return AIMessage(content="hi")


async def test_delegation_section_only_when_workers_are_registered(database: Database) -> None:
    with_workers = ScriptedChatModel(responder=plan_one_close_it_answer)
    await run(
        supervisor_graph(with_workers, database, [build_task_worker(worker_model(), database)])
    )
    prompt = with_workers.system_prompt(0)
    assert "delegate" in with_workers.bound_tool_names
    assert "## Delegation to workers" in prompt and "- `tasks`: Manages" in prompt
    assert "`agentType` is a label" not in prompt

    without = ScriptedChatModel(responder=plan_one_close_it_answer)
    await run(supervisor_graph(without, database, None))
    assert "delegate" not in without.bound_tool_names
    assert "## Delegation to workers" not in without.system_prompt(0)
    assert "`agentType` is a label" in without.system_prompt(0)


def test_registry_refuses_duplicates_and_workers_refuse_plan_tools(database: Database) -> None:
    worker = build_task_worker(worker_model(), database)
    assert worker_tool_names(worker.graph) == TASK_TOOLS
    with pytest.raises(ValueError, match="unique"):
        WorkerRegistry([worker, build_task_worker(worker_model(), database)])
    with pytest.raises(ValueError, match="plan tools"):
        build_worker(
            "planner",
            "Plans things.",
            model=worker_model(),
            tools=build_todo_tools(database),
            prompt_sections=("worker_tasks",),
        )
    with pytest.raises(ValueError, match="one-line"):
        Worker(name="x", description="two\nlines", graph=worker.graph)


# --- the tool's errors ------------------------------------------------------------------------


async def plan(database: Database, turn_id: str, *items: TodoItemInput) -> list[str]:
    change = await TurnPlan(database, TurnScope("conv-1", turn_id)).add_items(
        list(items), PlanLimits()
    )
    return [row.id for row in change.planned]


async def delegate(database: Database, worker: Worker, todo_id: str) -> dict[str, Any]:
    tool_ = build_delegate_tool(WorkerRegistry([worker]), database)
    messages, _ = await run_tool_calls(
        [tool_], [("delegate", {"todoId": todo_id})], context=Context(user_id="alice")
    )
    assert messages[0].status == "error"
    return dict(json.loads(str(messages[0].content)))


@pytest.mark.parametrize("agent_type", ["researcher", None])
async def test_delegate_refuses_an_item_no_worker_serves(
    database: Database, agent_type: str | None
) -> None:
    (todo_id,) = await plan(database, "turn-1", TodoItemInput(title="x", agentType=agent_type))
    envelope = await delegate(database, build_task_worker(worker_model(), database), todo_id)
    assert envelope["error"] == "VALIDATION_ERROR"
    assert "'tasks'" in envelope["message"]


async def test_delegate_refuses_closed_rows_other_turns_and_bad_ids(database: Database) -> None:
    worker = build_task_worker(worker_model(), database)
    (closed,) = await plan(database, "turn-1", TodoItemInput(title="x", agentType="tasks"))
    await TurnPlan(database, TurnScope("conv-1", "turn-1")).close(closed, "done", "completed")
    (elsewhere,) = await plan(database, "turn-2", TodoItemInput(title="y", agentType="tasks"))

    envelope = await delegate(database, worker, closed)
    assert envelope["error"] == "VALIDATION_ERROR" and "already completed" in envelope["message"]
    assert (await delegate(database, worker, elsewhere))["error"] == "NOT_FOUND"
    assert (await delegate(database, worker, "not-an-id"))["error"] == "INVALID_ID"


async def test_a_worker_past_its_step_limit_is_a_worker_error(database: Database) -> None:
    looping = ScriptedChatModel(responder=lambda _: ai(tool_call("list_tasks")))
    worker = build_task_worker(looping, database, recursion_limit=4)
    (todo_id,) = await plan(database, "turn-1", TodoItemInput(title="x", agentType="tasks"))
    envelope = await delegate(database, worker, todo_id)
    assert envelope["error"] == "WORKER_ERROR" and "limit of 4 steps" in envelope["message"]
    rows, _ = await TurnPlan(database, TurnScope("conv-1", "turn-1")).rows()
    assert rows[0].status == "in_progress"


async def test_delegation_under_a_checkpointer_runs_the_worker_afresh_each_turn(
    database: Database,
) -> None:
    """The worker is compiled without a checkpointer, so a checkpointed supervisor (the dev
    server's case) neither persists nor resumes the worker's own messages between turns."""
    from langgraph.checkpoint.memory import InMemorySaver

    worker = ScriptedChatModel(
        responder=lambda messages: (
            AIMessage(content=f"saw {len(messages)} messages")
            if isinstance(messages[-1], ToolMessage)
            else ai(tool_call("list_tasks"))
        )
    )
    graph = build_graph(
        ScriptedChatModel(responder=DelegatingSupervisor()),
        tools=[record],
        database=database,
        include_default_tools=False,
        workers=[build_task_worker(worker, database)],
        checkpointer=InMemorySaver(),
    )
    config: Any = {"configurable": {"thread_id": "t1"}}
    for turn in ("turn-1", "turn-2"):
        result = await graph.ainvoke(
            {"messages": [HumanMessage(content="three things", id=turn)]},
            config=config,
            context=Context(user_id="alice"),
        )
        assert result["turnStatus"] == "answered"
    # system + hand-over + call + result, in both turns: nothing carried over
    assert [len(prompt) for prompt in worker.prompts] == [2, 4, 2, 4]


def test_turnplan_run_prints_delegation_events() -> None:
    from agent.app.run_turn import _format_event

    line = _format_event(
        {
            "event": "returned",
            "title": "Add x",
            "outcome": None,
            "agentType": "tasks",
            "error": "boom",
        }
    )
    assert line == "  ← returned  Add x [tasks] — failed: boom"


# --- the worker spends the turn's budget ------------------------------------------------------


def plan_one_delegated_item(messages: list[BaseMessage]) -> AIMessage:
    """Plan one delegated item, delegate it, and say so once the worker is back."""
    rows = plan_rows(plan_view(messages))
    if not rows:
        item = {"title": "Tidy the tasks", "agentType": "tasks"}
        return ai(tool_call("create_todo", items=[item]))
    current = next(row for row in rows if row.mark == ">")
    return ai(tool_call("delegate", todoId=current.id))


async def test_a_worker_is_stopped_by_the_turns_call_cap(database: Database) -> None:
    supervisor = ScriptedChatModel(responder=plan_one_delegated_item)
    # A worker that never answers: without the turn's cap it would run to its own 25 steps.
    endless = ScriptedChatModel(responder=lambda messages: ai(tool_call("list_tasks")))
    graph = supervisor_graph(supervisor, database, [build_task_worker(endless, database)])

    result = await graph.ainvoke(
        {"messages": [HumanMessage(content="tidy my tasks", id="turn-1")]},
        context=Context(user_id="alice", base_iterations=3, max_iterations=4),
    )

    # Plan (1), delegate (2): the worker gets the 2 calls left under the cap of 4, no more.
    assert supervisor.calls == 2 and endless.calls == 2
    assert result["llmCalls"] == 4
    assert result["turnStatus"] == "budget_exhausted"
    stopped = next(
        m for m in result["messages"] if isinstance(m, ToolMessage) and m.name == "delegate"
    )
    envelope = json.loads(str(stopped.content))
    assert stopped.status == "error" and envelope["error"] == "BUDGET_EXHAUSTED"
    assert envelope["workerLlmCalls"] == 2 and "not done" in envelope["message"]
    assert [(title, status) for title, status, _, _ in rows_in_db(database)] == [
        ("Tidy the tasks", "in_progress")
    ]
    assert "Tidy the tasks" in str(result["messages"][-1].content)


# --- the worker spends the turn's tokens (issue 30 §4) -----------------------------------------


def costs(message: AIMessage, prompt: int, completion: int) -> AIMessage:
    """``message`` as a server that reports ``prompt``/``completion`` tokens returns it."""
    message.usage_metadata = {
        "input_tokens": prompt,
        "output_tokens": completion,
        "total_tokens": prompt + completion,
    }
    return message


def delegates_then_closes() -> ScriptedChatModel:
    """Plans one delegated item, delegates it, closes it, answers; 100 + 10 tokens a call."""
    script = [
        ai(tool_call("create_todo", items=[{"title": "Tidy the tasks", "agentType": "tasks"}])),
    ]

    def respond(messages: list[BaseMessage]) -> AIMessage:
        rows = plan_rows(plan_view(messages))
        if not rows:
            return costs(script[0], 100, 10)
        current = next((row for row in rows if row.mark == ">"), None)
        if current is None:
            return costs(AIMessage(content="Tidied."), 100, 10)
        if not any(isinstance(m, ToolMessage) and m.name == "delegate" for m in messages):
            return costs(ai(tool_call("delegate", todoId=current.id)), 100, 10)
        return costs(ai(tool_call("complete_todo", todoId=current.id, outcome="tidied")), 100, 10)

    return ScriptedChatModel(responder=respond)


async def test_a_workers_tokens_count_in_the_turn_and_the_delegated_row(
    database: Database,
) -> None:
    supervisor = delegates_then_closes()
    worker = ScriptedChatModel(
        script=[
            costs(ai(tool_call("add_task", title="tidy")), 1000, 50),
            costs(AIMessage(content="Tidied the tasks."), 1000, 50),
        ]
    )
    graph = supervisor_graph(supervisor, database, [build_task_worker(worker, database)])

    result = await run(graph, "tidy my tasks")

    assert result["turnStatus"] == "answered" and worker.calls == 2
    # The supervisor's 4 calls (100 + 10 each) and the worker's 2 (1000 + 50 each).
    assert supervisor.calls == 4
    assert (result["promptTokens"], result["completionTokens"]) == (2400, 140)
    row = result["todos"][0]
    # The delegate and complete_todo calls were made with the row in progress, and the worker's.
    assert row["usage"] == {"llmCalls": 4, "promptTokens": 2200, "completionTokens": 120}
    assert result["usageEstimated"] is False


async def test_a_worker_is_stopped_by_the_turns_token_budget(database: Database) -> None:
    supervisor = ScriptedChatModel(
        responder=lambda messages: costs(plan_one_delegated_item(messages), 100, 10)
    )
    endless = ScriptedChatModel(
        responder=lambda messages: costs(ai(tool_call("list_tasks")), 1000, 50)
    )
    graph = supervisor_graph(supervisor, database, [build_task_worker(endless, database)])

    result = await graph.ainvoke(
        {"messages": [HumanMessage(content="tidy my tasks", id="turn-1")]},
        context=Context(user_id="alice", max_turn_tokens=1500),
    )

    # Plan and delegate spent 220 tokens: the worker may spend 1280. After its second call
    # (2100 tokens) it has passed that, so its third is refused before it is sent.
    assert supervisor.calls == 2 and endless.calls == 2
    assert result["promptTokens"] + result["completionTokens"] == 220 + 2100
    assert result["turnStatus"] == "budget_exhausted"
    stopped = next(
        m for m in result["messages"] if isinstance(m, ToolMessage) and m.name == "delegate"
    )
    envelope = json.loads(str(stopped.content))
    assert stopped.status == "error" and envelope["error"] == "BUDGET_EXHAUSTED"
    assert "token budget" in envelope["message"] and envelope["workerTokens"] == 2100
    assert "token" in str(result["messages"][-1].content)
    assert [(title, status) for title, status, _, _ in rows_in_db(database)] == [
        ("Tidy the tasks", "in_progress")
    ]


async def test_a_worker_whose_server_reports_no_usage_is_estimated(database: Database) -> None:
    supervisor = delegates_then_closes()
    graph = supervisor_graph(supervisor, database, [build_task_worker(worker_model(), database)])

    result = await run(graph, "tidy my tasks")

    # The worker's two calls reported nothing: their tokens are estimated from characters
    # (the worker's prompts alone are hundreds of characters) and the turn says so.
    row = result["todos"][0]["usage"]
    assert row["llmCalls"] == 4 and row["promptTokens"] > 200 + 50 and row["completionTokens"] > 20
    assert result["usageEstimated"] is True


async def test_a_worker_tool_that_raises_is_an_error_result_for_the_workers_model(
    database: Database,
) -> None:
    from langchain_core.tools import tool

    @tool
    def add_task(title: str) -> str:
        """Add a task (its store is on fire in this test)."""
        raise OSError("task store unreachable")

    worker_llm = ScriptedChatModel(
        script=[
            ai(tool_call("add_task", title="buy groceries")),
            AIMessage(content="Not done: the task store is unreachable."),
        ]
    )
    worker = build_worker(
        "tasks",
        "Adds tasks.",
        model=worker_llm,
        tools=[add_task],
        prompt_sections=("worker_tasks",),
    )
    graph = supervisor_graph(
        ScriptedChatModel(responder=DelegatingSupervisor()), database, [worker]
    )

    result = await run(graph)

    seen = [m for m in worker_llm.prompts[1] if isinstance(m, ToolMessage)]
    assert [(m.status, json.loads(str(m.content))["error"]) for m in seen] == [
        ("error", "TOOL_ERROR")
    ]
    assert "OSError: task store unreachable" in str(seen[0].content)
    delegated = next(
        m for m in result["messages"] if isinstance(m, ToolMessage) and m.name == "delegate"
    )
    assert delegated.status != "error"  # the worker answered; it did not fail
    assert "the task store is unreachable" in str(delegated.content)
