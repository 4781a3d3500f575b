"""The web UI (``ui/``) can be used with a server that has ``TURNPLAN_AUTH_TOKENS``: the SDK
client it builds (``ui/src/connection.ts``) sends the Token field's value as a bearer token.

The UI's own module is bundled with the esbuild of ``ui/node_modules`` and run by node against
``langgraph dev`` with two tokens: with Alice's token the UI's request is served and what it
creates is hers; with the field empty the server refuses it. Needs ``npm ci`` in ``ui/``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient

from tests.dev_server import REPO, DevServer, copy_project, run_dev_server
from tests.scripted_openai import ScriptedOpenAIServer

UI = REPO / "ui"
ESBUILD = UI / "node_modules" / ".bin" / "esbuild"
TOKENS = {"tok-alice": "alice", "tok-bob": "bob"}

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        not ESBUILD.exists() or shutil.which("node") is None,
        reason="needs node and `npm ci` in ui/ (the UI's own SDK client is run by node)",
    ),
]

UI_CALL = """
import { makeClient } from "./connection.mjs";
const [url, token] = process.argv.slice(2);
try {
  const thread = await makeClient(url, token).threads.create();
  console.log(JSON.stringify({ ok: true, thread: thread.thread_id }));
} catch (error) {
  console.log(JSON.stringify({ ok: false, error: String(error) }));
}
"""


@pytest.fixture
def server(tmp_path: Path, scripted_openai: ScriptedOpenAIServer) -> Iterator[DevServer]:
    folder = copy_project(tmp_path / "project")
    env = {"TURNPLAN_AUTH_TOKENS": json.dumps(TOKENS)}
    with run_dev_server(folder, scripted_openai, extra_env=env) as running:
        yield running


@pytest.fixture
def ui_client(tmp_path: Path) -> Path:
    """The UI's ``connection.ts`` bundled for node, with a script making one UI request."""
    bundle = tmp_path / "ui-client"
    bundle.mkdir()
    subprocess.run(
        [
            str(ESBUILD),
            str(UI / "src" / "connection.ts"),
            "--bundle",
            "--platform=node",
            "--format=esm",
            f"--outfile={bundle / 'connection.mjs'}",
            "--log-level=error",
        ],
        check=True,
        cwd=UI,
        timeout=120,
    )
    (bundle / "call.mjs").write_text(UI_CALL)
    return bundle / "call.mjs"


def ui_creates_a_thread(script: Path, url: str, token: str) -> dict[str, Any]:
    done = subprocess.run(
        ["node", str(script), url, token], capture_output=True, text=True, timeout=120, check=True
    )
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


@pytest.fixture
async def alice(server: DevServer) -> AsyncIterator[LangGraphClient]:
    client = get_client(url=server.url, headers={"Authorization": "Bearer tok-alice"})
    async with client:
        yield client


async def test_the_ui_sends_the_token_field_as_a_bearer_token(
    server: DevServer, ui_client: Path, alice: LangGraphClient
) -> None:
    served = ui_creates_a_thread(ui_client, server.url, " tok-alice ")
    assert served["ok"], served
    thread = await alice.threads.get(served["thread"])
    assert thread["metadata"]["owner"] == "alice"

    refused = ui_creates_a_thread(ui_client, server.url, "")
    assert not refused["ok"]
    assert "401" in refused["error"], refused
