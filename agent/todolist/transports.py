"""How a client reaches the todolist server: stdio (one session per process) or streamable HTTP.

Wiring only: the tools and the lists live in ``mcp_server`` and ``sessions``.

Over HTTP a session id is a capability: whoever holds it reads and replaces that session's
list. With ``TURNPLAN_AUTH_TOKENS`` set (the same ``{"<token>": "<user>"}`` the LangGraph server
reads, ``agent.auth``), every request needs ``Authorization: Bearer <token>`` (401 without), and
the SDK's session manager binds each session to the user whose token opened it: another user's
request naming that session id gets the 404 of a session that does not exist. Without tokens
the server is open, for one developer on a loopback address.

The session manager also caps what a client can make the server hold: ``MAX_SESSIONS`` open
sessions (one more: 503) and ``MAX_REQUEST_BYTES`` per request body (more: 413, before it is
parsed); the lists' own caps are in ``sessions`` and ``validation``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import socket
from collections.abc import Iterator, Mapping
from typing import Final

import anyio
import uvicorn
from mcp.server.auth.middleware.bearer_auth import BearerAuthBackend, RequireAuthMiddleware
from mcp.server.auth.provider import AccessToken
from mcp.server.stdio import stdio_server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from sse_starlette.sse import AppStatus
from starlette.applications import Starlette
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from agent.todolist.mcp_server import TodoListServer

MCP_PATH: Final = "/mcp"
DEFAULT_IDLE_TIMEOUT: Final = 30 * 60.0
"""Seconds without a request after which an HTTP session ends and its list is forgotten (the
SDK's own default), so clients that vanish without closing their session do not pile up."""

LOOPBACK_HOSTS: Final = ("127.0.0.1", "localhost", "::1")
MAX_SESSIONS: Final = 1_000
"""Open HTTP sessions at once (the SDK's default is 10,000); a request that would open one
more gets 503 until a session ends or idles out."""
MAX_REQUEST_BYTES: Final = 256 * 1024
"""Largest request body (the SDK's default is 4 MiB): room for the largest list a session may
keep (64 KiB of JSON) with escaping to spare; a larger body gets 413 before it is parsed."""


class KnownTokens:
    """The SDK's ``TokenVerifier`` over ``TURNPLAN_AUTH_TOKENS``: a known token is its user
    (the subject the session manager binds a session to)."""

    def __init__(self, tokens: Mapping[str, str]) -> None:
        self._tokens = dict(tokens)

    async def verify_token(self, token: str) -> AccessToken | None:
        # Every known token is compared in constant time, so timing tells nothing of them.
        user = None
        for known, owner in self._tokens.items():
            if hmac.compare_digest(known.encode(), token.strip().encode()):
                user = owner
        if user is None:
            return None
        return AccessToken(token=token, client_id=user, scopes=[], subject=user)


def require_tokens(app: ASGIApp, tokens: Mapping[str, str]) -> ASGIApp:
    """``app`` behind the SDK's bearer-token check (401 for a missing or unknown token); the
    authenticated user is what the session manager binds sessions to."""
    backend = BearerAuthBackend(KnownTokens(tokens))
    return AuthenticationMiddleware(RequireAuthMiddleware(app, required_scopes=[]), backend=backend)


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
    tokens: Mapping[str, str] | None = None,
) -> None:
    """Serve streamable HTTP on ``sock`` (path ``/mcp``) until ``stop`` is set.

    On stop, open SSE streams are ended first (sse-starlette's documented manual switch): each is
    a response that never finishes on its own, and uvicorn waits for every response before it
    stops. Sessions still open then end with the session manager, and their lists with them.
    (Ending the sessions first instead makes the SDK log a traceback for every open stream.)
    ``tokens``: bearer token -> user; when given, every request needs one (module docstring).
    """
    host = sock.getsockname()[0]
    logging.getLogger("mcp.server.streamable_http").addFilter(_closed_stream_traceback)
    manager = StreamableHTTPSessionManager(
        app=server,
        security_settings=_security_settings(host),
        session_idle_timeout=idle_timeout,
        max_request_body_size=MAX_REQUEST_BYTES,
        max_sessions=MAX_SESSIONS,
    )
    endpoint: ASGIApp = _SessionEndpoint(manager)
    if tokens:
        endpoint = require_tokens(endpoint, tokens)
    app = Starlette(routes=[Route(MCP_PATH, endpoint=endpoint)])
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
