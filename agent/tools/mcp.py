"""Tools of MCP servers named in settings, bound to the supervisor as domain tools.

``TURNPLAN_MCP_SERVERS`` names a JSON file of servers in the format langchain-mcp-adapters'
``MultiServerMCPClient`` takes (``{"todolist": {"transport": "stdio", "command": "turnplan",
"args": ["mcp"]}}``). Their tools are listed once per process with the adapters and bound beside
the built-in ones.

Sessions: many MCP servers keep state per session (seed 001's todo list is "one per session").
The adapters' default, a new session per call, would forget that state between two calls, and
one shared session would let every conversation see every other's state. So each conversation
gets its own session per server, opened on its first call and kept while the event loop runs
(a server process keeps a conversation's session across turns; a script's ``asyncio.run`` ends
them with the loop). The adapters' interceptor hook routes each call to its conversation's
session. A server that cannot start is logged with its name and reason and left out; the rest
of the graph works, and it is tried again on a later turn.

Processes: a stdio server is started through ``agent.child_process``'s launcher, so it gets
SIGTERM when this process dies, even by SIGKILL (its stdin closing is the polite ending, which a
server may ignore). With a ``stderr_dir``, each stdio server's stderr is appended to
``<stderr_dir>/mcp-<server>.log`` instead of this process's stderr (``turnplan run`` uses
``.turnplan/logs``, so a server's log lines do not mix into the turn's output).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import time
import weakref
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_core.tools import BaseTool

from agent.child_process import guarded
from agent.errors import ConfigurationError, ErrorCode, ToolFailure
from storage.loop_shutdown import call_at_loop_shutdown

if TYPE_CHECKING:  # imported when a server is first listed: `mcp` takes ~0.5 s to import
    from langchain_mcp_adapters.client import MultiServerMCPClient
    from langchain_mcp_adapters.interceptors import MCPToolCallRequest, MCPToolCallResult
    from langchain_mcp_adapters.sessions import Connection, StdioConnection
    from mcp import ClientSession
    from mcp.types import CallToolResult

    McpHandler = Callable[[MCPToolCallRequest], Awaitable[MCPToolCallResult]]

logger = logging.getLogger("agent.tools")

MCP_SERVERS_ENV = "TURNPLAN_MCP_SERVERS"
TRANSPORTS = frozenset({"stdio", "sse", "http", "streamable_http", "streamable-http", "websocket"})
START_TIMEOUT = 30.0
"""Seconds a server may take to start and list its tools before it is given up for this turn."""
CALL_TIMEOUT = timedelta(seconds=120)
"""How long one tool call may wait for its result."""
RETRY_AFTER = 30.0
"""Seconds before a server that failed to start is tried again."""
SESSIONS_PER_SERVER = 32
"""Conversations holding an open session to one server in one event loop; the least recently
used one is closed beyond that."""


def read_server_settings(path: str | Path) -> dict[str, Connection]:
    """The servers of a settings file, checked enough to name what is wrong in it."""
    file = Path(path).expanduser()
    try:
        payload = json.loads(file.read_text(encoding="utf-8"))
    except OSError as error:
        raise ConfigurationError(
            f"{MCP_SERVERS_ENV}={path}: cannot read the MCP servers file ({error.strerror})."
        ) from None
    except ValueError as error:
        raise ConfigurationError(
            f"{MCP_SERVERS_ENV}={path}: the MCP servers file is not valid JSON ({error})."
        ) from None
    if not isinstance(payload, dict):
        raise ConfigurationError(
            f"{MCP_SERVERS_ENV}={path}: expected a JSON object of servers by name, "
            f'like {{"todolist": {{"transport": "stdio", "command": "turnplan", '
            f'"args": ["mcp"]}}}}.'
        )
    servers: dict[str, Connection] = {}
    for name, connection in payload.items():
        transport = connection.get("transport") if isinstance(connection, dict) else None
        if transport not in TRANSPORTS:
            raise ConfigurationError(
                f'{MCP_SERVERS_ENV}={path}: server {name!r} needs a "transport", one of '
                f"{', '.join(sorted(TRANSPORTS))}."
            )
        servers[name] = connection
    return servers


def _servers_from_environment() -> dict[str, Connection]:
    """The servers ``TURNPLAN_MCP_SERVERS`` names; a file that cannot be used is logged (the
    graph runs on without MCP tools until the process restarts with it fixed)."""
    path = os.environ.get(MCP_SERVERS_ENV, "").strip()
    if not path:
        return {}
    try:
        return read_server_settings(path)
    except ConfigurationError as error:
        logger.error("%s No MCP tools are bound.", error)
        return {}


def stderr_log_path(stderr_dir: Path, server: str) -> Path:
    """Where a stdio server's stderr goes: ``mcp-<server>.log``, the name made safe for a file;
    absolute, because the server may run in another working directory (its ``cwd``)."""
    return stderr_dir.absolute() / f"mcp-{re.sub(r'[^A-Za-z0-9_.-]', '_', server)}.log"


def guard_stdio_servers(
    servers: Mapping[str, Connection], stderr_dir: Path | None = None
) -> dict[str, Connection]:
    """The connections with every stdio command behind ``agent.child_process``'s launcher: the
    server ends when this process ends, and its stderr goes to a log file under ``stderr_dir``
    when one is given. Other transports are returned as they are."""
    guarded_servers: dict[str, Connection] = {}
    for name, connection in servers.items():
        if connection["transport"] == "stdio":
            log = stderr_log_path(stderr_dir, name) if stderr_dir is not None else None
            command = guarded([connection["command"], *connection["args"]], stderr_log=log)
            stdio: StdioConnection = {**connection, "command": command[0], "args": command[1:]}
            connection = stdio
        guarded_servers[name] = connection
    return guarded_servers


def conversation_of(runtime: object) -> str:
    """The conversation a call runs in, from the graph state of its injected runtime."""
    state = getattr(runtime, "state", None)
    value = state.get("conversationId") if isinstance(state, dict) else None
    if value is None:
        value = getattr(state, "conversationId", "")
    return value if isinstance(value, str) else ""


class _HeldSession:
    """One MCP session kept open by a task of its own.

    The MCP client's streams live in anyio task groups, which must be left by the task that
    entered them; a holder task enters, hands out the session, and leaves when told to (or when
    ``asyncio.run`` cancels it at the end of the loop).
    """

    def __init__(self, client: MultiServerMCPClient, server: str) -> None:
        self._client = client
        self._server = server
        self._ready: asyncio.Future[ClientSession] = asyncio.get_running_loop().create_future()
        self._closing = asyncio.Event()
        self._task = asyncio.create_task(self._hold(), name=f"mcp-session-{server}")

    async def _hold(self) -> None:
        try:
            async with self._client.session(self._server) as session:
                self._ready.set_result(session)
                await self._closing.wait()
        except BaseException as error:  # reported to the waiting caller
            if not self._ready.done():
                if isinstance(error, asyncio.CancelledError):
                    self._ready.cancel()
                else:
                    self._ready.set_exception(error)
            elif not isinstance(error, asyncio.CancelledError | Exception):
                raise
            logger.debug("MCP session to %s ended: %r", self._server, error)

    async def session(self) -> ClientSession:
        return await asyncio.wait_for(asyncio.shield(self._ready), START_TIMEOUT)

    @property
    def alive(self) -> bool:
        return not self._task.done()

    async def close(self) -> None:
        """End the session; one that never started (a server hanging in its handshake) is
        cancelled. ``asyncio.wait`` leaves a cancellation of the caller itself to the caller."""
        self._closing.set()
        if not self._ready.done():
            self._task.cancel()
        await asyncio.wait([self._task])
        if self._ready.done() and not self._ready.cancelled():
            self._ready.exception()  # retrieved: the caller was told through session()


class ConversationSessions:
    """The open sessions of one event loop, by (server, conversation)."""

    def __init__(self, client: MultiServerMCPClient) -> None:
        self._client = client
        self._held: OrderedDict[tuple[str, str], _HeldSession] = OrderedDict()

    async def call(self, request: MCPToolCallRequest, conversation: str) -> CallToolResult:
        key = (request.server_name, conversation)
        held = self._held.get(key)
        if held is None or not held.alive:
            held = self._held[key] = _HeldSession(self._client, request.server_name)
            await self._evict(request.server_name)
        self._held.move_to_end(key)
        try:
            session = await held.session()
            return await session.call_tool(
                request.name, request.args, read_timeout_seconds=CALL_TIMEOUT
            )
        except Exception:
            self._held.pop(key, None)
            await held.close()
            raise

    async def _evict(self, server: str) -> None:
        keys = [key for key in self._held if key[0] == server]
        for key in keys[: max(0, len(keys) - SESSIONS_PER_SERVER)]:
            await self._held.pop(key).close()

    @property
    def open_sessions(self) -> int:
        return sum(1 for held in self._held.values() if held.alive)

    async def close(self) -> None:
        held, self._held = list(self._held.values()), OrderedDict()
        for one in held:
            await one.close()


class McpTools:
    """The tools of the configured MCP servers, and the sessions their calls run in.

    ``servers``: connections by server name; None reads ``TURNPLAN_MCP_SERVERS`` on first use
    (unset: no MCP tools). Listing happens once per process and server; each event loop keeps
    its own sessions (see the module docstring). ``stderr_dir``: where stdio servers' stderr
    goes (``mcp-<server>.log``); None leaves it on this process's stderr.
    """

    def __init__(
        self, servers: Mapping[str, Connection] | None = None, *, stderr_dir: Path | None = None
    ) -> None:
        self._servers = dict(servers) if servers is not None else None
        self._stderr_dir = stderr_dir
        self._tools: dict[str, list[BaseTool]] = {}
        self._failed: dict[str, float] = {}
        self._client: MultiServerMCPClient | None = None
        self._sessions: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, ConversationSessions
        ] = weakref.WeakKeyDictionary()
        self._loop_hooks: dict[asyncio.AbstractEventLoop, Any] = {}
        self._locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary()
        )

    async def tools(self) -> list[BaseTool]:
        """Every tool of every server that started, in settings order."""
        client = await self._ensure_client()
        if client is None:
            return []
        loop = asyncio.get_running_loop()
        lock = self._locks.setdefault(loop, asyncio.Lock())
        async with lock:
            for server in client.connections:
                if server not in self._tools and self._may_try(server):
                    await self._list(client, server)
        return [tool for server in client.connections for tool in self._tools.get(server, [])]

    @property
    def failed_servers(self) -> list[str]:
        """Servers whose last start failed (their tools are not bound)."""
        return sorted(self._failed)

    def open_sessions(self) -> int:
        """Open conversation sessions on the running loop."""
        sessions = self._sessions.get(asyncio.get_running_loop())
        return sessions.open_sessions if sessions else 0

    async def _ensure_client(self) -> MultiServerMCPClient | None:
        if self._client is None:
            if self._servers is None:
                self._servers = await asyncio.to_thread(_servers_from_environment)
            if not self._servers:
                return None
            from langchain_mcp_adapters.client import MultiServerMCPClient

            # Guarded here, on first use, so the launcher names the process that starts the
            # servers as their parent.
            self._client = MultiServerMCPClient(
                guard_stdio_servers(self._servers, self._stderr_dir),
                tool_interceptors=[self._route],
            )
        return self._client

    def _may_try(self, server: str) -> bool:
        failed_at = self._failed.get(server)
        return failed_at is None or time.monotonic() - failed_at >= RETRY_AFTER

    async def _list(self, client: MultiServerMCPClient, server: str) -> None:
        try:
            tools = await asyncio.wait_for(client.get_tools(server_name=server), START_TIMEOUT)
        except Exception as error:  # any failure leaves this server out
            self._failed[server] = time.monotonic()
            logger.error(
                "MCP server %r could not start or list its tools, so its tools are not bound "
                "(tried again in %.0f s): %s%s",
                server,
                RETRY_AFTER,
                _reason(error),
                self._stderr_hint(client, server),
            )
            return
        self._failed.pop(server, None)
        self._tools[server] = tools
        logger.info("MCP server %r: %d tools bound", server, len(tools))

    def _stderr_hint(self, client: MultiServerMCPClient, server: str) -> str:
        """Where to read what a stdio server printed, when it does not print to our stderr."""
        if self._stderr_dir is None or client.connections[server]["transport"] != "stdio":
            return ""
        return f" (its stderr: {stderr_log_path(self._stderr_dir, server)})"

    async def _route(self, request: MCPToolCallRequest, handler: McpHandler) -> MCPToolCallResult:
        """Send the call to its conversation's session (outside a conversation: one session
        for the call alone, as the adapters do)."""
        conversation = conversation_of(request.runtime)
        try:
            if not conversation:
                return await handler(request)
            return await (await self._loop_sessions()).call(request, conversation)
        except (asyncio.CancelledError, ToolFailure):
            raise
        except Exception as error:  # the transport's failure, explained
            logger.warning(
                "MCP server %r failed on %s (conversation %s): %s",
                request.server_name,
                request.name,
                conversation,
                _reason(error),
            )
            raise ToolFailure(
                ErrorCode.MCP_ERROR,
                f"The MCP server {request.server_name!r} could not run {request.name}: "
                f"{_reason(error)}.",
                "Try once more; if it fails again, tell the user this tool is unavailable.",
            ) from None

    async def _loop_sessions(self) -> ConversationSessions:
        loop = asyncio.get_running_loop()
        sessions = self._sessions.get(loop)
        if sessions is None:
            assert self._client is not None
            sessions = self._sessions[loop] = ConversationSessions(self._client)

            async def close() -> None:
                self._loop_hooks.pop(loop, None)
                await sessions.close()

            self._loop_hooks[loop] = await call_at_loop_shutdown(close)
        return sessions

    async def aclose(self) -> None:
        """Close the running loop's sessions now (a server's shutdown)."""
        loop = asyncio.get_running_loop()
        sessions = self._sessions.pop(loop, None)
        hook = self._loop_hooks.pop(loop, None)
        if hook is not None:
            await hook.aclose()
        elif sessions is not None:
            await sessions.close()


def _reason(error: BaseException) -> str:
    """One line for the log and the model: exception groups are unwrapped to their cause."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    if isinstance(error, TimeoutError):
        return "no answer in time"
    text = str(error).strip().splitlines()[0] if str(error).strip() else ""
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
