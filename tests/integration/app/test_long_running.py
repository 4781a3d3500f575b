"""A script that runs each turn in its own ``asyncio.run`` for hours: every finished loop leaves
nothing behind (no engine, connection, aiosqlite thread, HTTP client or bound model), without
the caller disposing anything."""

from __future__ import annotations

import asyncio
import gc
import threading
from pathlib import Path

import pytest
from langchain_core.messages import HumanMessage

from agent.context import Context
from agent.graph import build_graph
from agent.llm.chat_models import open_model_loops
from agent.nodes.deps import SupervisorDeps
from storage import Database
from tests.http_oracle import HttpPlanOracle
from tests.scripted_openai import ScriptedOpenAIServer

TURNS = 6


def left_running(before: set[threading.Thread]) -> list[threading.Thread]:
    """Threads started since ``before`` that are still running after a moment's wait: an
    aiosqlite thread resolves its close before it exits, so one may still be finishing when the
    loop that closed it has ended; one left open waits for work forever."""
    for thread in set(threading.enumerate()) - before:
        thread.join(timeout=5)
    return [thread for thread in set(threading.enumerate()) - before if thread.is_alive()]


def test_turns_in_their_own_event_loops_leave_nothing_open(
    tmp_path: Path,
    scripted_openai: ScriptedOpenAIServer,
    monkeypatch: pytest.MonkeyPatch,
    isolated_model_env: None,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", scripted_openai.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    scripted_openai.respond_with(
        HttpPlanOracle(["one", "two"], lambda title: ("add_task", {"title": title}))
    )
    database = Database(f"sqlite+aiosqlite:///{tmp_path / 'soak.db'}")
    graph = build_graph("openai:scripted", database=database)
    (deps,) = [
        o for o in gc.get_objects() if isinstance(o, SupervisorDeps) and o.database is database
    ]
    threads_before = set(threading.enumerate())

    for n in range(TURNS):
        result = asyncio.run(
            graph.ainvoke(
                {"messages": [HumanMessage(content=f"two things, round {n}")]},
                context=Context(user_id="soak"),
            )
        )
        assert result["turnStatus"] == "answered"
        assert database.open_loops == 0, "the finished loop's engine was kept"
        assert open_model_loops() == 0, "the finished loop's HTTP clients were kept"
        assert deps.bound_loops == 0, "the finished loop's bound models were kept"
        assert not left_running(threads_before), "a connection thread was left running"
    assert [r.getMessage() for r in caplog.records if r.name == "asyncio"] == []
