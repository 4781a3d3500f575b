"""Shared fixtures: a fresh SQLite database per test, in the test's temporary folder."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from storage import Database


@pytest.fixture
async def database(tmp_path: Path) -> AsyncIterator[Database]:
    """A file database (WAL needs a real file) that is disposed after the test."""
    db = Database(f"sqlite+aiosqlite:///{tmp_path / 'turnplan.db'}")
    yield db
    await db.dispose()
