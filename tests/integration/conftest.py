"""Fixtures for tests against real servers on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.dev_server import DevServer, copy_project, run_dev_server
from tests.scripted_openai import ScriptedOpenAIServer


@pytest.fixture
def dev_server(tmp_path: Path, scripted_openai: ScriptedOpenAIServer) -> Iterator[DevServer]:
    """``langgraph dev`` started as README says, in a fresh copy of the project: the repository's
    own ``langgraph.json``, no database setting (rows land in ``dev_server.database``), the model
    behind ``dev_server.model``."""
    folder = copy_project(tmp_path / "project")
    with run_dev_server(folder, scripted_openai) as server:
        yield server


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test under ``tests/integration`` starts a real server or process: marked so, so
    ``-m "not integration"`` leaves them out."""
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.integration)
