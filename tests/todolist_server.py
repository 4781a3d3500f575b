"""``turnplan mcp --transport http`` in a subprocess, for the tests that drive it."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
COMMAND = [sys.executable, "-m", "agent.app.cli", "mcp"]


class HttpServer:
    """``turnplan mcp --transport http`` in a subprocess; its stderr collected line by line."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.log: list[str] = []
        self.url = ""
        self._changed = asyncio.Event()
        self._ended = False

    async def read_log(self) -> None:
        assert self.process.stderr is not None
        async for line in self.process.stderr:
            self.log.append(line.decode().rstrip())
            self._changed.set()
        self._ended = True
        self._changed.set()

    async def wait_for_log(self, text: str) -> str:
        """The first line of the server's log containing ``text``, once it is there."""
        async with asyncio.timeout(60):  # a hang guard only; nothing here measures time
            await self.wait_until(lambda log: any(text in line for line in log))
        return next(line for line in self.log if text in line)

    async def wait_until(self, condition: Callable[[list[str]], bool]) -> None:
        """Until ``condition`` holds for the log lines so far (the caller bounds the wait)."""
        while True:
            self._changed.clear()
            if condition(self.log):
                return
            assert not self._ended, f"server ended before the condition held: {self.log}"
            await self._changed.wait()

    async def stop(self) -> int:
        if self.process.returncode is None:
            self.process.send_signal(signal.SIGTERM)
        return await self.process.wait()


@asynccontextmanager
async def http_server(
    *options: str, env: Mapping[str, str] | None = None
) -> AsyncIterator[HttpServer]:
    """The server on a free port; ``env`` adds to this process's environment (from which any
    ``TURNPLAN_AUTH_TOKENS`` of the machine is removed)."""
    environment = {k: v for k, v in os.environ.items() if k != "TURNPLAN_AUTH_TOKENS"}
    process = await asyncio.create_subprocess_exec(
        *COMMAND,
        "--transport",
        "http",
        "--port",
        "0",
        *options,
        cwd=REPO,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        env={**environment, **(env or {})},
    )
    server = HttpServer(process)
    reader = asyncio.create_task(server.read_log())
    try:
        banner = await server.wait_for_log("Todolist MCP server (streamable HTTP): ")
        server.url = banner.rsplit(" ", 1)[1]
        yield server
    finally:
        await server.stop()
        await reader
