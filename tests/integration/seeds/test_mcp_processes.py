"""MCP servers as ``turnplan run`` leaves them: stdio servers end with turnplan, even when it is
killed, their stderr stays out of the turn's output, and HTTP sessions are closed when the run
ends (not left to the server's 30-minute idle timeout)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import psutil
import pytest

from agent.tools.mcp import McpTools
from tests.http_oracle import HttpPlanOracle
from tests.processes import wait_until_gone
from tests.scripted_openai import ScriptedOpenAIServer
from tests.todolist_server import http_server

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's"
    ),
]

REPO = Path(__file__).resolve().parents[3]
TURNPLAN = Path(sys.executable).with_name("turnplan")
NOTES = REPO / "tests" / "mcp_notes_server.py"
STDERR_LINE = "notes server: a line on stderr"
NOTES_WITH_STDERR = textwrap.dedent(
    f"""
    import runpy, sys, threading, time
    print({STDERR_LINE!r}, file=sys.stderr, flush=True)
    if sys.argv[1:] == ["--linger"]:
        # A non-daemon thread: the process outlives its closed stdin, as a server with a stuck
        # worker does. Only a signal ends it.
        threading.Thread(target=time.sleep, args=(600,)).start()
    runpy.run_path({str(NOTES)!r}, run_name="__main__")
    """
)
HOLDER = textwrap.dedent(
    """
    import asyncio, json, sys
    from pathlib import Path
    from langchain_mcp_adapters.client import MultiServerMCPClient
    from agent.tools.mcp import guard_stdio_servers

    async def main():
        servers = guard_stdio_servers(json.loads(sys.argv[1]), Path(sys.argv[2]))
        async with MultiServerMCPClient(servers).session("notes") as session:
            await session.list_tools()
            print("session open", flush=True)
            await asyncio.sleep(600)

    asyncio.run(main())
    """
)


def sessions(log: list[str]) -> tuple[int, int]:
    """Sessions the todolist server logged as opened, and as closed."""
    opened = sum("todolist session opened" in line for line in log)
    return opened, sum("todolist session closed" in line for line in log)


def stdio_notes_server(*options: str) -> dict[str, object]:
    """The notes server, printing a line on stderr first; ``--linger``: it ignores the end of
    its stdin."""
    args = ["-c", NOTES_WITH_STDERR, *options]
    return {"transport": "stdio", "command": sys.executable, "args": args}


def test_a_lingering_stdio_server_ends_when_its_client_is_killed(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    client_stderr = tmp_path / "client-stderr.txt"
    servers = json.dumps({"notes": stdio_notes_server("--linger")})
    with (
        client_stderr.open("w") as stderr,
        subprocess.Popen(
            [sys.executable, "-c", HOLDER, servers, str(logs)],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        ) as client,
    ):
        assert client.stdout is not None
        assert client.stdout.readline().strip() == "session open"
        [server] = psutil.Process(client.pid).children()
        client.send_signal(signal.SIGKILL)
        client.wait(timeout=30)

    try:
        assert wait_until_gone(server.pid), "the stdio server outlived the killed client"
    finally:
        if not wait_until_gone(server.pid, 0):
            server.kill()
    assert STDERR_LINE not in client_stderr.read_text()
    assert (logs / "mcp-notes.log").read_text().splitlines()[0] == STDERR_LINE


async def test_turnplan_run_closes_its_mcp_sessions_and_keeps_server_logs_apart(
    scripted_openai: ScriptedOpenAIServer, tmp_path: Path
) -> None:
    scripted_openai.respond_with(
        HttpPlanOracle(
            ["Remember milk", "Write the checklist"],
            lambda title: (
                ("remember", {"text": "milk"})
                if title == "Remember milk"
                else (
                    "todolist__set",
                    {"todos": [{"content": "Pack", "status": "pending", "activeForm": "Packing"}]},
                )
            ),
        )
    )
    async with http_server() as todolist:
        settings = tmp_path / "mcp.json"
        settings.write_text(
            json.dumps(
                {
                    "notes": stdio_notes_server(),
                    "todolist": {"transport": "streamable_http", "url": todolist.url},
                }
            )
        )
        env = {
            **os.environ,
            "OPENAI_BASE_URL": scripted_openai.base_url,
            "OPENAI_API_KEY": "test-key",
            "TURNPLAN_MCP_SERVERS": str(settings),
        }
        run = await asyncio.create_subprocess_exec(
            str(TURNPLAN),
            "run",
            "--model",
            "openai:scripted",
            "--plan",
            "always",
            "remember milk and write a checklist",
            cwd=tmp_path,
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        async with asyncio.timeout(120):
            output = (await run.communicate())[0].decode()

        assert run.returncode == 0, output
        assert "✓ completed Write the checklist" in output
        # Listing the tools opens and closes a session; the conversation's session (the
        # checklist) is the second one, and the run's end must close it (the client's DELETE)
        # rather than leave it to the server's idle timeout, 30 minutes later.
        async with asyncio.timeout(10):
            await todolist.wait_until(lambda log: sessions(log) == (2, 2))
    assert STDERR_LINE not in output
    log = tmp_path / ".turnplan" / "logs" / "mcp-notes.log"
    assert STDERR_LINE in log.read_text()


async def test_a_server_that_cannot_start_is_reported_with_its_log_file(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    failing = {
        "transport": "stdio",
        "command": sys.executable,
        "args": ["-c", "import sys; sys.exit('notes: cannot read notes.toml')"],
    }
    mcp = McpTools({"notes": failing}, stderr_dir=tmp_path / "logs")

    assert await mcp.tools() == []

    log = tmp_path / "logs" / "mcp-notes.log"
    assert log.read_text() == "notes: cannot read notes.toml\n"
    assert "MCP server 'notes' could not start" in caplog.text
    assert f"(its stderr: {log})" in caplog.text
