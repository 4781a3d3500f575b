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
  forking, searching or deleting another user's thread finds nothing (404). An assistant
  belongs to its creator: one sees and runs the system's (made from ``langgraph.json``) and
  one's own, and changes or deletes only one's own. The store is per user: namespaces start
  with the caller's identity (403 otherwise).

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

from agent.context import LIMIT_CEILINGS

TOKENS_ENV = "TURNPLAN_AUTH_TOKENS"
AUTHENTICATED = "turnplan:authenticated"
"""Permission an authenticate handler grants to a verified user; runs of users without it (the
open development server) act for the context's ``user_id``."""
ANONYMOUS = "anonymous"
OWNER_KEY = "owner"
UNAUTHENTICATED_DETAIL = (
    "This server requires authentication: send Authorization: Bearer <token> with a known "
    "token. Requests that skip the authenticate handler (such as Studio's "
    "x-auth-scheme: langsmith) are refused."
)
SERVER_RUN_KEYS = ("langgraph_auth_user", "langgraph_auth_user_id", "langgraph_auth_permissions")
"""Keys langgraph-api puts in every run's ``configurable`` (clients cannot set them: they are
reserved); their presence tells a run on the server from a Python caller's run."""

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


def tokens_required() -> bool:
    """Whether ``TURNPLAN_AUTH_TOKENS`` closes the server (at least one token configured)."""
    return bool(configured_tokens())


class NotAuthenticated(PermissionError):
    """A run on a closed server has no authenticated identity to act for.

    Only a request that bypassed the authenticate handler can start such a run; acting for the
    context's ``user_id`` would let any client act as any user, so the run fails instead."""


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


CRONS_CLOSED_DETAIL = (
    "Crons are not supported on a closed server: langgraph-api starts a cron's runs without "
    "the token that verified its user, so they would be refused every time. Start the runs "
    "from your own scheduler with the user's token."
)
"""Why a cron is refused on a server with tokens (or a handler of your own): accepted, it would
never run."""


def may_be_open_now(may_be_open: bool) -> bool:
    """Whether the server is open right now: the built-in handler with no tokens configured."""
    return may_be_open and not tokens_required()


def verified(ctx: Auth.types.AuthContext, *, may_be_open: bool) -> bool:
    """True for a user the authenticate handler marked ``AUTHENTICATED``; False on the open
    server (``may_be_open``: the built-in handler, and no tokens configured); for anyone else
    a 401, whatever backend let the request in (a request the handler never saw)."""
    if AUTHENTICATED in (ctx.permissions or []):
        return True
    if may_be_open and not tokens_required():
        return False
    raise Auth.exceptions.HTTPException(status_code=401, detail=UNAUTHENTICATED_DETAIL)


def build_auth(authenticate: Authenticate = token_authenticate) -> Auth:
    """A LangGraph ``Auth`` with ``authenticate`` and turnplan's ownership rules.

    The server is open (anyone, no owner filter) only with the built-in token handler and no
    ``TURNPLAN_AUTH_TOKENS``; with tokens, or with a handler of your own, it is closed, and the
    rules refuse every user the handler did not mark ``AUTHENTICATED``. A custom handler is
    closed because turnplan cannot know when it means "anyone may come in"; grant
    ``AUTHENTICATED`` to the users it verifies."""
    auth = Auth()
    auth.authenticate(authenticate)
    may_be_open = authenticate is token_authenticate

    @auth.on.assistants
    async def own_or_system_assistants(ctx: Auth.types.AuthContext, value: Any) -> Any:
        """Assistants are owned: one uses the system's and one's own, and changes only one's
        own (another user's settings would otherwise break their runs)."""
        if not verified(ctx, may_be_open=may_be_open):
            return None  # the open development server
        return assistant_filter(ctx.user.identity, ctx.action, value)

    @auth.on.store
    async def own_namespace_only(ctx: Auth.types.AuthContext, value: Any) -> None:
        """The store is namespaced per user: another user's items are neither readable nor
        writable, and listings show only one's own namespaces."""
        if not verified(ctx, may_be_open=may_be_open):
            return None  # the open development server
        scope_store_operation(ctx.user.identity, ctx.action, value)
        return None

    @auth.on
    async def owners_only(ctx: Auth.types.AuthContext, value: Any) -> dict[str, str] | None:
        """Stamp what a user creates with their identity, and see only what carries it; a
        run's input messages of every role stay under the message cap's ceiling."""
        if ctx.action == "create_run":
            refuse_oversized_input(value)
        if ctx.resource == "crons" and ctx.action == "create" and not may_be_open_now(may_be_open):
            raise Auth.exceptions.HTTPException(status_code=422, detail=CRONS_CLOSED_DETAIL)
        if not verified(ctx, may_be_open=may_be_open):
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


HUMAN_ROLES = frozenset({"user", "human"})
"""How a run's input names a human message (``role`` in OpenAI's shape, ``type`` in LangChain's)."""


