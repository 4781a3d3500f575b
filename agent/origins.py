"""Which web pages may drive the server: browsers are kept to the origins a user really uses.

``langgraph dev`` answers every origin with ``Access-Control-Allow-Origin: *`` unless told
otherwise, and reads a ``text/plain`` body as JSON. A web page the developer happens to visit
can then send a "simple" cross-site request (a ``text/plain`` POST needs no preflight) that
starts a run, and read the replies. Two guards close that:

- **CORS**: ``langgraph.json`` lists the origins allowed to read replies (``http.cors``:
  LangGraph Studio at LangSmith, and the web UI of ``ui/`` on its dev port); langgraph-api's
  own CORS middleware applies it, so a foreign origin's requests and preflights get no
  ``Access-Control-Allow-Origin``. ``CORS_CONFIG`` in the environment (a JSON object of the
  same shape) replaces that setting, as langgraph-api documents.
- **No state change from a foreign page** (``OriginGuard``, wrapped around every route by
  ``agent.server.app``): CORS only hides the reply, it does not stop a simple request from
  running. So a ``POST``/``PUT``/``PATCH``/``DELETE`` whose ``Origin`` is not allowed is
  refused (403) before any route sees it, and so is any such request with a body a browser may
  send cross-site without asking (``text/plain``, form data: 415), whoever sends it: the API
  speaks JSON, and a client that sends JSON says so. Clients outside a browser (the SDK, curl)
  send no ``Origin`` and are not affected.

"Allowed" is exactly what the server's CORS setting allows (langgraph-api's resolved
``CORS_CONFIG`` / ``CORS_ALLOW_ORIGINS``, read from ``langgraph_api.config``, the module that
configures the server we run in), so the two guards can never disagree; and a page served by
the API itself on a loopback address (``/docs``) is its own origin.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from agent.errors import ErrorCode

STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
BROWSER_SIMPLE_BODIES = frozenset(
    {"text/plain", "application/x-www-form-urlencoded", "multipart/form-data"}
)
"""Body types a browser sends cross-site without a preflight (the Fetch standard's
CORS-safelisted ``Content-Type`` values)."""
LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "[::1]"})


@dataclass(frozen=True)
class AllowedOrigins:
    """The origins the server's CORS setting lets read replies."""

    origins: frozenset[str]
    pattern: re.Pattern[str] | None = None

    @classmethod
    def of(cls, origins: Iterable[str], regex: str | None = None) -> AllowedOrigins:
        return cls(frozenset(origins), re.compile(regex) if regex else None)

    def allows(self, origin: str) -> bool:
        """Whether ``origin`` may use the API, as Starlette's CORS middleware decides."""
        if "*" in self.origins or origin in self.origins:
            return True
        return self.pattern is not None and self.pattern.fullmatch(origin) is not None


def server_allowed_origins() -> AllowedOrigins:
    """The origins allowed by the CORS setting of the langgraph-api server we run in."""
    from langgraph_api import config as server  # only importable inside the server

    cors: dict[str, Any] | None = server.CORS_CONFIG
    if cors is None:  # langgraph-api's default: CORS_ALLOW_ORIGINS, "*" when unset
        return AllowedOrigins.of(server.CORS_ALLOW_ORIGINS)
    return AllowedOrigins.of(cors.get("allow_origins") or (), cors.get("allow_origin_regex"))


def same_loopback_origin(origin: str, host: str) -> bool:
    """A page served by this API on a loopback address (its ``/docs``): the request's origin is
    the host it was sent to. Only on loopback names, so a DNS-rebound foreign name that
    reaches the server is not mistaken for the server itself."""
    parts = urlsplit(origin)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return False
    hostname = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return parts.netloc == host and hostname in LOOPBACK_HOSTS


def refusal(headers: Headers, method: str, allowed: AllowedOrigins) -> JSONResponse | None:
    """The response refusing a request a foreign web page may have sent, else None."""
    if method not in STATE_CHANGING:
        return None
    media_type = headers.get("content-type", "").partition(";")[0].strip().lower()
    if media_type in BROWSER_SIMPLE_BODIES:
        return JSONResponse(
            {
                "error": ErrorCode.VALIDATION_ERROR.value,
                "detail": f"A {method} with a {media_type} body is refused: this API takes "
                "JSON. Send Content-Type: application/json.",
            },
            status_code=415,
        )
    origin = headers.get("origin")
    if origin is None or allowed.allows(origin):
        return None
    if same_loopback_origin(origin, headers.get("host", "")):
        return None
    return JSONResponse(
        {
            "error": "FOREIGN_ORIGIN",
            "detail": f"A {method} from the web page at {origin} is refused: that origin is not "
            "in the server's CORS setting (http.cors.allow_origins in langgraph.json, or "
            "CORS_CONFIG). Add it there if you use a web UI served from it.",
        },
        status_code=403,
    )


class OriginGuard:
    """Refuse state-changing requests a foreign web page may have sent (see the module)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self._allowed: AllowedOrigins | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            if self._allowed is None:  # read on the first request: no work at import time
                self._allowed = server_allowed_origins()
            refused = refusal(Headers(scope=scope), scope["method"], self._allowed)
            if refused is not None:
                await refused(scope, receive, send)
                return
        await self.app(scope, receive, send)
