"""The owned-resource rules of the server's auth (issue 41): each user sees and changes only the
store namespaces that start with their identity, and the assistants they own (the system's are
read-only for everyone)."""

from __future__ import annotations

from typing import Any

import pytest
from langgraph_sdk import Auth

from agent.auth import assistant_filter, scope_store_operation


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


def test_a_created_assistant_is_stamped_with_its_owner() -> None:
    value: dict[str, Any] = {"assistant_id": "a", "metadata": None}
    assert assistant_filter("bob", "create", value) == {"owner": "bob"}
    assert value["metadata"] == {"owner": "bob"}


def test_an_assistant_cannot_pass_itself_off_as_the_systems() -> None:
    for action in ("create", "update"):
        with pytest.raises(Auth.exceptions.HTTPException) as refused:
            assistant_filter("bob", action, {"metadata": {"created_by": "system"}})
        assert refused.value.status_code == 403


def test_reads_see_ones_own_and_the_systems_assistants_and_changes_only_ones_own() -> None:
    shared = {"$or": [{"owner": "bob"}, {"created_by": "system"}]}
    assert assistant_filter("bob", "read", {"assistant_id": "a"}) == shared
    assert assistant_filter("bob", "search", {"graph_id": None}) == shared
    assert assistant_filter("bob", "update", {"metadata": {}}) == {"owner": "bob"}
    assert assistant_filter("bob", "delete", {"assistant_id": "a"}) == {"owner": "bob"}
