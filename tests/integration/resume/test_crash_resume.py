"""A turn whose process is killed mid-turn is finished by another process: no tool acts twice,
and the plan drains. Separate processes, real SIGKILL, the checkpoints and rows in one SQLite
file, the model behind the scripted OpenAI-compatible server."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from tests.http_oracle import HttpPlanOracle, plan_view_of
from tests.scripted_openai import Reply, ScriptedOpenAIServer, slow, text, tool_calls

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]
TURNPLAN = Path(sys.executable).with_name("turnplan")
TITLES = ["one", "two", "three"]


def add_task(title: str) -> tuple[str, dict[str, Any]]:
    return ("add_task", {"title": title})


@pytest.fixture
def model() -> Iterator[ScriptedOpenAIServer]:
    with ScriptedOpenAIServer() as server:
        yield server


def environment(model: ScriptedOpenAIServer) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TURNPLAN_")}
    env.update(
        TURNPLAN_MODEL="openai:scripted",
        OPENAI_BASE_URL=model.base_url,
        OPENAI_API_KEY="test-key",
        PYTHONPATH=str(REPO),
    )
    return env


def query(database: Path, sql: str) -> list[tuple[Any, ...]]:
    with closing(sqlite3.connect(database)) as connection:
        return connection.execute(sql).fetchall()


def kill_when(process: subprocess.Popen[bytes], ready: Any, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        assert process.poll() is None, "the process ended before the kill point"
        assert time.monotonic() < deadline, "the kill point was never reached"
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=10)


def test_a_process_killed_in_the_tools_step_is_resumed_by_another_without_repeats(
    tmp_path: Path, model: ScriptedOpenAIServer
) -> None:
    database = tmp_path / "turnplan.db"
    url = f"sqlite+aiosqlite:///{database}"
    marker = tmp_path / "in-tools"
    oracle = HttpPlanOracle(TITLES, add_task)
    model.reply(
        tool_calls(
            ("create_todo", {"items": [{"title": t} for t in TITLES]}),
            add_task("one"),
            ("wait_here", {"note": "slow"}),
        )
    )
    model.respond_with(oracle)
    driver = [sys.executable, "-m", "tests.crash_driver", url, "thread-1"]

    first = subprocess.Popen([*driver, "start", str(marker)], cwd=tmp_path, env=environment(model))
    kill_when(first, marker.exists)
    assert query(database, "SELECT count(*) FROM turn_todos") == [(3,)]
    assert query(database, "SELECT count(*) FROM tasks") == [(1,)]

    second = subprocess.run(
        [*driver, "resume", str(marker)],
        cwd=tmp_path,
        env=environment(model),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert second.returncode == 0, second.stderr
    final = json.loads(second.stdout.strip().splitlines()[-1])
    assert final["turnStatus"] == "answered"
    assert [todo["status"] for todo in final["todos"]] == ["completed"] * 3
    assert query(database, "SELECT count(*) FROM turn_todos") == [(3,)]
    assert query(database, "SELECT title, count(*) FROM tasks GROUP BY title") == [
        ("one", 1),
        ("three", 1),
        ("two", 1),
    ]


def test_turnplan_run_resume_finishes_a_turn_whose_process_died(
    tmp_path: Path, model: ScriptedOpenAIServer
) -> None:
    database = tmp_path / "turnplan.db"
    url = f"sqlite+aiosqlite:///{database}"
    oracle = HttpPlanOracle(TITLES, add_task)
    stalled = {"done": False}

    def respond(body: dict[str, Any]) -> Reply:
        # The second model call of the turn hangs: the process is killed while it waits.
        if plan_view_of(body) and not stalled["done"]:
            stalled["done"] = True
            return slow(3600, text("never sent"))
        return oracle(body)

    model.respond_with(respond)
    command = [str(TURNPLAN), "run", "--database", url, "--thread", "t-1"]
    first = subprocess.Popen(
        [*command, "Add one, two and three to my tasks"],
        cwd=tmp_path,
        env=environment(model),
        stdout=subprocess.DEVNULL,
    )
    kill_when(first, lambda: len(model.requests) >= 2)

    resumed = subprocess.run(
        [*command, "--resume"],
        cwd=tmp_path,
        env=environment(model),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "resuming: Add one, two and three to my tasks" in resumed.stdout
    assert "turn answered" in resumed.stdout
    assert query(database, "SELECT status, count(*) FROM turn_todos GROUP BY status") == [
        ("completed", 3)
    ]
    assert query(database, "SELECT count(*) FROM tasks") == [(3,)]

    again = subprocess.run(
        [*command, "--resume"],
        cwd=tmp_path,
        env=environment(model),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert again.returncode == 1
    assert "Nothing to resume" in again.stdout
