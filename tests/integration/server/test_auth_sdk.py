"""Authentication and thread ownership on ``langgraph dev``, through the real SDK with two
tokens: no token is a 401, another user's thread cannot be read, run, edited or forked, and the
tools act for the token's user whatever the context says."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import AsyncIterator, Iterator
from contextlib import closing
from pathlib import Path

import httpx
import pytest
from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient

from tests.dev_server import DevServer, copy_project, run_dev_server
from tests.scripted_openai import ScriptedOpenAIServer, text, tool_calls

pytestmark = pytest.mark.integration

TOKENS = {"tok-alice": "alice", "tok-bob": "bob"}
REQUEST = {"messages": [{"role": "user", "content": "Add milk to my tasks"}]}


@pytest.fixture
def server(tmp_path: Path, scripted_openai: ScriptedOpenAIServer) -> Iterator[DevServer]:
    folder = copy_project(tmp_path / "project")
    env = {"TURNPLAN_AUTH_TOKENS": json.dumps(TOKENS)}
    with run_dev_server(folder, scripted_openai, extra_env=env) as running:
        yield running


@pytest.fixture
async def clients(server: DevServer) -> AsyncIterator[dict[str, LangGraphClient]]:
    alice = get_client(url=server.url, headers={"Authorization": "Bearer tok-alice"})
    bob = get_client(url=server.url, headers={"Authorization": "Bearer tok-bob"})
    nobody = get_client(url=server.url)
    async with alice, bob, nobody:
        yield {"alice": alice, "bob": bob, "nobody": nobody}


def status_of(error: BaseException) -> int | None:
    response = getattr(error, "response", None)
    return getattr(response, "status_code", None)


async def test_a_request_without_a_known_token_is_refused(
    server: DevServer, clients: dict[str, LangGraphClient]
) -> None:
    nobody = clients["nobody"]
    with pytest.raises(httpx.HTTPStatusError) as refused:
        await nobody.threads.create()
    assert status_of(refused.value) == 401
    wrong = get_client(url=server.url, headers={"Authorization": "Bearer tok-mallory"})
    async with wrong:
        with pytest.raises(httpx.HTTPStatusError) as refused:
            await wrong.threads.search()
    assert status_of(refused.value) == 401


async def test_the_tools_act_for_the_tokens_user_whatever_the_context_says(
    server: DevServer, clients: dict[str, LangGraphClient]
) -> None:
    alice = clients["alice"]
    server.model.reply(tool_calls(("add_task", {"title": "milk"})), text("Added."))
    thread = await alice.threads.create()
    final = await alice.runs.wait(
        thread["thread_id"], "supervisor", input=REQUEST, context={"user_id": "bob"}
    )
    assert final["turnStatus"] == "answered", server.log_tail()
    with closing(sqlite3.connect(server.database)) as connection:
        owners = connection.execute("SELECT user_id, title FROM tasks").fetchall()
        audit = connection.execute("SELECT user_id FROM tool_audit").fetchall()
    assert owners == [("alice", "milk")]
    assert audit == [("alice",)]


async def test_another_users_thread_cannot_be_read_run_edited_or_forked(
    server: DevServer, clients: dict[str, LangGraphClient]
) -> None:
    alice, bob = clients["alice"], clients["bob"]
    server.model.reply(text("Hello Alice."))
    thread = await alice.threads.create()
    thread_id = thread["thread_id"]
    await alice.runs.wait(thread_id, "supervisor", input=REQUEST)
    history = await alice.threads.get_history(thread_id)
    checkpoint_id = history[-1]["checkpoint"]["checkpoint_id"]
    requests_before = len(server.model.requests)

    attempts = {
        "read": bob.threads.get_state(thread_id),
        "run": bob.runs.wait(thread_id, "supervisor", input=REQUEST),
        "edit": bob.threads.update_state(thread_id, {"remindersInARow": 0}, as_node="drain"),
        "fork": bob.runs.wait(thread_id, "supervisor", input=None, checkpoint_id=checkpoint_id),
    }
    for action, attempt in attempts.items():
        with pytest.raises(httpx.HTTPStatusError) as refused:
            await attempt
        assert status_of(refused.value) == 404, action
    assert await bob.threads.search() == []
    assert len(server.model.requests) == requests_before, "Bob's run reached the model"
    mine = await alice.threads.get_state(thread_id)
    assert mine["values"]["turnStatus"] == "answered"


async def test_a_cron_is_refused_on_a_closed_server_rather_than_accepted_and_never_run(
    clients: dict[str, LangGraphClient],
) -> None:
    alice = clients["alice"]
    thread = await alice.threads.create()
    with pytest.raises(httpx.HTTPStatusError) as refused:
        await alice.crons.create_for_thread(
            thread["thread_id"], "supervisor", schedule="* * * * *", input=REQUEST
        )
    assert status_of(refused.value) == 422
    assert "Crons are not supported on a closed server" in refused.value.response.text
    assert await alice.crons.search() == []
