"""Stages and concurrent calls: items that share an ``order`` are worked side by side, items with
distinct orders one at a time, and the free calls of one message overlap while the todo calls keep
the order the model wrote them in."""

from __future__ import annotations

import asyncio
import gc
import json
import sqlite3
import weakref
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

from agent.calls import ordering as ordered_tools
from agent.calls.ordering import IN_ORDER_METADATA, build_tools_node
from agent.context import Context
from agent.graph import build_graph
from agent.tools.conversation_tasks import build_conversation_task_tools
from agent.tools.personal_tasks import build_task_tools
from agent.tools.todos import build_todo_tools
from agent.workers import Worker
from agent.workers.worker import WorkerState
from storage import Database
from tests.fakes import PlanRow, ScriptedChatModel, ai, plan_rows, plan_view, tool_call, window_of
from tests.tool_harness import run_tool_calls


def statuses(database: Database) -> list[str]:
    path = database.url.split("///", 1)[1]
    with closing(sqlite3.connect(path)) as connection:
        rows = connection.execute("SELECT status FROM turn_todos ORDER BY priority, createdAt")
        return [status for (status,) in rows]


def plan_seen(messages: list[BaseMessage]) -> list[PlanRow]:
    """The plan as the model is shown it."""
    return plan_rows(plan_view(messages))


@dataclass
class Overlap:
    """Counts the calls running at once, and the largest such count."""

    running: int = 0
    most: int = 0

    async def hold(self, seconds: float) -> None:
        self.running += 1
        self.most = max(self.most, self.running)
        try:
            await asyncio.sleep(seconds)
        finally:
            self.running -= 1


@dataclass
class SlowWork:
    """A domain tool that takes a while and notes how many plan rows were in progress while it
    ran (read from the database, as an observer would)."""

    database: Database
    seconds: float = 0.2
    overlap: Overlap = field(default_factory=Overlap)
    in_progress_seen: list[int] = field(default_factory=list)
    done: list[str] = field(default_factory=list)

    def tool(self) -> BaseTool:
        async def work(item: str) -> str:
            self.in_progress_seen.append(statuses(self.database).count("in_progress"))
            await self.overlap.hold(self.seconds)
            self.done.append(item)
            return json.dumps({"done": item})

        return StructuredTool.from_function(
            coroutine=work, name="work", description="Do the work of one item."
        )


@dataclass
class StageOracle:
    """The stage path: plan every item with order 1 and do them all in the same message; close
    every row in progress in one message; answer. Reads only the plan view it is sent."""

    titles: list[str]

    def __call__(self, messages: list[BaseMessage]) -> AIMessage:
        rows = plan_seen(messages)
        if not rows:
            items = [{"title": title, "order": 1} for title in self.titles]
            return ai(
                tool_call("create_todo", items=items),
                *(tool_call("work", item=title) for title in self.titles),
            )
        working = [row for row in rows if row.mark == ">"]
        if not working:
            return AIMessage(content=f"Done: {len(rows)} items.")
        return ai(
            *(
                tool_call("complete_todo", todoId=row.id, outcome=f"did {row.title}")
                for row in working
            )
        )


async def run_turn(
    model: ScriptedChatModel, database: Database, tools: list[BaseTool], **graph_kwargs: Any
) -> dict[str, Any]:
    graph = build_graph(
        model, tools=tools, database=database, include_default_tools=False, **graph_kwargs
    )
    result: dict[str, Any] = await graph.ainvoke(
        {"messages": [HumanMessage(content="Do the work for each item.")]}, context=Context()
    )
    return result


# --- the graph ----------------------------------------------------------------------------------


async def test_a_twenty_item_stage_is_three_calls_with_every_row_in_progress_and_calls_overlapping(
    database: Database,
) -> None:
    titles = [f"item {n:02d}" for n in range(1, 21)]
    work = SlowWork(database)
    model = ScriptedChatModel(responder=StageOracle(titles))

    result = await run_turn(model, database, [work.tool()])

    assert model.calls == 3
    assert result["turnStatus"] == "answered"
    assert sorted(work.done) == titles
    assert work.in_progress_seen == [20] * 20
    assert work.overlap.most == Context().max_parallel_tools
    assert statuses(database) == ["completed"] * 20


async def test_distinct_orders_still_run_one_at_a_time(database: Database) -> None:
    titles = ["first", "second", "third"]
    work = SlowWork(database, seconds=0.01)

    def sequential(messages: list[BaseMessage]) -> AIMessage:
        rows = plan_seen(messages)
        if not rows:
            items = [{"title": title, "order": n} for n, title in enumerate(titles, 1)]
            return ai(tool_call("create_todo", items=items), tool_call("work", item=titles[0]))
        current = [row for row in rows if row.mark == ">"]
        if not current:
            return AIMessage(content="All done.")
        (row,) = current  # one row in progress, never more
        calls = [tool_call("complete_todo", todoId=row.id, outcome=f"did {row.title}")]
        following = next((r for r in rows if r.mark == " "), None)
        if following is not None:
            calls.append(tool_call("work", item=following.title))
        return ai(*calls)

    model = ScriptedChatModel(responder=sequential)
    await run_turn(model, database, [work.tool()])

    assert model.calls == len(titles) + 2
    assert work.done == titles
    assert work.in_progress_seen == [1, 1, 1]


