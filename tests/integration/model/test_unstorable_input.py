"""Input no store can hold, sent over the wire by the model: an unpaired surrogate (valid JSON,
not valid UTF-8) or an integer past 64 bits. Each call is answered ``VALIDATION_ERROR`` naming
the argument, nothing is written, and the turn goes on to an answer: ``incomplete`` when the failed
call was a change the turn never made good (a task tool), since the request was not done."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import closing

import pytest
from langchain_core.messages import HumanMessage, ToolMessage

from agent.context import Context
from agent.graph import build_graph
from storage import Database
from tests.scripted_openai import Reply, ScriptedOpenAIServer, text

SURROGATE_JSON = '"milk\\ud800"'  # the six characters \ud800, as a model server sends them


@pytest.fixture
def wire_model(
    scripted_openai: ScriptedOpenAIServer, monkeypatch: pytest.MonkeyPatch, isolated_model_env: None
) -> Iterator[ScriptedOpenAIServer]:
    monkeypatch.setenv("OPENAI_BASE_URL", scripted_openai.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    yield scripted_openai


def count(database: Database, table: str) -> int:
    path = database.url.split("///", 1)[1]
    with closing(sqlite3.connect(path)) as connection:
        return int(connection.execute(f"SELECT count(*) FROM {table}").fetchone()[0])


@pytest.mark.parametrize(
    ("tool", "raw_arguments", "argument"),
    [
        ("add_task", f'{{"title": {SURROGATE_JSON}}}', "title"),
        ("add_task", f'{{"title": "milk", "description": {SURROGATE_JSON}}}', "description"),
        ("create_todo", f'{{"items": [{{"title": {SURROGATE_JSON}}}]}}', "items[0].title"),
        ("create_todo", '{"items": [{"title": "x", "order": 9223372036854775808}]}', "order"),
        ("complete_task", f'{{"task_identifier": {SURROGATE_JSON}}}', "task_identifier"),
    ],
)
async def test_an_unstorable_argument_is_a_validation_error_and_the_turn_goes_on(
    wire_model: ScriptedOpenAIServer,
    database: Database,
    tool: str,
    raw_arguments: str,
    argument: str,
) -> None:
    wire_model.reply(Reply(tool_calls=((tool, raw_arguments),)), text("Sorry, that failed."))
    graph = build_graph("openai:scripted", database=database)
    result = await graph.ainvoke(
        {"messages": [HumanMessage(content="do it")]}, context=Context(user_id="alice")
    )
    # A task tool's failed change left the request undone; a failed plan call changed nothing.
    assert result["turnStatus"] == ("answered" if tool == "create_todo" else "incomplete")
    (answer,) = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    envelope = json.loads(str(answer.content))
    assert answer.status == "error" and envelope["error"] == "VALIDATION_ERROR"
    assert argument in envelope["message"]
    assert "\ud800" not in str(answer.content)
    assert count(database, "turn_todos") == 0 and count(database, "tasks") == 0
    # The second request carried the history back to the server intact.
    assert len(wire_model.requests) == 2


async def test_a_users_unpaired_surrogate_does_not_break_the_thread(
    wire_model: ScriptedOpenAIServer, database: Database
) -> None:
    wire_model.reply(text("Hello!"))
    graph = build_graph("openai:scripted", database=database)
    result = await graph.ainvoke(
        {"messages": [HumanMessage(content="hi \ud800 there")]}, context=Context()
    )
    assert result["turnStatus"] == "answered"
    sent = wire_model.requests[0]["messages"][-1]["content"]
    assert sent == "hi \ufffd there"
