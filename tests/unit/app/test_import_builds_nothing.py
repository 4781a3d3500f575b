"""Importing turnplan builds nothing and touches no file: the served graph is made when the
server starts (``agent.server``), and the model and MCP client packages are imported when a run
first needs them, so ``import agent.graph`` costs little more than importing LangChain."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from agent.app.served import Served, served
from agent.server import supervisor

REPO = Path(__file__).resolve().parents[3]

HEAVY = ("openai", "langchain_openai", "mcp", "langchain_mcp_adapters")
"""Packages that took over 1.5 s of ``import agent.graph`` when it built the served graph."""


def test_importing_the_graph_module_imports_no_model_or_mcp_client_and_writes_nothing(
    tmp_path: Path,
) -> None:
    code = (
        "import json, sys\n"
        "import agent, agent.graph\n"
        f"print(json.dumps([name for name in {HEAVY!r} if name in sys.modules]))\n"
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
    assert json.loads(done.stdout) == []
    assert list(tmp_path.iterdir()) == []  # no .turnplan/ database, no log


async def test_the_server_factory_builds_the_served_graph_once() -> None:
    # What the server passes for a schema read: a runtime without a run.
    schema_read: Any = SimpleNamespace(execution_runtime=None)
    first = await supervisor(schema_read)
    again = await supervisor(schema_read)
    assert first is again
    assert isinstance(served.built, Served) and served.built.graph is first
    assert first.checkpointer is None  # the dev server brings its own
