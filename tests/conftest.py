"""Shared fixtures: a fresh database per test (SQLite in the test's temporary folder; a module
can ask for PostgreSQL too with ``BOTH_BACKENDS``).

The scripted OpenAI-compatible server (fixture ``scripted_openai``) and the scripted Anthropic
Messages-API server (``scripted_anthropic``) come from their own modules.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agent.llm.chat_models import clear_model_cache, close_chat_models
from storage import Database
from tests.fakes import RECORDED_NOTES

pytest_plugins = ["tests.scripted_openai", "tests.scripted_anthropic", "tests.postgres"]

BOTH_BACKENDS = pytest.mark.parametrize("database", ["sqlite", "postgres"], indirect=True)
"""``pytestmark = BOTH_BACKENDS`` runs a module's tests on SQLite and on a real PostgreSQL."""


MODEL_ENV_KEYS = (
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "TURNPLAN_MODEL",
    "TURNPLAN_LOCAL_MODEL_URL",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_API_URL",
)


@pytest.fixture
def isolated_model_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No model settings from the machine running the tests, and no cached clients."""
    for key in MODEL_ENV_KEYS:
        monkeypatch.delenv(key, raising=False)
    clear_model_cache()


@pytest.fixture(autouse=True)
def _tool_settings_of_the_test(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No MCP servers from the machine running the tests, and conversation task files in the
    test's own folder (never in the checkout)."""
    monkeypatch.delenv("TURNPLAN_MCP_SERVERS", raising=False)
    monkeypatch.setenv("TURNPLAN_TASKS_DIR", str(tmp_path))


@pytest.fixture(autouse=True)
async def _close_model_clients() -> AsyncIterator[None]:
    """Close the HTTP clients of models a test built on its event loop, as a well-behaved
    application does before its loop ends (else they surface later as ResourceWarnings)."""
    yield
    await close_chat_models()


@pytest.fixture
async def database(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Database]:
    """A fresh database, disposed after the test: a SQLite file (WAL needs a real file), or a
    new database on the session's PostgreSQL server when parametrized with ``"postgres"``."""
    if getattr(request, "param", "sqlite") == "postgres":
        server = request.getfixturevalue("postgres_server")
        db = Database(server.fresh_database_url())
    else:
        db = Database(f"sqlite+aiosqlite:///{tmp_path / 'turnplan.db'}")
    yield db
    await db.dispose()


@pytest.fixture
def recorded_notes() -> list[str]:
    """The notes ``tests.fakes.record`` records in this test, empty at its start."""
    RECORDED_NOTES.clear()
    return RECORDED_NOTES
