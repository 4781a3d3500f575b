"""The ``turnplan_agent`` graph of ``langgraph.json``: importing its module (or
``agent.middleware``) builds nothing and touches no file; the server's first access builds the
agent, with turnplan's and LangChain's middleware, once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from agent.middleware.served import turnplan_agent

REPO = Path(__file__).resolve().parents[3]
HEAVY = ("openai", "langchain_openai", "mcp", "langchain_mcp_adapters")


def test_importing_the_middleware_and_its_served_graph_builds_nothing(tmp_path: Path) -> None:
    code = (
        "import json, sys\n"
        "import agent.middleware, agent.middleware.served as served\n"
        f"print(json.dumps([[n for n in {HEAVY!r} if n in sys.modules], len(served._built)]))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO), "TURNPLAN_DATABASE_URL": ""}
    done = subprocess.run(
        [sys.executable, "-W", "error", "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env=env,
        cwd=tmp_path,
    )
    assert json.loads(done.stdout) == [[], 0]
    assert list(tmp_path.iterdir()) == []  # no .turnplan/ database, no log


def test_langgraph_json_serves_the_middleware_agent_beside_the_supervisor() -> None:
    graphs = json.loads((REPO / "langgraph.json").read_text())["graphs"]
    assert graphs["turnplan_agent"] == "./agent/middleware/served.py:turnplan_agent"
    assert graphs["supervisor"] == "./agent/server.py:supervisor"


@pytest.mark.usefixtures("isolated_model_env")
async def test_the_first_access_builds_the_agent_once_with_both_middlewares(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("TURNPLAN_MODEL", "openai:scripted")
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("TURNPLAN_DATABASE_URL", f"sqlite+aiosqlite:///{tmp_path / 'a.db'}")
    schema_read: Any = SimpleNamespace(execution_runtime=None)

    first = await turnplan_agent(schema_read)
    again = await turnplan_agent(schema_read)

    assert first is again
    nodes = set(first.get_graph().nodes)
    assert {"TurnPlanMiddleware.before_model", "ModelCallLimitMiddleware.before_model"} <= nodes
    assert "todos" in first.get_output_jsonschema()["properties"]