def other_roles_chars(value: Any) -> int:
    """The characters of the messages of a run's input (``kwargs.input.messages``) that are not
    the user's (assistant, tool, system): their text, or the JSON of their content blocks."""
    kwargs = value.get("kwargs") if isinstance(value, dict) else None
    run_input = kwargs.get("input") if isinstance(kwargs, dict) else None
    messages = run_input.get("messages") if isinstance(run_input, dict) else None
    total = 0
    for message in messages if isinstance(messages, list) else []:
        if not isinstance(message, dict):
            continue  # a string is a human message; anything else the graph refuses
        if str(message.get("role") or message.get("type") or "") in HUMAN_ROLES:
            continue
        content = message.get("content")
        total += len(content if isinstance(content, str) else json.dumps(content, default=str))
    return total


def refuse_oversized_input(value: Any) -> None:
    """A 422 for a run whose input carries more than ``max_message_chars``'s ceiling of messages
    that are not the user's. The graph counts a run's new human messages against the run's own
    cap (``agent.turn.run_input``: a structured ``inputError``), but it cannot tell an assistant
    or tool message sent as input from one of its own turns, so the server counts those here,
    before the run is stored."""
    ceiling = LIMIT_CEILINGS["max_message_chars"]
    size = other_roles_chars(value)
    if size > ceiling:
        raise Auth.exceptions.HTTPException(
            status_code=422,
            detail=f"VALIDATION_ERROR: this run's input holds {size} characters of messages "
            f"that are not the user's; a run may send at most {ceiling}. Send the request as "
            "a user message.",
        )


SYSTEM_CREATOR = {"created_by": "system"}
"""Metadata langgraph-api gives the assistants it creates from ``langgraph.json``'s graphs."""


def assistant_filter(identity: str, action: str, value: Any) -> dict[str, Any]:
    """The metadata filter of an assistant action for ``identity``.

    Create and update stamp the owner (and refuse a ``created_by`` that would pass an
    assistant off as the system's); search and read see one's own and the system's
    assistants; update and delete match only one's own, so the system assistants are
    read-only for everyone and another user's assistant is not found (404) rather than
    confirmed to exist (403)."""
    owner = {OWNER_KEY: identity}
    if action in ("create", "update") and isinstance(value, dict):
        metadata = value.get("metadata")
        if not isinstance(metadata, dict):
            value["metadata"] = metadata = {}
        if "created_by" in metadata:
            raise Auth.exceptions.HTTPException(
                status_code=403,
                detail="Assistant metadata may not set created_by: it marks the server's "
                "own assistants.",
            )
        metadata.update(owner)
    if action in ("read", "search"):
        return {"$or": [owner, SYSTEM_CREATOR]}
    return owner


def scope_store_operation(identity: str, action: str, value: dict[str, Any]) -> None:
    """Confine a store operation to the namespaces under ``(identity, ...)``.

    A listing with no prefix is narrowed to the caller's own namespaces; any other operation
    whose namespace does not start with the caller's identity is refused with 403, naming the
    namespace to use, rather than silently rewritten (a silent rewrite would make a client's
    keys land somewhere it did not ask for)."""
    namespace = value.get("namespace")
    if action == "list_namespaces" and not namespace:
        value["namespace"] = (identity,)
        return
    if not namespace or namespace[0] != identity:
        raise Auth.exceptions.HTTPException(
            status_code=403,
            detail=(
                f"Store namespaces are per user: {action} is allowed only under a namespace "
                f'that starts with your identity, e.g. ["{identity}", ...].'
            ),
        )


auth = build_auth()


def acting_user(context_user_id: str, config: RunnableConfig | None) -> str:
    """The user a run acts for: the authenticated identity on a server with auth, else the
    context's ``user_id`` (Python callers, tests, the open development server).

    A run on the server (its config carries langgraph-api's ``langgraph_auth_*`` keys, which
    clients cannot set) with ``TURNPLAN_AUTH_TOKENS`` configured and no authenticated identity
    raises ``NotAuthenticated``: only a request that skipped the authenticate handler can start
    one, and acting for the context's ``user_id`` would let it act as anyone. A Python caller's
    run (no such keys) keeps acting for the context's ``user_id`` even when the variable happens
    to be set in its environment: it runs with the caller's own rights, with no client between,
    so there is nobody to refuse and refusing would only break scripts and tests that share a
    shell with a server. (With a custom authenticate handler and no tokens this cannot tell a
    closed server from an open one; there ``build_auth``'s rules already refuse the run.)"""
    configurable: Mapping[str, Any] = (config or {}).get("configurable") or {}
    if AUTHENTICATED in (configurable.get("langgraph_auth_permissions") or []):
        identity = configurable.get("langgraph_auth_user_id")
        if isinstance(identity, str) and identity:
            return identity
    if any(key in configurable for key in SERVER_RUN_KEYS) and tokens_required():
        raise NotAuthenticated(
            f"This run has no authenticated user, and {TOKENS_ENV} requires one: it was "
            "started by a request that skipped the authenticate handler. Nothing was done; "
            "start it again with Authorization: Bearer <token>."
        )
    return context_user_id
