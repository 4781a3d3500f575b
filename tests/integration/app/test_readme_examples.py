"""README's and docs' examples run exactly as printed, each as a script in a fresh folder.

Each example is the fenced block after an ``<!-- example: NAME -->`` line in README.md or a file
of docs/ (tests/unit/app/test_docs_code_blocks.py leaves these blocks to this file). The
model behind them is the scripted OpenAI-compatible server (``OPENAI_BASE_URL``), so the
examples' own ``"openai:gpt-4o-mini"`` and ``ChatOpenAI(...)`` speak real HTTP to it. The one
change made to a block: the SDK examples' URL becomes the one the dev server printed, which is
what README tells a reader to do when port 2024 is taken. The JavaScript one runs under node
with the web UI's ``@langchain/langgraph-sdk`` (``npm ci`` in ui/; skipped without it).
"""

from __future__ import annotations

import re
import shutil
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from tests.dev_server import DevServer, readme_environment
from tests.http_oracle import HttpPlanOracle
from tests.scripted_openai import ScriptedOpenAIServer

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
README_DEV_URL = "http://127.0.0.1:2024"
TIMEOUT = 180


def readme_example(name: str, lang: str = "python") -> str:
    """The ``lang`` code block README or docs/ marks ``<!-- example: name -->``."""
    pattern = rf"<!-- example: {re.escape(name)} -->\n```{lang}\n(.*?)```"
    found = [block for path in DOCS for block in re.findall(pattern, path.read_text(), re.S)]
    assert len(found) == 1, f"README and docs have {len(found)} blocks marked example: {name}"
    return str(found[0])


def run_script(source: str, folder: Path, model: ScriptedOpenAIServer) -> list[str]:
    """Run ``source`` as a script in ``folder`` with only model settings in the environment
    (the scripted server; no ``TURNPLAN_*`` of the machine); its printed lines."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "example.py"
    script.write_text(source)
    env = readme_environment(model)
    env.pop("TURNPLAN_MODEL")  # the examples name their model themselves
    env["TURNPLAN_TASKS_DIR"] = str(folder)
    done = subprocess.run(
        [sys.executable, "-W", "error", str(script)],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.splitlines()


def add_task(title: str) -> tuple[str, dict[str, Any]]:
    return ("add_task", {"title": title})


def tasks_in(database: Path) -> list[tuple[str, str]]:
    with closing(sqlite3.connect(database)) as connection:
        return connection.execute("SELECT user_id, title FROM tasks ORDER BY title").fetchall()


def test_the_python_example_runs_as_printed(
    tmp_path: Path, scripted_openai: ScriptedOpenAIServer
) -> None:
    scripted_openai.respond_with(HttpPlanOracle(["eggs", "milk"], add_task, answer="Added."))

    lines = run_script(readme_example("python"), tmp_path, scripted_openai)

    assert lines == [
        "planned eggs",
        "planned milk",
        "started eggs",
        "completed eggs",
        "started milk",
        "completed milk",
        "Added. answered",
    ]
    assert tasks_in(tmp_path / "my.db") == [("alice", "eggs"), ("alice", "milk")]


def test_the_middleware_example_runs_as_printed(
    tmp_path: Path, scripted_openai: ScriptedOpenAIServer
) -> None:
    scripted_openai.respond_with(HttpPlanOracle(["eggs", "milk"], add_task, answer="Added."))

    lines = run_script(readme_example("middleware"), tmp_path, scripted_openai)

    assert lines == ["completed eggs", "completed milk", "answered"]
    with closing(sqlite3.connect(tmp_path / "my.db")) as connection:
        rows = connection.execute("SELECT title, status FROM turn_todos ORDER BY title").fetchall()
        evidence = connection.execute('SELECT "toolName", result FROM todo_evidence').fetchall()
    assert rows == [("eggs", "completed"), ("milk", "completed")]
    assert sorted(evidence) == [("add_task", "added eggs"), ("add_task", "added milk")]


def test_the_subgraph_example_runs_as_printed(
    tmp_path: Path, scripted_openai: ScriptedOpenAIServer
) -> None:
    scripted_openai.respond_with(HttpPlanOracle(["eggs", "milk"], add_task, answer="Added."))

    lines = run_script(readme_example("subgraph"), tmp_path, scripted_openai)

    assert lines[-1] == "Added."
    assert [line for line in lines if line.startswith("completed")] == [
        "completed eggs",
        "completed milk",
    ]
    # The user comes from the example's own context (AppContext.account), per run.
    assert tasks_in(tmp_path / "my.db") == [("alice", "eggs"), ("alice", "milk")]


def test_the_sdk_example_runs_as_printed_against_the_dev_server(
    tmp_path: Path, dev_server: DevServer
) -> None:
    titles = ["one", "two", "three"]
    dev_server.model.respond_with(HttpPlanOracle(titles, add_task, answer="Three added."))
    source = readme_example("sdk")
    assert source.count(README_DEV_URL) == 1
    lines = run_script(
        source.replace(README_DEV_URL, dev_server.url), tmp_path / "client", dev_server.model
    )

    custom = [line for line in lines if line.startswith("custom ")]
    assert len(custom) == 3 * len(titles)  # planned, started, completed
    assert lines[-1].startswith("values ") and "'Three added.'" in lines[-1]
    assert "'turnStatus': 'answered'" in lines[-1]
    assert tasks_in(dev_server.database) == [("alice", t) for t in sorted(titles)]


UI_MODULES = REPO / "ui" / "node_modules"


@pytest.mark.skipif(
    shutil.which("node") is None or not (UI_MODULES / "@langchain" / "langgraph-sdk").is_dir(),
    reason="needs node and the JS SDK: `cd ui && npm ci`",
)
def test_the_js_sdk_example_runs_as_printed_against_the_dev_server(
    tmp_path: Path, dev_server: DevServer
) -> None:
    titles = ["one", "two", "three"]
    dev_server.model.respond_with(HttpPlanOracle(titles, add_task, answer="Three added."))
    source = readme_example("js_sdk", "js")
    assert source.count(README_DEV_URL) == 1
    client = tmp_path / "client"
    client.mkdir()
    (client / "node_modules").symlink_to(UI_MODULES)
    script = client / "example.mjs"
    script.write_text(source.replace(README_DEV_URL, dev_server.url))
    done = subprocess.run(
        ["node", str(script)], cwd=client, capture_output=True, text=True, timeout=TIMEOUT
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()

    custom = [line for line in lines if line.startswith("custom ")]
    assert len(custom) == 3 * len(titles)  # planned, started, completed
    assert "turnStatus: 'answered'" in done.stdout.rsplit("values ", 1)[1]
    assert tasks_in(dev_server.database) == [("alice", t) for t in sorted(titles)]
