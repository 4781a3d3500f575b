"""What the model is sent of each tool: its OpenAI schema without what says nothing to a model.

Tool schemas are sent with every LLM call of a turn (issue 12 measured them at half of each
request), so the schema a model sees leaves out what pydantic writes for validation alone:

- ``anyOf: [X, {"type": "null"}]`` of an optional argument becomes ``X``: the argument is
  already optional by being absent from ``required``, and the model never needs to send null;
- a ``default`` of ``null`` or ``""`` goes: it only restates that the argument may be omitted
  (a default that says what omission means, such as ``"completed"``, stays);
- ``title`` of a property or a nested model goes (it repeats the name), and so does a
  ``minLength`` of 1 (no model sends an empty value on purpose, and the tool rejects one).

Validation is unchanged: the tool's own ``args_schema`` still checks every call, so bounds and
choices stay in the sent schema (``maxLength``, ``enum``) and are enforced with a structured
error either way. The result is computed once per bound toolset, so it is byte-identical across
the calls of a turn and provider prompt caches keep hitting.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool

EMPTY_DEFAULTS: tuple[object, ...] = (None, "")


def lean_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` (a JSON schema) with the parts above removed, at every depth; a new dict."""
    lean: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "title" or (key == "minLength" and value == 1):
            continue
        if key == "default" and any(value is empty or value == empty for empty in EMPTY_DEFAULTS):
            continue
        if key == "properties" and isinstance(value, dict):
            lean[key] = {name: lean_schema(prop) for name, prop in value.items()}
        elif key in ("$defs", "definitions") and isinstance(value, dict):
            lean[key] = {name: lean_schema(sub) for name, sub in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            lean[key] = lean_schema(value)
        elif key in ("anyOf", "oneOf", "allOf") and isinstance(value, list):
            lean[key] = [lean_schema(branch) for branch in value]
        else:
            lean[key] = value
    return _without_null_branch(lean)


def _without_null_branch(schema: dict[str, Any]) -> dict[str, Any]:
    """``{"anyOf": [X, {"type": "null"}], ...}`` as ``{...X, ...}``; anything else as is."""
    branches = schema.get("anyOf")
    if not isinstance(branches, list):
        return schema
    kept = [branch for branch in branches if branch != {"type": "null"}]
    if len(kept) != 1 or len(kept) == len(branches):
        return schema
    merged = {key: value for key, value in schema.items() if key != "anyOf"}
    return {**kept[0], **merged}


def model_tool_schema(tool: BaseTool | dict[str, Any]) -> dict[str, Any]:
    """The OpenAI tool definition of ``tool`` as the model is sent it (see the module docstring)."""
    definition = convert_to_openai_tool(tool)
    function = definition.get("function")
    if isinstance(function, dict) and isinstance(function.get("parameters"), dict):
        definition = {
            **definition,
            "function": {**function, "parameters": lean_schema(function["parameters"])},
        }
    return definition


def model_tool_schemas(tools: Sequence[BaseTool | dict[str, Any]]) -> list[dict[str, Any]]:
    """``model_tool_schema`` of each tool, in order."""
    return [model_tool_schema(tool) for tool in tools]
