"""A second message sent while a turn is still working, over ``langgraph dev`` and the real
``langgraph_sdk``: what each ``multitask_strategy`` does to the first turn's plan (issue 41).

The first turn plans "bread" and "milk", adds bread, and is stopped while the model thinks about
milk (the scripted model holds that request). A turn an earlier run left open by running out of
budget is on the same thread, and must stay open whatever happens to the stopped one. A stopped
turn is closed by both served graphs: the ``supervisor`` and ``turnplan_agent`` (``create_agent``
with ``TurnPlanMiddleware``).
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from contextlib import closing
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client
from langgraph_sdk.schema import MultitaskStrategy

from tests.dev_server import DevServer
from tests.fakes import plan_rows
from tests.http_oracle import plan_view_of
from tests.scripted_openai import Reply, text, tool_calls

pytestmark = pytest.mark.integration

BUDGET_RUNS_OUT = {"base_iterations": 2, "max_iterations": 2}
REQUESTS = ("add jam and honey", "add bread and milk", "add tea", "add jam")
HOLD_SECONDS = 120
"""How long the held model request waits for the test to release it (it never should)."""


def text_of(message: dict[str, Any]) -> str:
    content = message.get("content") or ""
    if isinstance(content, list):
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content)


def request_of(messages: list[dict[str, Any]]) -> str:
    """The newest of ``REQUESTS`` a user message of the call starts with."""
    for message in reversed(messages):
        if message.get("role") == "user":
            for request in REQUESTS:
                if text_of(message).strip().startswith(request):
                    return request
    raise AssertionError(f"no known request in {messages}")


class HeldMilk:
    """Plans the two titles of an "add X and Y" request, then adds the task in progress and
    closes its row in one message (a continued plan too); holds the request about milk until
    released. "add tea" is answered directly: the call, then a sentence."""

    def __init__(self) -> None:
        self.reached = threading.Event()
        self.release = threading.Event()

    async def __call__(self, body: dict[str, Any]) -> Reply:
        messages = body["messages"]
        rows = plan_rows(plan_view_of(body))
        if not rows:
            asked = request_of(messages)
            if asked == "add tea":
                if messages[-1].get("role") == "tool":
                    return text("Added tea.")
                return tool_calls(("add_task", {"title": "tea"}))
            first, second = asked.removeprefix("add ").split(" and ")
            return tool_calls(("create_todo", {"items": [{"title": first}, {"title": second}]}))
        current = next((row for row in rows if row.mark == ">"), None)
        if current is None:
            return text("Done.")
        if current.title == "milk":
            self.reached.set()
            for _ in range(HOLD_SECONDS * 20):
                if self.release.is_set():
                    break
                await asyncio.sleep(0.05)
        return tool_calls(
            ("add_task", {"title": current.title}),
            ("complete_todo", {"todoId": current.id, "outcome": f"added {current.title}"}),
        )


def said(message: str) -> dict[str, Any]:
    """A run's input: one user message."""
    return {"messages": [{"role": "user", "content": message}]}


def rows_titled(server: DevServer, title: str) -> list[tuple[str, str | None]]:
    """``(status, outcome)`` of the plan rows with this title, oldest first."""
    with closing(sqlite3.connect(server.database)) as connection:
        return connection.execute(
            "SELECT status, outcome FROM turn_todos WHERE title = ? ORDER BY createdAt", (title,)
        ).fetchall()


def task_titles(server: DevServer) -> list[str]:
    with closing(sqlite3.connect(server.database)) as connection:
        return sorted(t for (t,) in connection.execute("SELECT title FROM tasks"))


async def stop_milk_with(
    client: Any,
    model: HeldMilk,
    strategy: MultitaskStrategy,
    *,
    watched: bool,
    graph: str = "supervisor",
) -> tuple[str, Any]:
    """A new thread with a budget-exhausted turn (jam and honey), then a turn held at milk
    (``watched``: a client joins its run, as a chat UI streaming it does), then "add tea" sent
    with ``strategy``, all to ``graph``; returns the thread and the last run's result."""
    thread = (await client.threads.create())["thread_id"]
    first = await client.runs.wait(
        thread, graph, input=said("add jam and honey"), context=BUDGET_RUNS_OUT
    )
    assert isinstance(first, dict) and first["turnStatus"] == "budget_exhausted"
    held = await client.runs.create(thread, graph, input=said("add bread and milk"))
    watcher = asyncio.create_task(client.runs.join(thread, held["run_id"])) if watched else None
    assert await asyncio.to_thread(model.reached.wait, HOLD_SECONDS)
    last = await client.runs.wait(thread, graph, input=said("add tea"), multitask_strategy=strategy)
    if watcher is not None:
        await asyncio.gather(watcher, return_exceptions=True)
    return thread, last


