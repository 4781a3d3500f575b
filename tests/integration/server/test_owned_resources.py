"""Owned assistants and a per-user store on ``langgraph dev`` with tokens (issue 41): bob, with
a valid token of his own, can neither see nor change alice's assistants and store items, and
cannot change the system assistant every run relies on. One server for the module."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient

from tests.dev_server import DevServer, copy_project, run_dev_server
from tests.scripted_openai import ScriptedOpenAIServer

pytestmark = pytest.mark.integration

TOKENS = {"tok-alice": "alice", "tok-bob": "bob"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    folder = copy_project(tmp_path_factory.mktemp("owned") / "project")
    env = {"TURNPLAN_AUTH_TOKENS": json.dumps(TOKENS)}
    with ScriptedOpenAIServer() as model, run_dev_server(folder, model, extra_env=env) as running:
        yield running


@pytest.fixture
async def clients(server: DevServer) -> AsyncIterator[dict[str, LangGraphClient]]:
    alice = get_client(url=server.url, headers={"Authorization": "Bearer tok-alice"})
    bob = get_client(url=server.url, headers={"Authorization": "Bearer tok-bob"})
    async with alice, bob:
        yield {"alice": alice, "bob": bob}


def status_of(error: BaseException) -> int | None:
    response = getattr(error, "response", None)
    return getattr(response, "status_code", None)


SERVED_GRAPHS = ["supervisor", "turnplan_agent"]
"""The graphs of ``langgraph.json``: the server makes one system assistant for each."""


async def system_assistant_ids(client: LangGraphClient) -> dict[str, str]:
    found = await client.assistants.search(metadata={"created_by": "system"})
    assert sorted(a["graph_id"] for a in found) == SERVED_GRAPHS
    return {a["graph_id"]: str(a["assistant_id"]) for a in found}


async def test_another_users_and_the_system_assistant_cannot_be_seen_changed_or_deleted(
    clients: dict[str, LangGraphClient],
) -> None:
    alice, bob = clients["alice"], clients["bob"]
    system_ids = await system_assistant_ids(bob)
    system_id = system_ids["supervisor"]
    mine = await alice.assistants.create("supervisor", config={"recursion_limit": 40})
    alices_id = mine["assistant_id"]
    assert (mine["metadata"] or {}).get("owner") == "alice"

    seen = {a["assistant_id"] for a in await bob.assistants.search()}
    assert seen == set(system_ids.values())
    attempts = {
        "read": bob.assistants.get(alices_id),
        "patch": bob.assistants.update(alices_id, config={"recursion_limit": 1}),
        "delete": bob.assistants.delete(alices_id),
        "patch system": bob.assistants.update(system_id, config={"recursion_limit": 1}),
        "delete system": bob.assistants.delete(system_id),
    }
    for action, attempt in attempts.items():
        with pytest.raises(httpx.HTTPStatusError) as refused:
            await attempt
        assert status_of(refused.value) == 404, action

    assert (await alice.assistants.get(alices_id))["config"]["recursion_limit"] == 40
    system = await alice.assistants.get(system_id)
    assert "recursion_limit" not in system["config"]


async def test_ones_own_assistant_can_be_changed_and_deleted(
    clients: dict[str, LangGraphClient],
) -> None:
    bob = clients["bob"]
    own = await bob.assistants.create("supervisor", metadata={"label": "mine"})
    changed = await bob.assistants.update(own["assistant_id"], config={"recursion_limit": 5})
    assert changed["config"]["recursion_limit"] == 5
    assert (changed["metadata"] or {}).get("owner") == "bob"
    await bob.assistants.delete(own["assistant_id"])
    with pytest.raises(httpx.HTTPStatusError) as gone:
        await bob.assistants.get(own["assistant_id"])
    assert status_of(gone.value) == 404


async def test_another_users_store_items_cannot_be_read_written_deleted_or_listed(
    clients: dict[str, LangGraphClient],
) -> None:
    alice, bob = clients["alice"], clients["bob"]
    await alice.store.put_item(["alice", "notes"], "plan", {"secret": "surprise party"})
    await bob.store.put_item(["bob", "notes"], "plan", {"text": "mine"})

    attempts = {
        "get": bob.store.get_item(["alice", "notes"], "plan"),
        "put": bob.store.put_item(["alice", "notes"], "plan", {"secret": "none"}),
        "delete": bob.store.delete_item(["alice", "notes"], "plan"),
        "search": bob.store.search_items(["alice"]),
        "search everything": bob.store.search_items([]),
        "list under alice": bob.store.list_namespaces(prefix=["alice"]),
    }
    for action, attempt in attempts.items():
        with pytest.raises(httpx.HTTPStatusError) as refused:
            await attempt
        assert status_of(refused.value) == 403, action

    listed = await bob.store.list_namespaces()
    assert listed["namespaces"] == [["bob", "notes"]]
    kept = await alice.store.get_item(["alice", "notes"], "plan")
    assert kept["value"] == {"secret": "surprise party"}


async def test_a_run_cannot_use_another_users_assistant(
    clients: dict[str, LangGraphClient],
) -> None:
    alice, bob = clients["alice"], clients["bob"]
    alices = await alice.assistants.create("supervisor")
    thread = await bob.threads.create()
    request: dict[str, Any] = {"messages": [{"role": "user", "content": "hi"}]}
    with pytest.raises(httpx.HTTPStatusError) as refused:
        await bob.runs.wait(thread["thread_id"], alices["assistant_id"], input=request)
    assert status_of(refused.value) == 404


async def test_the_limit_a_taken_thread_id_answers_409_and_reveals_nothing_more(
    clients: dict[str, LangGraphClient],
) -> None:
    """langgraph-api checks the owner filter only after finding the thread, and answers 409
    whatever ``if_exists`` says: an auth handler cannot turn it into a 404. Bob learns only
    that an id he already holds is taken (thread ids are random UUIDs); the thread stays
    alice's. If this starts failing, langgraph-api changed and the 409 can be hidden."""
    alice, bob = clients["alice"], clients["bob"]
    thread = await alice.threads.create(metadata={"topic": "private"})
    for if_exists in ("raise", "do_nothing"):
        with pytest.raises(httpx.HTTPStatusError) as refused:
            await bob.threads.create(thread_id=thread["thread_id"], if_exists=if_exists)
        assert status_of(refused.value) == 409
        assert "private" not in refused.value.response.text
    kept = await alice.threads.get(thread["thread_id"])
    assert (kept["metadata"] or {}).get("owner") == "alice"
    assert (kept["metadata"] or {}).get("topic") == "private"