def slow_worker(overlap: Overlap) -> Worker:
    async def do(state: WorkerState) -> dict[str, Any]:
        await overlap.hold(0.2)
        return {"messages": [AIMessage(content="worked it")]}

    builder = StateGraph(WorkerState)
    builder.add_node("do", do)
    builder.add_edge(START, "do")
    builder.add_edge("do", END)
    return Worker("slow", "Does one slow item.", builder.compile(checkpointer=False))


async def test_delegations_of_one_stage_run_at_once(database: Database) -> None:
    overlap = Overlap()

    def delegating(messages: list[BaseMessage]) -> AIMessage:
        rows = plan_seen(messages)
        if not rows:
            items = [{"title": f"part {n}", "order": 1, "agentType": "slow"} for n in (1, 2, 3)]
            return ai(tool_call("create_todo", items=items))
        working = [row for row in rows if row.mark == ">"]
        if not working:
            return AIMessage(content="All three parts are done.")
        last = window_of(messages)[-1]
        if isinstance(last, ToolMessage) and last.name == "delegate":
            return ai(*(tool_call("complete_todo", todoId=r.id, outcome="worked") for r in working))
        return ai(*(tool_call("delegate", todoId=row.id) for row in working))

    model = ScriptedChatModel(responder=delegating)
    result = await run_turn(model, database, [], workers=[slow_worker(overlap)])

    assert result["turnStatus"] == "answered"
    assert overlap.most == 3
    assert statuses(database) == ["completed"] * 3


# --- the todo tools -----------------------------------------------------------------------------


@pytest.fixture
async def todo_tools(database: Database) -> list[BaseTool]:
    await database.create_schema()
    return build_todo_tools(database)


async def results(
    tools: list[BaseTool], *calls: tuple[str, dict[str, Any]]
) -> list[dict[str, Any]]:
    messages, _ = await run_tool_calls(tools, list(calls))
    return [json.loads(str(message.content)) for message in messages]


async def test_a_stage_starts_whole_and_the_next_starts_when_it_closes(
    todo_tools: list[BaseTool], database: Database
) -> None:
    items = [
        {"title": "a", "order": 1},
        {"title": "b", "order": 1},
        {"title": "c", "order": 2},
        {"title": "d", "order": 2},
        {"title": "e", "order": 3},
    ]
    (created,) = await results(todo_tools, ("create_todo", {"items": items}))
    ids = {row["title"]: row["id"] for row in created["created"]}
    assert created["stageSize"] == 2
    assert created["current"]["title"] == "a"
    assert statuses(database) == ["in_progress", "in_progress", "pending", "pending", "pending"]

    (first,) = await results(
        todo_tools, ("complete_todo", {"todoId": ids["a"], "outcome": "did a"})
    )
    assert "next" not in first
    assert first["stageOpen"] == 1
    assert statuses(database)[2:] == ["pending", "pending", "pending"]

    (second,) = await results(
        todo_tools, ("complete_todo", {"todoId": ids["b"], "outcome": "did b"})
    )
    assert second["next"]["title"] == "c"
    assert [row["title"] for row in second["nextStage"]] == ["c", "d"]
    assert "stageOpen" not in second
    assert statuses(database) == ["completed", "completed", "in_progress", "in_progress", "pending"]


async def test_rows_of_a_stage_closed_in_one_message_start_the_next_stage_once(
    todo_tools: list[BaseTool], database: Database
) -> None:
    items = [{"title": t, "order": 1} for t in ("a", "b", "c")] + [{"title": "d", "order": 2}]
    (created,) = await results(todo_tools, ("create_todo", {"items": items}))
    rows = created["created"][:3]
    closed = await results(
        todo_tools,
        *(("complete_todo", {"todoId": row["id"], "outcome": "done"}) for row in rows),
    )
    assert [result.get("stageOpen", 0) for result in closed] == [2, 1, 0]
    assert [result["remaining"] for result in closed] == [3, 2, 1]
    assert closed[-1]["next"]["title"] == "d"
    assert statuses(database) == ["completed", "completed", "completed", "in_progress"]


async def test_distinct_orders_start_one_row_at_a_time(
    todo_tools: list[BaseTool], database: Database
) -> None:
    items = [{"title": t, "order": n} for n, t in enumerate(("a", "b", "c"), 1)]
    (created,) = await results(todo_tools, ("create_todo", {"items": items}))
    assert "stageSize" not in created
    assert statuses(database) == ["in_progress", "pending", "pending"]