def prompts_of_tea(server: DevServer) -> list[str]:
    """The system prompts of the "add tea" turn's model calls, in order."""
    return [
        str(body["messages"][0]["content"])
        for body in server.model.requests
        if request_of(body["messages"]) == "add tea"
    ]


def first_prompt_of_tea(server: DevServer) -> str:
    """The system prompt of the "add tea" turn's first model call."""
    prompts = prompts_of_tea(server)
    assert prompts, "the tea turn never called the model"
    return prompts[0]


def assert_milk_stopped_and_bread_stays(server: DevServer, outcome: str) -> None:
    """The held turn's open row closed with ``outcome``, its done row and task kept, and the
    tea turn's first call told what stays done (its later calls are not told again)."""
    assert rows_titled(server, "milk") == [("cancelled", outcome)]
    assert rows_titled(server, "bread") == [("completed", "added bread")]
    assert task_titles(server) == ["bread", "jam", "tea"]  # bread stays
    prompt, *later = prompts_of_tea(server)
    assert outcome in prompt and "'milk'" in prompt
    assert "add_task:" in prompt and "bread" in prompt.split(outcome, 1)[1]
    assert later and not any(outcome in text for text in later)


@pytest.mark.parametrize(
    "strategy, watched, outcome",
    [
        ("rollback", False, "rolled back by a newer run"),
        ("rollback", True, "rolled back by a newer run"),
        ("interrupt", False, "interrupted by a newer run"),
    ],
)
async def test_a_stopped_turn_leaves_no_open_rows_and_the_next_turn_says_what_stays_done(
    dev_server: DevServer, strategy: MultitaskStrategy, watched: bool, outcome: str
) -> None:
    model = HeldMilk()
    dev_server.model.respond_with(model)
    try:
        async with get_client(url=dev_server.url) as client:
            thread, last = await stop_milk_with(client, model, strategy, watched=watched)
            assert isinstance(last, dict), last
            assert last["turnStatus"] == "answered", dev_server.log_tail()
            assert_milk_stopped_and_bread_stays(dev_server, outcome)

            # The plan budget exhaustion left open is no stopped run's: "continue" finds it,
            # and only it.
            continued = await client.runs.wait(
                thread, "supervisor", input={"continuePlan": True}, context={"base_iterations": 9}
            )
    finally:
        model.release.set()
    assert isinstance(continued, dict) and continued["turnStatus"] == "answered"
    assert [todo["title"] for todo in continued["todos"]] == ["honey"]
    assert task_titles(dev_server) == ["bread", "honey", "jam", "tea"]


@pytest.mark.parametrize(
    "strategy, outcome",
    [("rollback", "rolled back by a newer run"), ("interrupt", "interrupted by a newer run")],
)
async def test_the_middleware_agent_closes_a_stopped_turn_and_says_what_stays_done(
    dev_server: DevServer, strategy: MultitaskStrategy, outcome: str
) -> None:
    model = HeldMilk()
    dev_server.model.respond_with(model)
    try:
        async with get_client(url=dev_server.url) as client:
            _, last = await stop_milk_with(
                client, model, strategy, watched=False, graph="turnplan_agent"
            )
    finally:
        model.release.set()
    assert isinstance(last, dict) and last["turnStatus"] == "answered", dev_server.log_tail()
    assert_milk_stopped_and_bread_stays(dev_server, outcome)
    # The plan budget exhaustion left open is no stopped run's: it stays open.
    ((status, left),) = rows_titled(dev_server, "honey")
    assert status in ("pending", "in_progress") and left is None


async def test_a_turn_the_user_stopped_is_continued_not_closed(dev_server: DevServer) -> None:
    """The user presses Stop while the turn works on milk (``runs.cancel``, which interrupts),
    then asks to continue: the open row is continued and done, not closed as stopped."""
    model = HeldMilk()
    dev_server.model.respond_with(model)
    try:
        async with get_client(url=dev_server.url) as client:
            thread, held = await held_at_milk(client, model)
            await client.runs.cancel(thread, held, wait=True, action="interrupt")
            model.release.set()
            continued = await client.runs.wait(thread, "supervisor", input={"continuePlan": True})
    finally:
        model.release.set()
    assert isinstance(continued, dict), continued
    assert continued["turnStatus"] == "answered", dev_server.log_tail()
    assert [(todo["title"], todo["status"]) for todo in continued["todos"]] == [
        ("milk", "completed")
    ]
    assert task_titles(dev_server) == ["bread", "milk"]
    assert ("cancelled", "interrupted by a newer run") not in rows_titled(dev_server, "milk")


