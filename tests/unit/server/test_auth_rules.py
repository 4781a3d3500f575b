"""Who a run acts for and who the ownership rules let through, when the authenticate handler may
not have run (a Studio request under ``langgraph dev``). Over HTTP this is
``tests/integration/server/test_auth_cannot_be_skipped.py``; here, the cases a server cannot be
made to produce: a run on the server with no authenticated identity, a custom handler, a Python
caller with the tokens variable set."""

from __future__ import annotations

import json
from typing import cast

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph_sdk import Auth
from langgraph_sdk.auth.types import AuthContext, BaseUser, StudioUser

from agent.auth import (
    AUTHENTICATED,
    TOKENS_ENV,
    NotAuthenticated,
    acting_user,
    verified,
)

TOKENS = json.dumps({"tok-alice": "alice"})


def server_run(user_id: str, permissions: list[str]) -> RunnableConfig:
    """A run's config as langgraph-api fills it in for the request's user."""
    return {
        "configurable": {
            "langgraph_auth_user": None,
            "langgraph_auth_user_id": user_id,
            "langgraph_auth_permissions": permissions,
        }
    }


def studio_request() -> AuthContext:
    """What the ownership rules see for a request langgraph-api gave to its Studio backend."""
    return AuthContext(
        user=cast(BaseUser, StudioUser("langgraph-studio-user")),  # the SDK's own Studio user
        permissions=[],
        resource="threads",
        action="search",
    )


def test_a_server_run_without_an_authenticated_user_fails_when_tokens_are_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(TOKENS_ENV, TOKENS)
    with pytest.raises(NotAuthenticated, match="Authorization: Bearer"):
        acting_user("alice", server_run("langgraph-studio-user", []))
    assert acting_user("bob", server_run("alice", [AUTHENTICATED])) == "alice"


def test_on_the_open_server_and_in_python_the_context_user_acts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(TOKENS_ENV, raising=False)
    assert acting_user("alice", server_run("", [])) == "alice"
    monkeypatch.setenv(TOKENS_ENV, TOKENS)
    assert acting_user("alice", {"configurable": {"thread_id": "t"}}) == "alice"
    assert acting_user("alice", None) == "alice"


def test_a_user_the_handler_never_saw_is_refused_unless_the_server_is_open(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(TOKENS_ENV, TOKENS)
    with pytest.raises(Auth.exceptions.HTTPException) as refused:
        verified(studio_request(), may_be_open=True)
    assert refused.value.status_code == 401
    assert "x-auth-scheme" in str(refused.value.detail)

    monkeypatch.delenv(TOKENS_ENV)
    assert verified(studio_request(), may_be_open=True) is False
    with pytest.raises(Auth.exceptions.HTTPException):
        verified(studio_request(), may_be_open=False)  # a custom handler: never open
