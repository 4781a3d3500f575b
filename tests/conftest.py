"""Shared fixtures: a fresh SQLite database per test, in the test's temporary folder.

The scripted OpenAI-compatible server (fixture ``scripted_openai``) comes from its own module.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from storage import Database

pytest_plugins = ["tests.scripted_openai"]


@pytest.fixture
async def database(tmp_path: Path) -> AsyncIterator[Database]:
    """A file database (WAL needs a real file) that is disposed after the test."""
    db = Database(f"sqlite+aiosqlite:///{tmp_path / 'turnplan.db'}")
    yield db
    await db.dispose()
