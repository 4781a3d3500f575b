"""What the model is sent of each tool (``agent.calls.tool_schemas``): no parts that only restate
that an argument is optional, with every bound and choice kept, on the wire as ``ChatOpenAI``
sends it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from agent.calls.tool_schemas import lean_schema
from bench.prompt_size import turn_requests
from tests.scripted_openai import ScriptedOpenAIServer


def _nodes(schema: Any) -> Iterator[dict[str, Any]]:
    """Every schema object nested in ``schema`` (properties, items, branches)."""
    if isinstance(schema, dict):
        yield schema
        for value in schema.values():
            yield from _nodes(value)
    elif isinstance(schema, list):
        for value in schema:
            yield from _nodes(value)


async def test_the_tools_sent_have_no_null_choices_or_empty_defaults_but_keep_their_bounds(
    scripted_openai: ScriptedOpenAIServer,
) -> None:
    # The planning call binds create_todo, the calls that work the plan complete_todo and
    # list_todo: together they send every tool.
    (planning, working, *_) = await turn_requests(2, scripted_openai)
    schemas = {
        tool["function"]["name"]: tool["function"]["parameters"]
        for tool in [*planning["tools"], *working["tools"]]
    }

    for schema in schemas.values():
        for node in _nodes(schema):
            assert {"type": "null"} not in node.get("anyOf", [])
            assert node.get("default", "unset") not in (None, "")
            assert node.get("minLength") != 1
    # What tells the model something stays: bounds, choices and what omission means.
    assert schemas["add_task"]["properties"]["title"]["maxLength"] == 200
    assert schemas["ask_user"]["properties"]["options"]["maxItems"] == 20
    assert schemas["ask_user"]["properties"]["options"]["type"] == "array"
    assert schemas["list_todo"]["properties"]["status"]["enum"][-1] == "all"
    assert schemas["complete_todo"]["properties"]["status"]["default"] == "completed"
    assert schemas["list_tasks"]["properties"]["filter"]["default"] == "all"


def test_an_optional_argument_keeps_its_type_and_description_without_the_null_branch() -> None:
    schema = {
        "type": "object",
        "title": "args",
        "properties": {
            "when": {
                "anyOf": [{"type": "string", "maxLength": 10}, {"type": "null"}],
                "default": None,
                "description": "Day, if known.",
                "title": "When",
            },
            "either": {"anyOf": [{"type": "string"}, {"type": "integer"}], "title": "Either"},
            "title": {"type": "string", "minLength": 1, "title": "Title"},
        },
    }

    assert lean_schema(schema) == {
        "type": "object",
        "properties": {
            "when": {"type": "string", "maxLength": 10, "description": "Day, if known."},
            "either": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
            "title": {"type": "string"},
        },
    }
    assert schema["properties"]["when"]["default"] is None  # the input is left as it was
