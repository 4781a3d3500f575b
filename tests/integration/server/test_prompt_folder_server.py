"""``TURNPLAN_PROMPTS_DIR`` on ``langgraph dev``: the served graph reads the deployment's own
prompt files first, the shipped ones for the rest (docs/prompts.md)."""

from __future__ import annotations

from pathlib import Path

import pytest
from langgraph_sdk import get_client

from tests.dev_server import copy_project, run_dev_server
from tests.scripted_openai import ScriptedOpenAIServer, text

pytestmark = pytest.mark.integration


async def test_the_served_graph_sends_the_deployments_own_prompt(
    tmp_path: Path, scripted_openai: ScriptedOpenAIServer
) -> None:
    folder = copy_project(tmp_path / "project")
    (folder / "my-prompts").mkdir()
    (folder / "my-prompts" / "supervisor.md").write_text("You are Acme's assistant.\n")
    scripted_openai.reply(text("Hello from Acme."))

    # A relative folder, as docs/prompts.md shows it: relative to where the server starts.
    with (
        run_dev_server(
            folder, scripted_openai, extra_env={"TURNPLAN_PROMPTS_DIR": "my-prompts"}
        ) as server,
    ):
        async with get_client(url=server.url) as client:
            thread = await client.threads.create()
            await client.runs.wait(
                thread["thread_id"],
                "supervisor",
                input={"messages": [{"role": "user", "content": "hello"}]},
            )
            state = await client.threads.get_state(thread["thread_id"])

    assert state["values"]["messages"][-1]["content"] == "Hello from Acme."
    (request,) = scripted_openai.requests
    system = request["messages"][0]
    assert system["role"] == "system"
    assert system["content"].startswith("You are Acme's assistant.")
    assert "You are turnplan" not in system["content"]
    assert "## Task planning and execution" in system["content"]  # the shipped planning.md