# --- call order -----------------------------------------------------------------------------------


def logging_tools(log: list[str], overlap: Overlap) -> list[BaseTool]:
    async def slow(name: str) -> str:
        log.append(f"start {name}")
        await overlap.hold(0.05)
        log.append(f"end {name}")
        return name

    async def barrier() -> str:
        log.append("barrier")
        return "barrier"

    return [
        StructuredTool.from_function(coroutine=slow, name="slow", description="Slow work."),
        StructuredTool.from_function(
            coroutine=barrier,
            name="barrier",
            description="Runs after everything before it.",
            metadata={IN_ORDER_METADATA: True},
        ),
    ]


async def test_a_call_in_order_waits_for_the_calls_before_it_and_holds_back_the_calls_after(
    database: Database,
) -> None:
    log: list[str] = []
    tools = logging_tools(log, Overlap())
    messages, _ = await run_tool_calls(
        tools,
        [
            ("slow", {"name": "a"}),
            ("slow", {"name": "b"}),
            ("barrier", {}),
            ("slow", {"name": "c"}),
        ],
    )
    barrier = log.index("barrier")
    assert set(log[:barrier]) == {"start a", "start b", "end a", "end b"}
    assert log[:2] == ["start a", "start b"]  # a and b overlapped
    assert log[barrier + 1 :] == ["start c", "end c"]
    assert [message.content for message in messages] == ["a", "b", "barrier", "c"]


@pytest.mark.parametrize("limit", [1, 3])
async def test_max_parallel_tools_bounds_the_calls_running_at_once(limit: int) -> None:
    overlap = Overlap()
    tools = logging_tools([], overlap)
    await run_tool_calls(
        tools,
        [("slow", {"name": str(n)}) for n in range(6)],
        context=Context(max_parallel_tools=limit),
    )
    assert overlap.most == limit


async def test_a_plain_dict_state_gets_the_same_order_and_nothing_is_kept_afterwards() -> None:
    """The calls' bookkeeping belongs to one run of the node (it reaches the calls in their
    config): each run has its own, and none outlives its run."""

    class DictState(TypedDict):
        messages: Annotated[list[AnyMessage], add_messages]

    log: list[str] = []
    steps: list[weakref.ref[ordered_tools.ToolsStep]] = []

    async def watch(config: RunnableConfig) -> str:
        step = ordered_tools.tools_step(config)
        assert step is not None
        steps.append(weakref.ref(step))
        return "watched"

    tools = [
        *logging_tools(log, Overlap()),
        StructuredTool.from_function(coroutine=watch, name="watch", description="Watch."),
    ]
    builder = StateGraph(DictState)
    builder.add_node("tools", build_tools_node(tools))
    builder.add_edge(START, "tools")
    builder.add_edge("tools", END)
    graph = builder.compile()
    calls = [
        {"name": "slow", "args": {"name": "a"}, "id": "1", "type": "tool_call"},
        {"name": "barrier", "args": {}, "id": "2", "type": "tool_call"},
        {"name": "slow", "args": {"name": "b"}, "id": "3", "type": "tool_call"},
        {"name": "watch", "args": {}, "id": "4", "type": "tool_call"},
    ]
    for _ in range(2):
        await graph.ainvoke({"messages": [AIMessage(content="", tool_calls=calls)]})

    assert log == ["start a", "end a", "barrier", "start b", "end b"] * 2
    gc.collect()
    assert len(steps) == 2 and all(step() is None for step in steps)


def test_the_built_in_task_tools_keep_the_order_they_were_written_in(
    database: Database, tmp_path: Path
) -> None:
    """Their calls depend on each other (ids handed out in order, "add X" then "complete X"):
    tests/unit/tools/test_conversation_task_tools.py's seed flow fails when they run side by
    side."""
    tools = [*build_task_tools(database), *build_conversation_task_tools(tmp_path)]
    assert all((tool.metadata or {}).get(IN_ORDER_METADATA) for tool in tools)


async def test_a_client_streaming_the_plan_sees_every_row_of_a_stage_start(
    database: Database,
) -> None:
    titles = ["a", "b", "c"]
    work = SlowWork(database, seconds=0)
    model = ScriptedChatModel(responder=StageOracle(titles))
    graph = build_graph(model, tools=[work.tool()], database=database, include_default_tools=False)
    events = [
        event
        async for event in graph.astream(
            {"messages": [HumanMessage(content="Do a, b and c.")]},
            context=Context(),
            stream_mode="custom",
        )
    ]
    kinds = [(event["event"], event["title"]) for event in events]
    assert kinds == [
        *(("planned", title) for title in titles),
        *(("started", title) for title in titles),
        *(("completed", title) for title in titles),
    ]
