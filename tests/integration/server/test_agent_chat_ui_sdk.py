"""agent-chat-ui's own payloads through ``langgraph dev`` and the real ``langgraph_sdk`` client.

agent-chat-ui is not on npm, so its compatibility is kept here at the protocol level: the
interrupts carry the HITL request its ``isAgentInboxInterruptSchema`` accepts, its resume
(``{"decisions": [...]}``, edited arguments as textarea text) and its reply to a question (a
``do-not-render-`` tool message closing the open call, then the human message with content
blocks, no context) are taken as it means them; plan approval is set on the assistant, as a
deployment does, since agent-chat-ui sends no context. ``planEdits`` edit the paused plan with
no LLM call.
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from contextlib import closing
from typing import Any

import pytest
from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient

from tests.dev_server import DevServer
from tests.http_asking import approval_aware_model, asking_model
from tests.integration.server.test_ask_user_sdk import ASK, seed_tasks

pytestmark = pytest.mark.integration


def human(text: str) -> dict[str, Any]:
    """A message as agent-chat-ui's ``handleSubmit`` builds it."""
    return {"id": str(uuid.uuid4()), "type": "human", "content": [{"type": "text", "text": text}]}


async def submit(client: LangGraphClient, thread: str, assistant: str, **payload: Any) -> None:
    """One run the way agent-chat-ui's ``stream.submit`` starts it (values, subgraphs)."""
    async for _ in client.runs.stream(
        thread, assistant, stream_mode=["values"], stream_subgraphs=True, **payload
    ):
        pass  # agent-chat-ui renders each chunk; the test reads the thread's state afterwards


def interrupt_value(state: Any) -> dict[str, Any]:
    (pause,) = state["interrupts"]
    value = pause["value"]
    assert isinstance(value, dict)
    # What agent-chat-ui checks before it renders its approve / edit / reject controls.
    assert value["action_requests"] and value["review_configs"]
    assert all(
        isinstance(a["name"], str) and isinstance(a["args"], dict) for a in value["action_requests"]
    )
    assert all(isinstance(c["allowed_decisions"], list) for c in value["review_configs"])
    return value


def rows(server: DevServer, sql: str) -> list[tuple[Any, ...]]:
    with closing(sqlite3.connect(server.database)) as connection:
        return list(connection.execute(sql))


async def test_approval_set_on_the_assistant_edits_and_plan_edits_as_agent_chat_ui_sends_them(
    dev_server: DevServer,
) -> None:
    dev_server.model.respond_with(approval_aware_model)
    async with get_client(url=dev_server.url) as client:
        assistant = await client.assistants.create("supervisor", context={"approve_plan": True})
        thread = (await client.threads.create())["thread_id"]
        await submit(
            client,
            thread,
            assistant["assistant_id"],
            input={"messages": [human("add bread and milk")]},
        )
        value = interrupt_value(await client.threads.get_state(thread))
        assert value["action_requests"][0]["args"]["items"] == [
            {"title": "Add bread"},
            {"title": "Add milk"},
        ], dev_server.log_tail()
        calls = len(dev_server.model.requests)

        await submit(
            client,
            thread,
            assistant["assistant_id"],
            input={"planEdits": [{"op": "add", "title": "Add eggs"}]},
        )
        state = await client.threads.get_state(thread)
        assert len(dev_server.model.requests) == calls  # no LLM call
        assert state["values"]["planEditResult"] == {"status": "applied", "applied": 1}
        items = interrupt_value(state)["action_requests"][0]["args"]["items"]
        assert [item["title"] for item in items] == ["Add bread", "Add milk", "Add eggs"]

        # The edit form: each argument is its textarea's text, the list as JSON.
        edited = json.dumps([{"title": "Add bread"}, {"title": "Add eggs"}], indent=2)
        decision = {
            "type": "edit",
            "edited_action": {"name": "create_todo", "args": {"items": edited}},
        }
        await submit(
            client,
            thread,
            assistant["assistant_id"],
            input={},
            command={"resume": {"decisions": [decision]}},
        )
        done = (await client.threads.get_state(thread))["values"]

    assert done["turnStatus"] == "answered", dev_server.log_tail()
    assert [(r["title"], r["status"]) for r in done["todos"]] == [
        ("Add bread", "completed"),
        ("Add eggs", "completed"),
    ]
    assert sorted(t for (t,) in rows(dev_server, "SELECT title FROM tasks")) == ["bread", "eggs"]
    assert rows(dev_server, "SELECT status FROM tool_audit WHERE tool_name = 'plan_edit'") == [
        ("success",)
    ]


async def test_a_reply_sent_the_agent_chat_ui_way_answers_the_pending_question(
    dev_server: DevServer,
) -> None:
    async with get_client(url=dev_server.url) as client:
        await seed_tasks(client, dev_server)
        dev_server.model.respond_with(asking_model)
        thread = (await client.threads.create())["thread_id"]
        await submit(client, thread, "supervisor", input=ASK)
        state = await client.threads.get_state(thread)
        assert interrupt_value(state)["action_requests"][0]["name"] == "ask_user"
        asking = state["values"]["messages"][-1]
        # ensureToolCallsHaveResponses: a placeholder result for every open call, then the reply.
        placeholders = [
            {
                "type": "tool",
                "tool_call_id": call["id"],
                "id": f"do-not-render-{uuid.uuid4()}",
                "name": call["name"],
                "content": "Successfully handled tool call.",
            }
            for call in asking["tool_calls"]
        ]

        await submit(
            client, thread, "supervisor", input={"messages": [*placeholders, human("call dad")]}
        )
        done = (await client.threads.get_state(thread))["values"]

    assert done["turnStatus"] == "answered", dev_server.log_tail()
    assert [row["status"] for row in done["todos"]] == ["completed"]
    assert dict(rows(dev_server, "SELECT title, completed FROM tasks")) == {
        "call mom": 0,
        "call dad": 1,
    }
    assert not [m for m in done["messages"] if str(m.get("id", "")).startswith("do-not-render-")]
