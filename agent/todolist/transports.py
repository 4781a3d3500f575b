"""How a client reaches the todolist server: stdio (one session per process) or streamable HTTP.

Wiring only: the tools and the lists live in ``mcp_server`` and ``sessions``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Iterator
from typing import Final

import anyio
import uvicorn
from mcp.server.stdio import stdio_server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from sse_starlette.sse import AppStatus
from starlette.applications import Starlette
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from agent.todolist.mcp_server import TodoListServer

MCP_PATH: Final = "/mcp"
DEFAULT_IDLE_TIMEOUT: Final = 30 * 60.0
"""Seconds without a request after which an HTTP session ends and its list is forgotten (the
SDK's own default), so clients that vanish without closing their session do not pile up."""

LOOPBACK_HOSTS: Final = ("127.0.0.1", "localhost", "::1")


async def serve_stdio(server: TodoListServer) -> None:
    """Serve the one session on stdin/stdout until the client closes stdin."""
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def listen(host: str, port: int) -> socket.socket:
    """The listening socket, bound before serving so a taken port is a clear ``OSError`` and
    port 0 gives a free port the caller can print."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    return socket.create_server((host, port), family=family)


def endpoint_url(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://{f'[{host}]' if ':' in host else host}:{port}{MCP_PATH}"


async def serve_http(
    server: TodoListServer,
    sock: socket.socket,
    *,
    stop: asyncio.Event,
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
) -> None:
    """Serve streamable HTTP on ``sock`` (path ``/mcp``) until ``stop`` is set.

    On stop, open SSE streams are ended first (sse-starlette's documented manual switch): each is
    a response that never finishes on its own, and uvicorn waits for every response before it
    stops. Sessions still open then end with the session manager, and their lists with them.
    (Ending the sessions first instead makes the SDK log a traceback for every open stream.)
    """
    host = sock.getsockname()[0]
    logging.getLogger("mcp.server.streamable_http").addFilter(_closed_stream_traceback)
    manager = StreamableHTTPSessionManager(
        app=server,
        security_settings=_security_settings(host),
        session_idle_timeout=idle_timeout,
    )
    app = Starlette(routes=[Route(MCP_PATH, endpoint=_SessionEndpoint(manager))])
    http = _Uvicorn(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off"))
    async with manager.run():
        serving = asyncio.create_task(http.serve(sockets=[sock]))
        stopping = asyncio.create_task(stop.wait())
        await asyncio.wait({serving, stopping}, return_when=asyncio.FIRST_COMPLETED)
        stopping.cancel()
        logging.getLogger("uvicorn.error").addFilter(_cut_stream_notice)
        AppStatus.should_exit = True
        http.should_exit = True
        await serving


class _SessionEndpoint:
    """The session manager as an ASGI endpoint (Starlette wraps plain functions as request
    handlers, which would buffer the SSE streams)."""

    def __init__(self, manager: StreamableHTTPSessionManager) -> None:
        self.manager = manager

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.manager.handle_request(scope, receive, send)


def _closed_stream_traceback(record: logging.LogRecord) -> bool:
    """False for the traceback mcp 1.30 logs whenever a session ends while its client's GET
    stream is open, which is every client DELETE: ``terminate()`` closes the stream under the
    SSE writer that is reading it (python-sdk issue 2150). The session ended as asked."""
    error = record.exc_info[1] if record.exc_info else None
    return not (
        record.getMessage() == "Error in standalone SSE writer"
        and isinstance(error, anyio.ClosedResourceError)
    )


def _cut_stream_notice(record: logging.LogRecord) -> bool:
    """False for the error uvicorn logs for each SSE stream that the stop ends unfinished: ending
    them is the point, and the client sees the connection close either way."""
    return record.getMessage() != "ASGI callable returned without completing response."


class _Uvicorn(uvicorn.Server):
    """uvicorn without its signal handling: it re-raises SIGINT after a graceful stop (a
    traceback on Ctrl-C); the command handles signals by setting the ``stop`` event."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def _security_settings(host: str) -> TransportSecuritySettings | None:
    """On a loopback address, refuse requests whose Host or Origin names another site (DNS
    rebinding from a browser), as the SDK's FastMCP does; elsewhere the operator decides."""
    if host not in LOOPBACK_HOSTS:
        return None
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
        allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
    )
