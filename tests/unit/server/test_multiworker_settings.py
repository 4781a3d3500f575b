"""A worker of the multi-worker server (``python -m agent.app.server_worker``) is configured from
``langgraph.json`` and the environment, as LangGraph's server images are."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.app.server_worker import server_environment

REPO = Path(__file__).resolve().parents[3]
SHARED = {"DATABASE_URI": "postgresql://db/lg", "REDIS_URI": "redis://127.0.0.1:6379"}


def test_the_repository_langgraph_json_becomes_the_server_settings() -> None:
    env = server_environment(REPO / "langgraph.json", jobs=7, environ=SHARED)
    config = json.loads((REPO / "langgraph.json").read_text())
    assert env["LANGGRAPH_RUNTIME_EDITION"] == "pg"
    assert json.loads(env["LANGSERVE_GRAPHS"]) == config["graphs"]
    assert json.loads(env["LANGGRAPH_AUTH"]) == config["auth"]
    assert json.loads(env["LANGGRAPH_HTTP"]) == config["http"]
    assert env["N_JOBS_PER_WORKER"] == "7"
    assert env["DATABASE_URI"] == SHARED["DATABASE_URI"]
    # Not a development server: langgraph-api's Studio shortcut past the auth handler stays off.
    assert "LANGSMITH_LANGGRAPH_API_VARIANT" not in env


def test_the_env_file_is_read_and_the_environment_wins(tmp_path: Path) -> None:
    (tmp_path / "langgraph.json").write_text(
        json.dumps({"graphs": {"g": "./g.py:g"}, "env": ".env"})
    )
    (tmp_path / ".env").write_text("TURNPLAN_MODEL=openai:from-file\nREDIS_URI=redis://file\n")
    env = server_environment(tmp_path / "langgraph.json", jobs=1, environ=SHARED)
    assert env["TURNPLAN_MODEL"] == "openai:from-file"
    assert env["REDIS_URI"] == SHARED["REDIS_URI"]
    assert "LANGGRAPH_AUTH" not in env


def test_a_worker_without_postgres_or_redis_says_which_is_missing(tmp_path: Path) -> None:
    (tmp_path / "langgraph.json").write_text(json.dumps({"graphs": {"g": "./g.py:g"}}))
    with pytest.raises(SystemExit, match="Set REDIS_URI") as raised:
        server_environment(tmp_path / "langgraph.json", jobs=1, environ={"DATABASE_URI": "x"})
    assert "redis://" in str(raised.value)
