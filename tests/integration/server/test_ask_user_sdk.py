"""``ask_user`` through ``langgraph dev`` and the real ``langgraph_sdk`` client, as Studio and a
chat UI use it: the run pauses at an interrupt whose value is the question, and either
``command={"resume": ...}`` or the user's next message answers it and the turn drains."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from typing import Any

import pytest
from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient

from tests.dev_server import DevServer
from tests.http_asking import OPTIONS, asking_model
from tests.http_oracle import HttpPlanOracle

pytestmark = pytest.mark.integration

ASK = {"messages": [{"role": "user", "content": "complete my call task"}]}


def done(server: DevServer) -> dict[str, int]:
    with closing(sqlite3.connect(server.database)) as connection:
        return dict(connection.execute("SELECT title, completed FROM tasks").fetchall())


async def seed_tasks(client: LangGraphClient, server: DevServer) -> None:
    server.model.respond_with(HttpPlanOracle(OPTIONS, lambda t: ("add_task", {"title": t})))
    thread = await client.threads.create()
    await client.runs.wait(
        thread["thread_id"],
        "supervisor",
        input={"messages": [{"role": "user", "content": "add both"}]},
    )
    server.model.respond_with(asking_model)


async def paused_thread(client: LangGraphClient, server: DevServer) -> dict[str, Any]:
    thread = await client.threads.create()
    await client.runs.wait(thread["thread_id"], "supervisor", input=ASK)
    state = await client.threads.get_state(thread["thread_id"])
    assert state["next"] == ["tools"], server.log_tail()
    return thread


async def test_the_question_is_an_interrupt_and_resume_answers_it(dev_server: DevServer) -> None:
    async with get_client(url=dev_server.url) as client:
        await seed_tasks(client, dev_server)
        thread = await paused_thread(client, dev_server)
        state = await client.threads.get_state(thread["thread_id"])
        (pause,) = state["interrupts"]
        assert pause["value"]["type"] == "question"
        assert pause["value"]["question"] == "Which call task?"
        assert pause["value"]["options"] == OPTIONS
        assert pause["value"]["todo"]["title"] == "Complete the call task"
        assert state["values"]["turnStatus"] == "running"

        result = await client.runs.wait(
            thread["thread_id"], "supervisor", command={"resume": "call dad"}
        )

    assert isinstance(result, dict) and result["turnStatus"] == "answered"
    assert [row["status"] for row in result["todos"]] == ["completed"]
    assert done(dev_server) == {"call mom": 0, "call dad": 1}


async def test_the_users_next_message_is_the_answer(dev_server: DevServer) -> None:
    async with get_client(url=dev_server.url) as client:
        await seed_tasks(client, dev_server)
        thread = await paused_thread(client, dev_server)

        result = await client.runs.wait(
            thread["thread_id"],
            "supervisor",
            input={"messages": [{"role": "user", "content": "call mom"}]},
        )

    assert isinstance(result, dict) and result["turnStatus"] == "answered"
    humans = [m["content"] for m in result["messages"] if m["type"] == "human"]
    assert humans == ["complete my call task"]
    assert done(dev_server) == {"call mom": 1, "call dad": 0}
