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
