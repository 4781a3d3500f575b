"""The supervisor served by ``langgraph dev``, driven by the real langgraph-sdk client, with its
model behind the scripted OpenAI-compatible server (so ChatOpenAI speaks real HTTP)."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from langgraph_sdk import get_client

from tests.dev_server import DevServer, copy_project, run_dev_server
from tests.fakes import plan_view
from tests.http_oracle import HttpPlanOracle
from tests.scripted_openai import ScriptedOpenAIServer, text

pytestmark = pytest.mark.integration


def add_task_call(title: str) -> tuple[str, dict[str, Any]]:
    return ("add_task", {"title": title})


async def test_planning_turn_over_the_dev_server(dev_server: DevServer) -> None:
    titles = ["Add 'buy groceries'", "Add 'do laundry'", "Add 'call mom'"]
    dev_server.model.respond_with(
        HttpPlanOracle(titles, lambda title: ("add_task", {"title": title.split("'")[1]}))
    )
    async with get_client(url=dev_server.url) as client:
        await _run_and_check(client, dev_server, titles)


async def _run_and_check(client: Any, dev_server: DevServer, titles: list[str]) -> None:
    model_server = dev_server.model
    (assistant,) = await client.assistants.search(graph_id="supervisor")
    thread = await client.threads.create()

    events: list[dict[str, Any]] = []
    cards: list[dict[str, Any]] = []
    async for part in client.runs.stream(
        thread["thread_id"],
        "supervisor",
        input={"messages": [{"role": "user", "content": "Add three tasks for Saturday."}]},
        context={"user_id": "alice", "max_iterations": 20},
        stream_mode=["custom", "values"],
    ):
        if part.event == "custom":
            events.append(part.data)
        elif part.event == "values" and part.data.get("ui"):  # the plan card after each step
            cards.append(part.data["ui"][-1])
        assert part.event != "error", f"{part.data}\n{dev_server.log_tail()}"

    assert [e["event"] for e in events if e["title"] == titles[0]] == [
        "planned",
        "started",
        "completed",
    ]
    assert sum(e["event"] == "completed" for e in events) == 3

    state = await client.threads.get_state(thread["thread_id"])
    values = state["values"]
    assert values["turnStatus"] == "answered"
    assert values["conversationId"] == thread["thread_id"]
    assert values["messages"][-1]["content"] == "All done."
    assert len(model_server.requests) == len(titles) + 2
    # The plan where UIs look for it: deep-agents-ui's todo shape next to ours, and one
    # generative-UI card for the turn that moved with the plan and ended with the turn.
    assert [(t["content"], t["title"], t["status"]) for t in values["todos"]] == [
        (title, title, "completed") for title in titles
    ]
    (card,) = values["ui"]
    assert card["id"] == f"plan:{values['turnId']}" and card["name"] == "plan"
    assert card["props"]["turnStatus"] == "answered"
    assert card["props"]["llmCalls"] == len(titles) + 2
    assert [t["status"] for t in card["props"]["todos"]] == ["completed"] * 3
    ai_ids = {m["id"] for m in values["messages"] if m["type"] == "ai"}
    assert card["metadata"]["message_id"] in ai_ids
    live = [[t["status"] for t in c["props"]["todos"]] for c in cards]
    assert live[0] == ["in_progress", "pending", "pending"]
    assert live[-1] == ["completed"] * 3

    # README's default database, under the folder the server was started in.
    with closing(sqlite3.connect(dev_server.database)) as connection:
        rows = connection.execute(
            "SELECT conversationId, turnId, title, status FROM turn_todos ORDER BY priority"
        ).fetchall()
    assert [(r[2], r[3]) for r in rows] == [(t, "completed") for t in titles]
    assert {r[0] for r in rows} == {thread["thread_id"]}
    assert {r[1] for r in rows} == {values["turnId"]}
    # Every step names the server run that took it: what lets a server retry of the run (its
    # worker died) catch up with its own turn instead of forking it (agent.turn.lineage).
    (run,) = await client.runs.list(thread["thread_id"])
    with closing(sqlite3.connect(dev_server.database)) as connection:
        step_runs = connection.execute(
            "SELECT DISTINCT runId FROM turn_steps WHERE turnId = ?", (values["turnId"],)
        ).fetchall()
    assert step_runs == [(run["run_id"],)]

    drawn = await client.assistants.get_graph(assistant["assistant_id"])
    assert {"plan", "execute", "drain", "tools"} <= {node["id"] for node in drawn["nodes"]}
    schemas = await client.assistants.get_schemas(assistant["assistant_id"])
    context_fields = set(schemas["context_schema"]["properties"])
    assert {
        "model",
        "user_id",
        "base_iterations",
        "max_iterations",
        "history_limit",
    } <= context_fields

    # A second turn on the same thread: the server's checkpointer keeps the conversation, the
    # turn gets a new id, and the first turn's (closed) rows are not part of its plan.
    assert [m["title"] for m in values["modifiedTasks"]] == [
        "buy groceries",
        "do laundry",
        "call mom",
    ]
    model_server.respond_with(lambda body: text("You're welcome!"))
    second = await client.runs.wait(
        thread["thread_id"],
        "supervisor",
        input={"messages": [{"role": "user", "content": "Thanks!"}]},
        context={"user_id": "alice"},
    )
    assert second["turnStatus"] == "answered"
    assert second["turnId"] != values["turnId"]
    assert second["modifiedTasks"] == []
    last_request = model_server.requests[-1]
    assert plan_view(last_request["messages"]) == ""
    # The earlier turn is still history: its answer is in the window, before the new request.
    contents = [m.get("content") for m in last_request["messages"]]
    assert contents.index("All done.") < contents.index("Thanks!")


async def test_a_clean_shutdown_leaves_no_write_ahead_log(
    tmp_path: Path, scripted_openai: ScriptedOpenAIServer
) -> None:
    """The server disposes the database on its way out, so SQLite folds the WAL into the file."""
    folder = copy_project(tmp_path / "project")
    scripted_openai.respond_with(HttpPlanOracle(["Buy milk", "Buy eggs"], add_task_call))
    with run_dev_server(folder, scripted_openai) as server:
        async with get_client(url=server.url) as client:
            thread = await client.threads.create()
            final = await client.runs.wait(
                thread["thread_id"],
                "supervisor",
                input={"messages": [{"role": "user", "content": "Buy milk and eggs"}]},
            )
        assert isinstance(final, dict) and final["turnStatus"] == "answered", server.log_tail()
        wal = server.database.with_name("turnplan.db-wal")
        assert wal.exists() and wal.stat().st_size > 0, "the run should have written to the WAL"
    assert not wal.exists() or wal.stat().st_size == 0, "the WAL was left on disk"
    with closing(sqlite3.connect(server.database)) as connection:
        assert connection.execute("SELECT count(*) FROM turn_todos").fetchone() == (2,)
