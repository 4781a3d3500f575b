"""An id a user owns is one id however it is spelt, over ``langgraph dev`` with two tokens.

Alice keeps a conversation task list (seed 000) on her thread. Bob names her conversation in
his run's ``context.conversation_id`` spelt another way (upper case, without hyphens, in
braces, as a URN): each spelling is her conversation, so his run is refused before the model
is asked, and her list is neither shown to him nor changed. Her thread, spelt those ways, is
hers too: he can neither read it nor create it as his.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient

from storage.task_files import TaskFiles
from tests.dev_server import DevServer, copy_project, run_dev_server
from tests.scripted_openai import Reply, ScriptedOpenAIServer, text, tool_calls

pytestmark = pytest.mark.integration

TOKENS = {"tok-alice": "alice", "tok-bob": "bob"}
TASK_TOOLS = {"toolsets": ["conversation_tasks"]}
SECRET = "alice's secret errand"


def spellings(thread_id: str) -> dict[str, str]:
    """Other spellings of one UUID a client may send."""
    value = uuid.UUID(thread_id)
    return {
        "upper case": str(value).upper(),
        "no hyphens": value.hex,
        "no hyphens, upper case": value.hex.upper(),
        "braces": "{" + str(value) + "}",
        "URN": f"urn:uuid:{value}",
    }


def meddling_model(body: dict[str, Any]) -> Reply:
    """Bob's model: list the task list, add to it and delete task 1, then answer."""
    if any(message.get("role") == "tool" for message in body.get("messages", [])):
        return text("Done.")
    return tool_calls(
        ("ListTasks", {}), ("AddTask", {"title": "bob was here"}), ("DeleteTask", {"taskId": "1"})
    )


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
    async with alice, bob:
        yield {"alice": alice, "bob": bob}


def user_says(content: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": content}]}


async def test_another_spelling_of_alices_conversation_is_still_hers(
    server: DevServer, clients: dict[str, LangGraphClient]
) -> None:
    alice, bob = clients["alice"], clients["bob"]
    server.model.reply(tool_calls(("AddTask", {"title": SECRET})), text("Noted."))
    thread = await alice.threads.create()
    alices = thread["thread_id"]
    final = await alice.runs.wait(
        alices, "supervisor", input=user_says("Note it."), context=TASK_TOOLS
    )
    assert final["turnStatus"] == "answered", server.log_tail()
    files = TaskFiles(server.folder)
    assert [task.title for task in files.read(alices).tasks] == [SECRET]

    server.model.respond_with(meddling_model)
    for spelling, conversation in spellings(alices).items():
        # Her thread, spelt so: the server reads thread ids as UUIDs, so it is hers too.
        with pytest.raises(httpx.HTTPStatusError) as unseen:
            await bob.threads.get(conversation)
        assert unseen.value.response.status_code == 404, spelling
        with pytest.raises(httpx.HTTPStatusError) as taken:
            await bob.threads.create(thread_id=conversation, if_exists="do_nothing")
        assert taken.value.response.status_code == 409, spelling
        asked_before = len(server.model.requests)
        own = await bob.threads.create()
        result = await bob.runs.wait(
            own["thread_id"],
            "supervisor",
            input=user_says("Show me the task list, add one and delete task 1."),
            context={**TASK_TOOLS, "conversation_id": conversation},
        )
        shown = json.dumps(result)
        assert SECRET not in shown, spelling
        assert result["turnStatus"] == "failed", (spelling, shown[-600:])
        assert "belongs to another user" in result["messages"][-1]["content"], spelling
        assert len(server.model.requests) == asked_before, (
            f"{spelling}: bob's run reached the model"
        )
        assert [task.title for task in files.read(alices).tasks] == [SECRET], spelling
        assert [task.done for task in files.read(alices).tasks] == [False], spelling


async def test_editing_a_paused_turns_state_cannot_point_it_at_alices_conversation(
    server: DevServer, clients: dict[str, LangGraphClient]
) -> None:
    alice, bob = clients["alice"], clients["bob"]
    server.model.reply(tool_calls(("AddTask", {"title": SECRET})), text("Noted."))
    alices = (await alice.threads.create())["thread_id"]
    await alice.runs.wait(alices, "supervisor", input=user_says("Note it."), context=TASK_TOOLS)
    files = TaskFiles(server.folder)
    assert [task.title for task in files.read(alices).tasks] == [SECRET]

    # Bob's own turn pauses at a question; he edits his own thread's state meanwhile.
    server.model.reply(tool_calls(("ask_user", {"question": "Which list?", "options": ["a"]})))
    own = (await bob.threads.create())["thread_id"]
    await bob.runs.wait(own, "supervisor", input=user_says("Tidy a list."), context=TASK_TOOLS)
    assert (await bob.threads.get_state(own))["next"] == ["tools"], server.log_tail()
    await bob.threads.update_state(own, {"conversationId": alices.upper()})
    server.model.reply(
        tool_calls(("ListTasks", {}), ("DeleteTask", {"taskId": "1"})), text("Done.")
    )
    await bob.runs.wait(own, "supervisor", command={"resume": "a"}, context=TASK_TOOLS)

    seen = json.dumps(await bob.threads.get_state(own))
    assert SECRET not in seen
    assert "belongs to another user" in seen
    assert [task.title for task in files.read(alices).tasks] == [SECRET]
