"""The context settings as a caller meets them: help text in the schema, one rule for unknown
keys (refused, naming the key) whether the run starts from Python or through the server."""

from __future__ import annotations

from dataclasses import fields

import pytest
from langchain_core.messages import HumanMessage

from agent.app.served import served
from agent.context import Context, UnknownContextKeyError
from agent.graph import build_graph
from storage import Database
from tests.fakes import ScriptedChatModel

graph = served.get().graph  # what langgraph.json serves


def test_every_setting_has_help_text_in_the_context_schema() -> None:
    schema = graph.get_context_jsonschema()
    assert schema is not None
    properties = schema["properties"]
    assert set(properties) == {f.name for f in fields(Context)}
    for name, prop in properties.items():
        assert prop.get("description", "").strip(), f"{name} has no description"
    assert "personal-task tools" in properties["user_id"]["description"]


def test_an_unknown_key_is_refused_naming_it() -> None:
    with pytest.raises(UnknownContextKeyError, match=r"Unknown context key 'nope'\. .*user_id"):
        Context(nope=1)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"keys 'modle', 'nope'"):
        Context(**{"user_id": "alice", "modle": "local", "nope": 1})


async def test_a_python_run_with_an_unknown_key_fails_before_any_work(
    database: Database,
) -> None:
    model = ScriptedChatModel()  # any call would fail the test: it has no script
    supervisor_graph = build_graph(model, database=database)
    with pytest.raises(UnknownContextKeyError, match="'nope'"):
        await supervisor_graph.ainvoke(
            {"messages": [HumanMessage("hello")]}, context={"user_id": "alice", "nope": 1}
        )
    assert model.calls == 0
