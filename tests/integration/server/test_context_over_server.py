"""The context settings through ``langgraph dev`` and the real langgraph-sdk client: the form's
help text reaches ``get_schemas``, and a run naming an unknown setting fails, naming it, instead
of running with the key silently dropped."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

import pytest
from langgraph_sdk import get_client

from agent.context import Context
from tests.dev_server import DevServer

pytestmark = pytest.mark.integration


async def test_the_context_form_has_the_help_text_of_every_setting(dev_server: DevServer) -> None:
    async with get_client(url=dev_server.url) as client:
        (assistant,) = await client.assistants.search(graph_id="supervisor")
        schemas = await client.assistants.get_schemas(assistant["assistant_id"])
    properties = schemas["context_schema"]["properties"]
    assert {name: prop.get("description") for name, prop in properties.items()} == {
        f.name: f.metadata["description"] for f in fields(Context)
    }


async def test_a_run_with_an_unknown_context_key_fails_naming_it(dev_server: DevServer) -> None:
    request: dict[str, Any] = {"messages": [{"role": "user", "content": "Add milk to my tasks."}]}
    async with get_client(url=dev_server.url) as client:
        thread = await client.threads.create()
        parts = [
            (part.event, part.data)
            async for part in client.runs.stream(
                thread["thread_id"],
                "supervisor",
                input=request,
                context={"user_id": "alice", "nope": 1},
            )
        ]
        errors = [data for event, data in parts if event == "error"]
        assert len(errors) == 1, parts
        assert errors[0]["error"] == "UnknownContextKeyError"
        assert "Unknown context key 'nope'" in errors[0]["message"]

        # runs.wait, the other common call, raises with the same message.
        with pytest.raises(Exception, match="Unknown context key 'nope'"):
            await client.runs.wait(
                thread["thread_id"], "supervisor", input=request, context={"nope": 1}
            )

        runs = await client.runs.list(thread["thread_id"])
        assert [run["status"] for run in runs] == ["error", "error"]
        state = await client.threads.get_state(thread["thread_id"])
    # Refused before the graph ran: no turn, no model call.
    assert state["values"] == {}
    assert dev_server.model.requests == []


async def test_the_form_offers_the_toolsets_and_a_wrong_name_fails_naming_the_valid_ones(
    dev_server: DevServer,
) -> None:
    request: dict[str, Any] = {"messages": [{"role": "user", "content": "Add milk to my tasks."}]}
    async with get_client(url=dev_server.url) as client:
        (assistant,) = await client.assistants.search(graph_id="supervisor")
        schemas = await client.assistants.get_schemas(assistant["assistant_id"])
        thread = await client.threads.create()
        with pytest.raises(Exception, match="Valid names: personal_tasks, conversation_tasks"):
            await client.runs.wait(
                thread["thread_id"],
                "supervisor",
                input=request,
                context={"toolsets": ["personal_tasks", "calendar"]},
            )
    toolsets = schemas["context_schema"]["properties"]["toolsets"]
    assert toolsets["items"]["enum"] == ["personal_tasks", "conversation_tasks"]
    assert toolsets["default"] == ["personal_tasks"]
    assert dev_server.model.requests == []
