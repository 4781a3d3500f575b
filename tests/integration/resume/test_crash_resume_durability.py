"""Concurrent turns whose process is SIGKILLed mid-turn, under each checkpoint durability, on
SQLite and PostgreSQL: the turns finish in another process, every action happens once, no turn
forks and no row is left open.

Under ``durability="async"`` (a LangGraph Server's default) and ``"exit"`` the checkpoints lag
the database: the resumed runs start from checkpoints older than their rows, tool results and
model answers, and must take them for their own (``agent.turn.lineage``,
``agent.turn.answer_ledger``), not for a fork.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy

from tests.fakes import plan_rows
from tests.http_oracle import plan_view_of
from tests.postgres import PostgresServer
from tests.scripted_openai import Reply, ScriptedOpenAIServer, text, tool_calls

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]
TITLES = ["one", "two", "three"]
TURNS = 8
CALLS_PER_TURN = 5  # plan and act, close and act twice, close, answer


def add_task(title: str) -> tuple[str, dict[str, Any]]:
    return ("add_task", {"title": title})


def acted_on(body: dict[str, Any], title: str) -> bool:
    """Whether the conversation the model is sent shows the action on ``title`` done."""
    return any(
        message.get("role") == "tool" and f'"title": "{title}"' in str(message.get("content"))
        for message in body.get("messages") or []
    )


def history_reading_model(body: dict[str, Any]) -> Reply:
    """Plans the three items and works them one by one, trusting only what the conversation
    shows, as a real model does: the item in progress whose action the history does not show is
    acted on (again, if its result was lost with a checkpoint); one whose action it shows is
    closed, and the next one acted on."""
    rows = plan_rows(plan_view_of(body))
    if not rows:
        return tool_calls(
            ("create_todo", {"items": [{"title": t} for t in TITLES]}), add_task(TITLES[0])
        )
    current = next((row for row in rows if row.mark == ">"), None)
    if current is None:
        return text("All done.")
    if not acted_on(body, current.title):
        return tool_calls(add_task(current.title))
    calls = [("complete_todo", {"todoId": current.id, "outcome": f"did {current.title}"})]
    following = next((row for row in rows if row.mark == " "), None)
    if following is not None:
        calls.append(add_task(following.title))
    return tool_calls(*calls)


@pytest.fixture
def model() -> Iterator[ScriptedOpenAIServer]:
    with ScriptedOpenAIServer() as server:
        server.respond_with(history_reading_model)
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


def sync_url(url: str) -> str:
    return url.replace("+aiosqlite", "").replace("+asyncpg", "+psycopg")


def query(url: str, sql: str) -> list[tuple[Any, ...]]:
    engine = sqlalchemy.create_engine(sync_url(url))
    try:
        with engine.connect() as connection:
            return [tuple(row) for row in connection.execute(sqlalchemy.text(sql))]
    finally:
        engine.dispose()


def kill_after(process: subprocess.Popen[bytes], model: ScriptedOpenAIServer, calls: int) -> None:
    deadline = time.monotonic() + 120
    while len(model.requests) < calls:
        assert process.poll() is None, "the turns ended before the kill point"
        assert time.monotonic() < deadline, "the kill point was never reached"
        time.sleep(0.005)
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=10)


def crash_and_resume(
    tmp_path: Path,
    model: ScriptedOpenAIServer,
    url: str,
    durability: str,
    kill_at: int,
    run_ids: bool = False,
) -> list[str]:
    driver = [sys.executable, "-m", "tests.async_crash_driver", url, durability]
    flags = ["run-ids"] if run_ids else []
    env = environment(model)
    first = subprocess.Popen([*driver, "start", str(TURNS), *flags], cwd=tmp_path, env=env)
    kill_after(first, model, kill_at)
    resumed = subprocess.run(
        [*driver, "resume", str(TURNS), *flags],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    statuses: list[str] = json.loads(resumed.stdout.strip().splitlines()[-1])["statuses"]
    return statuses


def assert_each_action_once(url: str, statuses: list[str]) -> None:
    assert statuses == ["answered"] * TURNS
    assert query(url, "SELECT count(*) FROM turns WHERE \"turnId\" LIKE '%/fork-%'") == [(0,)]
    assert query(
        url, "SELECT count(*) FROM turn_todos WHERE status IN ('pending', 'in_progress')"
    ) == [(0,)]
    per_turn = query(url, 'SELECT "turnId", count(*) FROM turn_todos GROUP BY "turnId"')
    assert sorted(count for _, count in per_turn) == [len(TITLES)] * TURNS
    tasks = query(url, "SELECT user_id, title, count(*) FROM tasks GROUP BY user_id, title")
    assert [row for row in tasks if row[2] != 1] == [], "an action ran twice"
    assert len(tasks) == TURNS * len(TITLES), "an action never ran"


# The kill lands after the first, second or third burst of model answers (the turns go about in
# step): async, the default of ainvoke and of a server, at each; exit and sync after the second.
# Plain ainvoke runs, and runs with a stable run id in their configurable (as a server's).
KILLS = [
    ("async", TURNS + 2, False),
    ("async", 2 * TURNS + 3, True),
    ("async", 3 * TURNS + 1, False),
    ("exit", 2 * TURNS + 3, False),
    ("sync", 2 * TURNS + 3, False),
]


@pytest.mark.parametrize(("durability", "kill_at", "run_ids"), KILLS)
def test_turns_killed_on_sqlite_finish_exactly_once(
    tmp_path: Path, model: ScriptedOpenAIServer, durability: str, kill_at: int, run_ids: bool
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'turnplan.db'}"
    statuses = crash_and_resume(tmp_path, model, url, durability, kill_at, run_ids)
    assert_each_action_once(url, statuses)


@pytest.mark.parametrize(("durability", "run_ids"), [("async", True), ("exit", False)])
def test_turns_killed_on_postgres_finish_exactly_once(
    tmp_path: Path,
    model: ScriptedOpenAIServer,
    postgres_server: PostgresServer,
    durability: str,
    run_ids: bool,
) -> None:
    url = postgres_server.fresh_database_url()
    statuses = crash_and_resume(tmp_path, model, url, durability, 2 * TURNS + 3, run_ids)
    assert_each_action_once(url, statuses)
