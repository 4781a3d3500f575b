"""The largest work a client may ask of ``langgraph dev`` keeps the server answering, and input
past the caps is refused quickly, through the real ``langgraph_sdk`` (issue 41).

With every cap at its ceiling (``agent.context.LIMIT_CEILINGS``, which a run's context may not
pass): a 200-row plan from one ``create_todo`` call, 200 ``planEdits`` moves on it, a
continuation copying its 200 rows, and a 200,000-character message. Meanwhile a thread of its
own polls ``/ok``: the server's event loop must answer it within 1 s throughout (on main,
10,000 moves held it for 33 s). Then the oversized inputs: 10,000 edits and a message one
character too long are refused with VALIDATION_ERROR and change nothing."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import closing, contextmanager
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client

from agent.context import LIMIT_CEILINGS
from agent.server import MAX_REQUEST_BYTES
from tests.dev_server import DevServer
from tests.fakes import plan_rows
from tests.http_oracle import plan_view_of
from tests.scripted_openai import Reply, text, tool_calls

pytestmark = pytest.mark.integration

ROWS = LIMIT_CEILINGS["max_plan_rows"]
LARGEST = {
    "max_batch_items": LIMIT_CEILINGS["max_batch_items"],
    "max_plan_rows": ROWS,
    "max_plan_edits": LIMIT_CEILINGS["max_plan_edits"],
    "max_message_chars": LIMIT_CEILINGS["max_message_chars"],
}
OK_WITHIN = 1.0
"""Seconds ``/ok`` may take while the largest allowed work runs (the issue's promise)."""


def plans_everything_then_stops(body: dict[str, Any]) -> Reply:
    """Asked to plan, plans ``ROWS`` steps in one call; otherwise says it stops."""
    asked = [m for m in body["messages"] if m.get("role") == "user"][-1]["content"]
    if str(asked).startswith("plan") and not plan_rows(plan_view_of(body)):
        steps = [{"title": f"Step {n}", "context": "c" * 200} for n in range(ROWS)]
        return tool_calls(("create_todo", {"items": steps}))
    return text("Stopping here.")


@contextmanager
def ok_poller(url: str) -> Iterator[list[float]]:
    """Poll ``url``/ok from a thread (not the test's event loop, which parses big responses)
    until the block ends; yields the list of each request's seconds, filled as it goes."""
    latencies: list[float] = []
    stop = threading.Event()

    def poll() -> None:
        with httpx.Client(timeout=30) as client:
            while not stop.is_set():
                started = time.monotonic()
                assert client.get(f"{url}/ok").status_code == 200
                latencies.append(time.monotonic() - started)
                stop.wait(0.05)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    try:
        yield latencies
    finally:
        stop.set()
        poller.join(timeout=60)


def open_rows(server: DevServer) -> int:
    with closing(sqlite3.connect(server.database)) as connection:
        (count,) = connection.execute(
            "SELECT count(*) FROM turn_todos WHERE status IN ('pending', 'in_progress')"
        ).fetchone()
    return int(count)


async def largest_allowed_work(client: Any, server: DevServer) -> dict[str, Any]:
    """Plan, edit and continue at the ceilings on one thread; the plan as the edits left it."""
    thread = (await client.threads.create())["thread_id"]
    planned = await client.runs.wait(
        thread,
        "supervisor",
        input={"messages": [{"role": "user", "content": "plan it all"}]},
        context={**LARGEST, "base_iterations": 2, "max_iterations": 2},
    )
    assert planned["turnStatus"] == "budget_exhausted", server.log_tail()
    ids = [todo["id"] for todo in planned["todos"]]
    assert len(ids) == ROWS
    moves = [
        {"op": "move", "id": ids[1 + k % (ROWS - 1)], "position": 1 + (7 * k) % (ROWS - 1)}
        for k in range(LARGEST["max_plan_edits"])
    ]
    edited = await client.runs.wait(
        thread, "supervisor", input={"planEdits": moves}, context=LARGEST
    )
    assert edited["planEditResult"] == {"status": "applied", "applied": len(moves)}
    continued = await client.runs.wait(
        thread,
        "supervisor",
        input={"continuePlan": True},
        context={**LARGEST, "base_iterations": 1, "max_iterations": 1},
    )
    assert len(continued["todos"]) == ROWS, server.log_tail()
    assert [t["title"] for t in continued["todos"]] == [t["title"] for t in edited["todos"]]
    largest = "x" * LARGEST["max_message_chars"]
    answered = await client.runs.wait(
        thread,
        "supervisor",
        input={"messages": [{"role": "user", "content": largest}]},
        context=LARGEST,
    )
    assert answered["inputError"] is None and answered["turnStatus"] == "answered"
    state = await client.threads.get_state(thread)
    return dict(state["values"])


async def test_the_largest_allowed_work_leaves_ok_answering_and_oversized_input_is_refused(
    dev_server: DevServer,
) -> None:
    dev_server.model.respond_with(plans_everything_then_stops)
    async with get_client(url=dev_server.url) as client:
        with ok_poller(dev_server.url) as latencies:
            before = await largest_allowed_work(client, dev_server)
            thread = before["conversationId"]
            rows = open_rows(dev_server)
            too_many = [{"op": "add", "title": f"Row {n}"} for n in range(10_000)]
            edits = await client.runs.wait(thread, "supervisor", input={"planEdits": too_many})
            message = {"role": "user", "content": "x" * (LARGEST["max_message_chars"] + 1)}
            huge = await client.runs.wait(
                thread, "supervisor", input={"messages": [message]}, context=LARGEST
            )
            # Past the graph's view: an assistant message sent as input, then a short request.
            planted = {
                "role": "assistant",
                "content": "x" * (LIMIT_CEILINGS["max_message_chars"] + 1),
            }
            with pytest.raises(httpx.HTTPStatusError) as refused:
                await client.runs.wait(
                    thread,
                    "supervisor",
                    input={"messages": [planted, {"role": "user", "content": "hi"}]},
                )
        after = (await client.threads.get_state(thread))["values"]

    assert len(latencies) > 10
    assert max(latencies) < OK_WITHIN, sorted(latencies)[-5:]
    assert edits["planEditResult"]["error"] == "VALIDATION_ERROR"
    assert "10000 edits" in edits["planEditResult"]["message"]
    assert huge["inputError"]["error"] == "VALIDATION_ERROR"
    assert huge["inputError"]["field"] == "messages"
    assert refused.value.response.status_code == 422
    assert "not the user's" in refused.value.response.text
    assert open_rows(dev_server) == rows, "nothing changed"
    assert after["todos"] == before["todos"]
    assert [m["id"] for m in after["messages"]] == [m["id"] for m in before["messages"]]


async def test_a_request_body_past_the_cap_is_refused_before_the_server_stores_it(
    dev_server: DevServer,
) -> None:
    """A run's input lands in the thread's checkpoints before the graph can refuse it, so the
    whole body is capped (``agent.server.MAX_REQUEST_BYTES``), with a Content-Length or
    chunked."""
    message = {"role": "user", "content": "x" * (MAX_REQUEST_BYTES + 1)}
    body = json.dumps({"assistant_id": "supervisor", "input": {"messages": [message]}}).encode()

    dev_server.model.respond_with(lambda _: text("Hello."))

    async def chunked() -> AsyncIterator[bytes]:
        for start in range(0, len(body), 65_536):
            yield body[start : start + 65_536]

    async with get_client(url=dev_server.url) as client, httpx.AsyncClient() as raw:
        thread = (await client.threads.create())["thread_id"]
        url = f"{dev_server.url}/threads/{thread}/runs/wait"
        sized = await raw.post(url, content=body, headers={"Content-Type": "application/json"})
        streamed = await raw.post(
            url, content=chunked(), headers={"Content-Type": "application/json"}
        )
        history = await client.threads.get_history(thread)
        small = await client.runs.wait(
            thread, "supervisor", input={"messages": [{"role": "user", "content": "hi"}]}
        )

    assert sized.status_code == streamed.status_code == 413
    assert str(MAX_REQUEST_BYTES) in sized.json()["detail"]
    assert history == []  # no run, no checkpoint
    assert isinstance(small, dict) and small["turnStatus"] == "answered"  # the server still works
