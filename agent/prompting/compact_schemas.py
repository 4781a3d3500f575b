"""The compact tool schemas: shortened, grounded and wrapped into one forced function.

Why: the JSON-schema grammar llama.cpp builds from a forced tool is what keeps a small
model's call short and well-formed. So a compact schema keeps only required arguments and
closed choices with every free string capped; a free string the user's words must fix is
limited to the phrases they quoted (the 270M model, left free, wrote the tool's own description
as a task title); and the step's tools become the variants of one ``use_tool`` function,
which llama.cpp turns into one grammar and which is unwrapped into the real tool call.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool

from agent.prompting.compact_plan import planned_action
from agent.prompting.request_steps import QUOTED
from storage.models import TurnTodo

MAX_STRING_LENGTH = 120
"""Cap on every free string argument in a compact schema (titles, outcomes, identifiers)."""


DISPATCH_TOOL = "use_tool"
"""The one function the act step offers; its variants are the step's real tools."""


def compact_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A JSON schema with only required properties and closed choices, strings capped.

    Optional free-text fields (a task's description, a todo's context) are where a small model
    rambles; dropping them from the schema keeps the grammar, and so the call, short. Tools
    still accept them from models that get the full schema.
    """
    result: dict[str, Any] = {
        key: value for key, value in schema.items() if key not in ("description", "default")
    }
    if "enum" in result or "const" in result:
        return result
    if result.get("type") == "string":
        result["maxLength"] = min(
            int(result.get("maxLength", MAX_STRING_LENGTH)), MAX_STRING_LENGTH
        )
    if "properties" in schema:
        required = set(schema.get("required", []))
        result["properties"] = {
            name: compact_schema(prop)
            for name, prop in schema["properties"].items()
            if name in required or _is_closed_choice(prop)
        }
        result["required"] = [name for name in schema.get("required", []) if name in required]
    if isinstance(schema.get("items"), Mapping):
        result["items"] = compact_schema(schema["items"])
    if "anyOf" in schema:
        result["anyOf"] = [compact_schema(option) for option in schema["anyOf"]]
    return result


def _is_closed_choice(prop: Mapping[str, Any]) -> bool:
    options = [prop, *prop.get("anyOf", [])]
    return any("enum" in option or "const" in option for option in options)


def compact_tool(tool: BaseTool, *, todo_id: str | None = None) -> dict[str, Any]:
    """The OpenAI tool definition of ``tool`` with a compact schema and its first docstring line.

    ``todo_id`` pins ``complete_todo``'s ``todoId`` to the item in progress.
    """
    definition = convert_to_openai_tool(tool)
    function = definition["function"]
    parameters = compact_schema(function.get("parameters", {"type": "object"}))
    if todo_id is not None and "todoId" in parameters.get("properties", {}):
        parameters["properties"]["todoId"] = {"const": todo_id}
    description = (function.get("description") or "").strip().splitlines()
    return {
        "type": "function",
        "function": {
            "name": function["name"],
            "description": description[0] if description else "",
            "parameters": parameters,
        },
    }


def is_free_string(schema: Mapping[str, Any]) -> bool:
    return schema.get("type") == "string" and "enum" not in schema and "const" not in schema


def grounded_phrases(current: TurnTodo, request: str) -> list[str]:
    """What a free-text argument of the item's action may be: the item's title, and the quoted
    phrases of its title, its context (a planned action's clause), or the request that share a
    word with the title."""
    title_words = set(_words(current.title))
    phrases = [current.title.strip()]
    planned = planned_action(current)
    context = planned.clause if planned is not None else current.context or ""
    for text in (current.title, context, request):
        for match in QUOTED.finditer(text):
            phrase = next(group for group in match.groups() if group).strip()
            if phrase and (text is not request or title_words & set(_words(phrase))):
                phrases.append(phrase)
    unique = list(dict.fromkeys(phrase[:MAX_STRING_LENGTH] for phrase in phrases if phrase))
    # The most specific phrase first: a quoted name beats the step's whole title.
    return sorted(unique, key=lambda phrase: phrase == current.title.strip())


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def ground_strings(tool: dict[str, Any], phrases: Sequence[str]) -> dict[str, Any]:
    """``tool`` with every free string argument limited to ``phrases``."""

    def ground(schema: Any) -> Any:
        if not isinstance(schema, dict):
            return schema
        if schema.get("type") == "string" and "enum" not in schema and "const" not in schema:
            return {"enum": list(phrases)}
        return {key: _ground_value(key, value, ground) for key, value in schema.items()}

    function = tool["function"]
    return {**tool, "function": {**function, "parameters": ground(function["parameters"])}}


def _ground_value(key: str, value: Any, ground: Any) -> Any:
    if key == "properties" and isinstance(value, dict):
        return {name: ground(prop) for name, prop in value.items()}
    if key in ("items",):
        return ground(value)
    if key == "anyOf" and isinstance(value, list):
        return [ground(option) for option in value]
    return value


def dispatch_tool(tools: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One function whose arguments are ``{"name": <a tool>, "arguments": <its arguments>}``."""
    variants = [
        {
            "type": "object",
            "properties": {
                "name": {"const": tool["function"]["name"]},
                "arguments": tool["function"]["parameters"],
            },
            "required": ["name", "arguments"],
        }
        for tool in tools
    ]
    listing = "; ".join(
        f"{tool['function']['name']}: {tool['function']['description']}" for tool in tools
    )
    return {
        "type": "function",
        "function": {
            "name": DISPATCH_TOOL,
            "description": f"Call one tool. {listing}",
            "parameters": {"anyOf": variants},
        },
    }


def unwrap_dispatch(message: Any) -> Any:
    """The ``use_tool`` call as the real tool call it names (other messages pass unchanged)."""
    if not isinstance(message, AIMessage) or not message.tool_calls:
        return message
    calls = []
    for call in message.tool_calls:
        args = call["args"]
        if call["name"] == DISPATCH_TOOL and isinstance(args.get("name"), str):
            arguments = args.get("arguments")
            call = {
                **call,
                "name": args["name"],
                "args": arguments if isinstance(arguments, dict) else {},
            }
        calls.append(call)
    kwargs = {
        k: v
        for k, v in message.additional_kwargs.items()
        if k not in ("tool_calls", "function_call")
    }
    return message.model_copy(update={"tool_calls": calls, "additional_kwargs": kwargs})
