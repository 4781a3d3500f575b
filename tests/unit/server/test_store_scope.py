"""The store rule of the server's auth: each user sees and changes only the namespaces that start
with their identity (issue 41: bob read, overwrote and listed alice's store items)."""

from __future__ import annotations

from typing import Any

import pytest
from langgraph_sdk import Auth

from agent.auth import scope_store_operation


@pytest.mark.parametrize("action", ["put", "get", "delete", "search", "list_namespaces"])
def test_another_users_namespace_is_refused(action: str) -> None:
    value: dict[str, Any] = {"namespace": ("alice", "notes")}
    with pytest.raises(Auth.exceptions.HTTPException) as refused:
        scope_store_operation("bob", action, value)
    assert refused.value.status_code == 403
    assert '["bob", ...]' in str(refused.value.detail)


@pytest.mark.parametrize("action", ["put", "get", "delete", "search"])
def test_an_empty_namespace_is_refused(action: str) -> None:
    with pytest.raises(Auth.exceptions.HTTPException):
        scope_store_operation("bob", action, {"namespace": ()})


def test_ones_own_namespace_is_untouched() -> None:
    value: dict[str, Any] = {"namespace": ("bob", "notes"), "key": "k"}
    scope_store_operation("bob", "put", value)
    assert value == {"namespace": ("bob", "notes"), "key": "k"}


def test_listing_without_a_prefix_shows_only_ones_own_namespaces() -> None:
    value: dict[str, Any] = {"namespace": None}
    scope_store_operation("bob", "list_namespaces", value)
    assert value["namespace"] == ("bob",)
