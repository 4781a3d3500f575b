"""Many planning turns at once on ``langgraph dev`` with several background jobs, on the README
default SQLite database: every turn answers and no tool call fails (the store queues writers
instead of answering "database is locked")."""

from __future__ import annotations

import asyncio
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from langgraph_sdk import get_client

from tests.dev_server import copy_project, run_dev_server
from tests.http_oracle import HttpPlanOracle
from tests.scripted_openai import ScriptedOpenAIServer

pytestmark = pytest.mark.integration

TURNS = 60
JOBS = "10"


async def test_sixty_concurrent_planning_turns_with_ten_jobs_have_no_tool_errors(
    tmp_path: Path, scripted_openai: ScriptedOpenAIServer
) -> None:
    scripted_openai.respond_with(
        HttpPlanOracle(["first", "second", "third"], lambda t: ("add_task", {"title": t}))
    )
    folder = copy_project(tmp_path / "project")
    with run_dev_server(
        folder, scripted_openai, extra_args=["--n-jobs-per-worker", JOBS]
    ) as server:
        async with get_client(url=server.url) as client:

            async def one_turn(n: int) -> dict[str, Any]:
                thread = await client.threads.create()
                result = await client.runs.wait(
                    thread["thread_id"],
                    "supervisor",
                    input={"messages": [{"role": "user", "content": f"Three things, {n}"}]},
                    context={"user_id": f"user-{n}"},
                )
                assert isinstance(result, dict), result
                return result

            results = await asyncio.gather(*(one_turn(n) for n in range(TURNS)))
        log = server.log_tail()
    statuses = [r.get("turnStatus") for r in results]
    assert statuses == ["answered"] * TURNS, log
    errors = [
        m["content"]
        for r in results
        for m in r["messages"]
        if m.get("type") == "tool" and m.get("status") == "error"
    ]
    assert errors == []
    assert sum(r["toolErrors"] for r in results) == 0
    with closing(sqlite3.connect(server.database)) as connection:
        assert connection.execute(
            "SELECT status, count(*) FROM turn_todos GROUP BY status"
        ).fetchall() == [("completed", 3 * TURNS)]
        assert connection.execute("SELECT count(*) FROM tasks").fetchone() == (3 * TURNS,)