class HeldJam:
    """Answers "add jam" directly (no plan): the call, then holds the answer until released;
    "add tea" the same, without holding."""

    def __init__(self) -> None:
        self.reached = threading.Event()
        self.release = threading.Event()

    async def __call__(self, body: dict[str, Any]) -> Reply:
        messages = body["messages"]
        asked = request_of(messages)
        if messages[-1].get("role") != "tool":
            return tool_calls(("add_task", {"title": asked.removeprefix("add ")}))
        if asked == "add jam":
            self.reached.set()
            for _ in range(HOLD_SECONDS * 20):
                if self.release.is_set():
                    break
                await asyncio.sleep(0.05)
        return text(f"Added {asked.removeprefix('add ')}.")


@pytest.mark.parametrize("graph", ["supervisor", "turnplan_agent"])
async def test_a_rolled_back_direct_answer_is_reported_to_the_turn_replacing_it(
    dev_server: DevServer, graph: str
) -> None:
    """A turn with no plan rolled back after it added jam: nothing to close, but the next turn
    is told that jam stays added (its messages went with the rolled-back checkpoints)."""
    model = HeldJam()
    dev_server.model.respond_with(model)
    try:
        async with get_client(url=dev_server.url) as client:
            thread = (await client.threads.create())["thread_id"]
            await client.runs.create(thread, graph, input=said("add jam"))
            assert await asyncio.to_thread(model.reached.wait, HOLD_SECONDS)
            last = await client.runs.wait(
                thread, graph, input=said("add tea"), multitask_strategy="rollback"
            )
    finally:
        model.release.set()
    assert isinstance(last, dict) and last["turnStatus"] == "answered", dev_server.log_tail()
    assert task_titles(dev_server) == ["jam", "tea"]
    assert not any("Added jam" in str(m.get("content")) for m in last["messages"])
    prompt, *later = prompts_of_tea(dev_server)
    assert "rolled back by a newer run" in prompt
    assert "add_task:" in prompt and "jam" in prompt.split("rolled back by a newer run", 1)[1]
    assert later and not any("rolled back" in text for text in later)


async def held_at_milk(client: Any, model: HeldMilk) -> tuple[str, str]:
    """A new thread whose turn "add bread and milk" is held at milk: the thread and the run."""
    thread = (await client.threads.create())["thread_id"]
    held = await client.runs.create(thread, "supervisor", input=said("add bread and milk"))
    assert await asyncio.to_thread(model.reached.wait, HOLD_SECONDS)
    return thread, held["run_id"]


def assert_both_plans_done(server: DevServer) -> None:
    """The first turn finished its plan and the second added tea; nobody was stopped."""
    assert rows_titled(server, "bread") == [("completed", "added bread")]
    assert rows_titled(server, "milk") == [("completed", "added milk")]
    assert task_titles(server) == ["bread", "milk", "tea"]
    assert "by a newer run" not in first_prompt_of_tea(server)


async def test_an_enqueued_message_waits_for_the_plan_to_finish(dev_server: DevServer) -> None:
    model = HeldMilk()
    dev_server.model.respond_with(model)
    try:
        async with get_client(url=dev_server.url) as client:
            thread, _ = await held_at_milk(client, model)
            queued = await client.runs.create(
                thread, "supervisor", input=said("add tea"), multitask_strategy="enqueue"
            )
            assert (await client.runs.get(thread, queued["run_id"]))["status"] == "pending"
            model.release.set()
            last = await client.runs.join(thread, queued["run_id"])
    finally:
        model.release.set()
    assert isinstance(last, dict) and last["turnStatus"] == "answered", dev_server.log_tail()
    assert_both_plans_done(dev_server)


async def test_a_rejected_message_leaves_the_plan_running(dev_server: DevServer) -> None:
    model = HeldMilk()
    dev_server.model.respond_with(model)
    try:
        async with get_client(url=dev_server.url) as client:
            thread, held = await held_at_milk(client, model)
            with pytest.raises(httpx.HTTPStatusError) as refused:
                await client.runs.wait(
                    thread, "supervisor", input=said("add tea"), multitask_strategy="reject"
                )
            assert refused.value.response.status_code == 409
            assert "already running" in refused.value.response.text
            model.release.set()
            first = await client.runs.join(thread, held)
            assert isinstance(first, dict) and first["turnStatus"] == "answered"
            # The user sends it again once the turn has finished.
            last = await client.runs.wait(thread, "supervisor", input=said("add tea"))
    finally:
        model.release.set()
    assert isinstance(last, dict) and last["turnStatus"] == "answered", dev_server.log_tail()
    assert_both_plans_done(dev_server)
