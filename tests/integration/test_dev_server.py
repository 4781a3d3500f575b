"""The supervisor served by ``langgraph dev``, driven by the real langgraph-sdk client, with its
model behind the scripted OpenAI-compatible server (so ChatOpenAI speaks real HTTP)."""

from __future__ import annotations

import json
import os
import re
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client

from tests.http_oracle import HttpPlanOracle
from tests.scripted_openai import ScriptedOpenAIServer, text

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
LANGGRAPH = Path(sys.executable).with_name("langgraph")
STARTUP_SECONDS = 90


def _free_port() -> int:
    with closing(socket.socket()) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def model_server() -> Iterator[ScriptedOpenAIServer]:
    with ScriptedOpenAIServer() as server:
        yield server


@pytest.fixture
def dev_server(tmp_path: Path, model_server: ScriptedOpenAIServer) -> Iterator[dict[str, Any]]:
    """``langgraph dev`` in a temporary folder, offline, on a free port; yields its URL and db."""
    database = tmp_path / "turnplan.db"
    (tmp_path / "langgraph.json").write_text(
        json.dumps(
            {
                "dependencies": [str(REPO)],
                "graphs": {"supervisor": f"{REPO / 'agent' / 'graph.py'}:graph"},
            }
        )
    )
    env = {
        **os.environ,
        "LANGGRAPH_CLI_NO_ANALYTICS": "1",
        "LANGGRAPH_NO_VERSION_CHECK": "true",
        "LANGSMITH_TRACING": "false",
        "OPENAI_BASE_URL": model_server.base_url,
        "OPENAI_API_KEY": "test-key",
        "TURNPLAN_MODEL": "openai:scripted",
        "TURNPLAN_DATABASE_URL": f"sqlite+aiosqlite:///{database}",
        "PYTHONUNBUFFERED": "1",
    }
    log_path = tmp_path / "dev.log"
    with log_path.open("w") as log:
        process = subprocess.Popen(
            [
                str(LANGGRAPH),
                "dev",
                "--no-browser",
                "--no-reload",
                "--host",
                "127.0.0.1",
                "--port",
                str(_free_port()),
            ],
            cwd=tmp_path,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            url = _wait_for_api(process, log_path)
            yield {"url": url, "database": database, "log": log_path}
        finally:
            process.terminate()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _wait_for_api(process: subprocess.Popen[bytes], log_path: Path) -> str:
    """The URL from the server's "API:" banner (it silently moves off a taken port)."""
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"langgraph dev exited:\n{log_path.read_text()[-3000:]}")
        banner = re.search(
            r"API:\s*(?:\x1b\[[0-9;]*m)?(http://127\.0\.0\.1:\d+)", log_path.read_text()
        )
        if banner:
            url = banner.group(1)
            try:
                if httpx.get(f"{url}/ok", timeout=2).status_code == 200:
                    return url
            except httpx.HTTPError:
                pass
        time.sleep(0.25)
    raise AssertionError(f"langgraph dev did not start:\n{log_path.read_text()[-3000:]}")


async def test_planning_turn_over_the_dev_server(
    dev_server: dict[str, Any], model_server: ScriptedOpenAIServer
) -> None:
    titles = ["Add 'buy groceries'", "Add 'do laundry'", "Add 'call mom'"]
    model_server.respond_with(
        HttpPlanOracle(titles, lambda title: ("add_task", {"title": title.split("'")[1]}))
    )
    async with get_client(url=dev_server["url"]) as client:
        await _run_and_check(client, dev_server, model_server, titles)


async def _run_and_check(
    client: Any,
    dev_server: dict[str, Any],
    model_server: ScriptedOpenAIServer,
    titles: list[str],
) -> None:
    (assistant,) = await client.assistants.search(graph_id="supervisor")
    thread = await client.threads.create()

    events: list[dict[str, Any]] = []
    async for part in client.runs.stream(
        thread["thread_id"],
        "supervisor",
        input={"messages": [{"role": "user", "content": "Add three tasks for Saturday."}]},
        context={"user_id": "alice", "max_iterations": 20},
        stream_mode=["custom", "values"],
    ):
        if part.event == "custom":
            events.append(part.data)
        assert part.event != "error", f"{part.data}\n{dev_server['log'].read_text()[-3000:]}"

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

    with closing(sqlite3.connect(dev_server["database"])) as connection:
        rows = connection.execute(
            "SELECT conversationId, turnId, title, status FROM turn_todos ORDER BY priority"
        ).fetchall()
    assert [(r[2], r[3]) for r in rows] == [(t, "completed") for t in titles]
    assert {r[0] for r in rows} == {thread["thread_id"]}
    assert {r[1] for r in rows} == {values["turnId"]}

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
    assert "## Current plan" not in last_request["messages"][0]["content"]
    # The earlier turn is still history: its answer is in the window, before the new request.
    contents = [m.get("content") for m in last_request["messages"]]
    assert contents.index("All done.") < contents.index("Thanks!")
