"""Who the user is on a LangGraph server (``auth`` in ``langgraph.json``), and what they may touch.

- **Authentication** is pluggable: ``build_auth(authenticate)`` takes any LangGraph authenticate
  handler. The default one maps bearer tokens to users from ``TURNPLAN_AUTH_TOKENS`` (a JSON
  object ``{"<token>": "<user>"}``). With no tokens configured the server is open, for one
  developer on their own machine: requests are let in anonymously and runs act for the
  context's ``user_id``, as in Python.
- **The acting user** of an authenticated run is its identity, whatever the context's
  ``user_id`` says (``acting_user``); the tools, the conversation ownership and the audit all
  use it.
- **Ownership**: a thread belongs to the user who created it. Reading, running, editing,
  forking, searching or deleting another user's thread finds nothing (404).

To plug in a real identity provider, write a module with your own handler and reuse the rules:

    from agent.auth import build_auth

    async def authenticate(authorization: str | None) -> dict:
        claims = verify_jwt(authorization)          # your provider's check
        return {"identity": claims["sub"], "permissions": [AUTHENTICATED]}

    auth = build_auth(authenticate)

and name it in ``langgraph.json``: ``"auth": {"path": "./my_auth.py:auth"}``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph_sdk import Auth

TOKENS_ENV = "TURNPLAN_AUTH_TOKENS"
AUTHENTICATED = "turnplan:authenticated"
"""Permission an authenticate handler grants to a verified user; runs of users without it (the
open development server) act for the context's ``user_id``."""
ANONYMOUS = "anonymous"
OWNER_KEY = "owner"

Authenticate = Callable[..., Awaitable[Any]]


def configured_tokens() -> dict[str, str]:
    """``TURNPLAN_AUTH_TOKENS`` as token -> user (empty when unset); a malformed value is an
    error at the first request, not a silently open server."""
    raw = os.environ.get(TOKENS_ENV, "").strip()
    if not raw:
        return {}
    try:
        tokens = json.loads(raw)
    except ValueError as error:
        raise ValueError(f'{TOKENS_ENV} must be a JSON object {{"<token>": "<user>"}}') from error
    if not isinstance(tokens, dict) or not all(
        isinstance(k, str) and k and isinstance(v, str) and v for k, v in tokens.items()
    ):
        raise ValueError(f'{TOKENS_ENV} must be a JSON object {{"<token>": "<user>"}}')
    return tokens


async def token_authenticate(authorization: str | None) -> Auth.types.MinimalUserDict:
    """The default handler: ``Authorization: Bearer <token>`` from ``TURNPLAN_AUTH_TOKENS``."""
    tokens = configured_tokens()
    if not tokens:
        return {"identity": ANONYMOUS, "permissions": []}
    scheme, _, token = (authorization or "").partition(" ")
    user = tokens.get(token.strip()) if scheme.lower() == "bearer" else None
    if user is None:
        raise Auth.exceptions.HTTPException(
            status_code=401, detail="Send Authorization: Bearer <token> with a known token."
        )
    return {"identity": user, "permissions": [AUTHENTICATED]}


def build_auth(authenticate: Authenticate = token_authenticate) -> Auth:
    """A LangGraph ``Auth`` with ``authenticate`` and turnplan's ownership rules."""
    auth = Auth()
    auth.authenticate(authenticate)

    @auth.on.assistants
    async def assistants_are_shared(ctx: Auth.types.AuthContext, value: Any) -> None:
        """Assistants are configurations anyone may use; the data lives in threads."""
        return None

    @auth.on
    async def owners_only(ctx: Auth.types.AuthContext, value: Any) -> dict[str, str] | None:
        """Stamp what a user creates with their identity, and see only what carries it."""
        if AUTHENTICATED not in (ctx.permissions or []):
            return None  # the open development server
        owner = {OWNER_KEY: ctx.user.identity}
        if isinstance(value, dict):
            metadata = value.get("metadata")
            if metadata is None and ctx.action in ("create", "create_run", "update"):
                value["metadata"] = metadata = {}
            if isinstance(metadata, dict):
                metadata.update(owner)
        return owner

    return auth


auth = build_auth()


def acting_user(context_user_id: str, config: RunnableConfig | None) -> str:
    """The user a run acts for: the authenticated identity on a server with auth, else the
    context's ``user_id`` (Python callers, tests, the open development server)."""
    configurable: Mapping[str, Any] = (config or {}).get("configurable") or {}
    if AUTHENTICATED in (configurable.get("langgraph_auth_permissions") or []):
        identity = configurable.get("langgraph_auth_user_id")
        if isinstance(identity, str) and identity:
            return identity
    return context_user_id
