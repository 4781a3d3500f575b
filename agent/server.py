"""What ``langgraph.json`` serves: the supervisor graph, behind a factory that checks the context.

The LangGraph server drops context keys that are not in the graph's context schema before the
graph sees them (``langgraph_api.stream``: "Filtering out context parameter ... not found in
context schema", logged at debug level), so a misspelt setting would silently fall back to its
default, while the same dict raises in Python. The server calls a graph factory with the run's
context before it filters it (``ServerRuntime.execution_runtime.context``), so the factory applies
the Python rule: a run whose context names an unknown key fails with an error naming it.

The graph is built when the server starts (``app``'s lifespan) or on its first access,
whichever comes first (``agent.app.served``), not when a module is imported: importing
turnplan stays cheap and does no I/O, and the build (prompt files read and checked, tools made)
runs in a thread, off the server's event loop. Every access after that gets the same graph;
for the accesses without a run (schemas, state reads and updates, drawing) there is no context
and nothing to check.

``app`` is served beside the API (``http.app`` in ``langgraph.json``) for its lifespan and one
guard. Lifespan: the graph is built when the server starts; when the server stops, MCP sessions
are closed (their stdio servers end), the embedded model server is stopped, and the database
engine is disposed on the server's own event loop, so SQLite checkpoints its write-ahead log
into the database file and leaves no ``-wal``
behind. Guard: ``langgraph dev`` (the in-memory runtime) serves routes of its own outside
authentication: ``/internal/truncate`` wipes every
thread, ``/internal/debug/thread/<id>`` returns any user's thread to anyone, ``/deploy`` starts a
LangSmith deployment. Middleware of ``app`` wraps every route the server has, so with
``TURNPLAN_AUTH_TOKENS`` set it refuses those (403) whoever asks: no user's token may wipe or
read everyone's threads. The routes ``app`` may add later are behind the authenticate handler
(``http.enable_custom_route_auth``). Origins: ``OriginGuard`` (``agent.origins``) refuses
state-changing requests a foreign web page may have sent, before any route (these included).

Size: ``RequestBodyCap`` caps every request body at ``MAX_REQUEST_BYTES`` (413 beyond it, before
the server reads it): the server parses and stores what a client posts (a run's input goes into
the thread's checkpoints before the graph can refuse it), so the caps on each input
(``agent.turn.run_input``, ``agent.turn.plan_edits``) need one on the whole request too.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager

from langgraph_sdk.runtime import ServerRuntime
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agent.app.served import served
from agent.auth import TOKENS_ENV, tokens_required
from agent.context import Context, check_context_keys
from agent.graph import SupervisorGraph
from agent.llm.chat_models import close_chat_models
from agent.llm.local_model import stop_shared_local_model_server
from agent.origins import OriginGuard


async def supervisor(runtime: ServerRuntime[Context]) -> SupervisorGraph:
    """The ``supervisor`` graph for one server access; refuses a run with unknown context keys.
    Async so that the first access builds the graph in a thread, not on the server's loop."""
    execution = runtime.execution_runtime
    if execution is not None and isinstance(execution.context, Mapping):
        check_context_keys(execution.context)
    built = served.built
    if built is None:
        built = await asyncio.to_thread(served.get)
    return built.graph


@asynccontextmanager
async def lifespan(_: Starlette) -> AsyncIterator[None]:
    """On startup, build the served graph (in a thread): a prompt folder that fails its check
    (docs/prompts.md) stops the server from starting, as a broken import did. On shutdown,
    close the MCP sessions, the database and the model clients of this loop, and stop the
    embedded model server if a run started it (``atexit`` would too, but only if the
    interpreter gets that far)."""
    await asyncio.to_thread(served.get)
    yield
    built = served.built
    if built is not None:
        await built.mcp_tools.aclose()
    await close_chat_models()
    await stop_shared_local_model_server()
    if built is not None:
        await built.database.dispose()


DEV_ONLY_ROUTES = ("/internal/", "/deploy/")
"""Path prefixes of ``langgraph dev``'s unauthenticated routes (``/deploy`` itself included)."""


def dev_only_route(path: str) -> bool:
    """Whether ``path`` is one of ``langgraph dev``'s own routes outside authentication."""
    return path == "/deploy" or path.startswith(DEV_ONLY_ROUTES)


class DevRoutesGuard:
    """Refuse ``langgraph dev``'s unauthenticated routes while tokens close the server."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and dev_only_route(scope["path"]) and tokens_required():
            refused = JSONResponse(
                {
                    "detail": "langgraph dev's own routes outside authentication (/internal/*, "
                    f"/deploy) are not served while {TOKENS_ENV} is set."
                },
                status_code=403,
            )
            await refused(scope, receive, send)
            return
        await self.app(scope, receive, send)


MAX_REQUEST_BYTES = 4 * 1024 * 1024
"""Largest request body the server reads: room for the largest input the caps allow (200 plan
edits of the longest title and description, or a message of 200,000 characters, in JSON)."""


class RequestBodyCap:
    """Answer 413 to a request whose body passes ``MAX_REQUEST_BYTES``: by its Content-Length
    before anything is read, else (a chunked body) as soon as the bytes read pass it, before
    the server sees any of them."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None and length.isdigit() and int(length) <= MAX_REQUEST_BYTES:
            await self.app(scope, receive, send)
            return
        if length is not None:
            await _too_large(scope, receive, send)
            return
        body = await _read_body(receive)
        if body is None:
            await _too_large(scope, receive, send)
            return
        await self.app(scope, _replay(body, receive), send)


async def _read_body(receive: Receive) -> list[Message] | None:
    """The request's body messages, or None once they pass ``MAX_REQUEST_BYTES``."""
    messages: list[Message] = []
    size = 0
    while True:
        message = await receive()
        messages.append(message)
        size += len(message.get("body", b""))
        if size > MAX_REQUEST_BYTES:
            return None
        if message["type"] != "http.request" or not message.get("more_body", False):
            return messages


def _replay(messages: list[Message], receive: Receive) -> Receive:
    """A ``receive`` that hands the app the body messages already read, then the client's
    own (its disconnect, which a streaming response listens for)."""
    pending = list(messages)

    async def replayed() -> Message:
        return pending.pop(0) if pending else await receive()

    return replayed


async def _too_large(scope: Scope, receive: Receive, send: Send) -> None:
    refused = JSONResponse(
        {
            "detail": f"The request body is larger than {MAX_REQUEST_BYTES} bytes, the most "
            "this server reads. Nothing was done: send less per request."
        },
        status_code=413,
    )
    await refused(scope, receive, send)


app = Starlette(
    lifespan=lifespan,
    middleware=[
        Middleware(OriginGuard),
        Middleware(RequestBodyCap),
        Middleware(DevRoutesGuard),
    ],
)
