"""The compact profile's tools: what one LLM call may call when the model is a small local one.

The profile itself (its system prompt, plan view and history, as data) is
``agent.prompting.builder.COMPACT``; this module binds each step's tools.

Why: the full profile (the whole system prompt and every tool schema on every call) is about
2,000 prompt tokens, which the embedded Gemma 3 270M reads at 100-200 tokens/s on two CPU
cores, and with nine tools to choose from it wrote tool names as plan titles. Measured levers
that help it, all applied here and none specific to one request:

- a short system prompt (``prompts/compact_supervisor.md``) and a plan view without ids;
- only the tools the step needs, decided by the graph from the plan rows and the history:
  planning binds ``create_todo`` (forced when ``planning="always"``); while an item is in
  progress the model first gets the domain tools (and ``complete_todo`` for items no tool can
  do), and once an action has returned it must call ``complete_todo``; with every item closed
  the answer is built from the rows (what was done, with each outcome), not generated;
- compact tool schemas: required arguments and closed choices (enums) only, every free string
  capped, so the JSON-schema grammar llama.cpp builds from a forced tool keeps each call short;
  the id of the item in progress is a constant in ``complete_todo``'s schema, so the model never
  has to copy a UUID;
- one forced call per action: the step's tools become the variants of a single ``use_tool``
  function (``{"name": <tool>, "arguments": {...}}``), which llama.cpp turns into one grammar,
  and the answer is unwrapped into the real tool call. (llama-cpp-python's automatic tool
  choice makes several completions per call, ignores the token cap and produced invalid JSON.)
- grounded arguments: the free-text arguments of the domain tools (a task title, a task name)
  are chosen from the item in progress and the user's quoted words, and a successful action's
  outcome from its tool result, not written freely. The
  270M model, left free, wrote the tool's own description as the title ("Add task to my tasks
  list"); the cost is that this profile cannot invent text the user and the plan did not say.
- an explicit ``tool_choice`` on every call with tools (llama-cpp-python's
  ``chatml-function-calling`` ignores tools without one), a low temperature and token caps;
- no ``ask_user``: in a forced choice among the step's tools a small model could pick it at
  random, which would pause an unattended run for an answer nobody gives;
- a short history window, so the stable prefix (system prompt) dominates and llama.cpp's
  prefix reuse skips most of each prompt.

The tools the model calls are the real ones (only their schemas are shortened), so rows, audit
and errors behave exactly as in the full profile.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, ToolMessage
from langchain_core.runnables import RunnableLambda
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool

from agent.tool_names import ASK_USER, TODO_TOOL_NAMES
from agent.turn.outcome import plan_complete_message
from storage.models import TurnTodo

MAX_STRING_LENGTH = 120
"""Cap on every free string argument in a compact schema (titles, outcomes, identifiers)."""

ACTION_ATTEMPTS = 2
"""Failed actions on one item before the model must close it (completed or cancelled)."""

TEMPERATURE = 0.2
PLAN_MAX_TOKENS = 200
ACTION_MAX_TOKENS = 120
ANSWER_MAX_TOKENS = 120

Phase = Literal["plan", "act", "close", "answer"]

DISPATCH_TOOL = "use_tool"
"""The one function the act step offers; its variants are the step's real tools."""

_QUOTED = re.compile(
    "'([^']{1,120})'|\"([^\"]{1,120})\"|\u2018([^\u2019]{1,120})\u2019|\u201c([^\u201d]{1,120})\u201d"
)
"""Phrases the user quoted, with straight or curly quotes."""


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


def _since_last_todo_result(history: Sequence[AnyMessage]) -> list[ToolMessage]:
    """Results of non-todo tools after the newest todo-tool result (the current item's work)."""
    results: list[ToolMessage] = []
    for message in reversed(history):
        if isinstance(message, ToolMessage):
            if message.name in TODO_TOOL_NAMES:
                break
            results.append(message)
    return results


def action_outcomes(history: Sequence[AnyMessage]) -> list[str]:
    """Outcomes to close the item with: one per successful action of the current item, e.g.
    ``add_task: buy groceries`` (the tool, and the title or count its result reports)."""
    outcomes = []
    for result in reversed(_since_last_todo_result(history)):
        if result.status == "error":
            continue
        try:
            payload = json.loads(result.text)
        except ValueError:
            payload = {}
        detail = ""
        if isinstance(payload, dict):
            if isinstance(payload.get("title"), str):
                detail = payload["title"]
            elif isinstance(payload.get("count"), int):
                detail = f"{payload['count']} item(s)"
        outcome = f"{result.name}: {detail}" if detail else f"{result.name} succeeded"
        outcomes.append(outcome[:MAX_STRING_LENGTH])
    return list(dict.fromkeys(outcomes))


def _action_succeeded(history: Sequence[AnyMessage]) -> bool:
    return any(result.status != "error" for result in _since_last_todo_result(history))


def step_phase(
    rows: Sequence[TurnTodo], history: Sequence[AnyMessage], required_tool: str | None
) -> Phase:
    """What this call is for, from the plan rows and the history (pure, so it is testable)."""
    if required_tool is not None or not rows:
        return "plan"
    if not any(row.status == "in_progress" for row in rows):
        return "answer"
    results = _since_last_todo_result(history)
    if _action_succeeded(history) or len(results) >= ACTION_ATTEMPTS:
        return "close"
    return "act"


@dataclass(frozen=True)
class StepBinding:
    """The tools and sampling settings of one compact call."""

    phase: Phase
    tools: list[dict[str, Any]]
    tool_choice: str | None
    max_tokens: int


def step_binding(
    tools: Sequence[BaseTool],
    rows: Sequence[TurnTodo],
    history: Sequence[AnyMessage],
    required_tool: str | None,
    request: str = "",
) -> StepBinding:
    """Only the tools this step needs, and whether the model must call one of them."""
    phase = step_phase(rows, history, required_tool)
    by_name = {tool.name: tool for tool in tools}
    current = next((row for row in rows if row.status == "in_progress"), None)
    if phase == "plan":
        if required_tool is not None:
            return StepBinding(
                phase, [compact_tool(by_name[required_tool])], required_tool, PLAN_MAX_TOKENS
            )
        names = [name for name in by_name if name not in ("list_todo", "complete_todo", ASK_USER)]
        return StepBinding(
            phase, [compact_tool(by_name[name]) for name in names], "auto", PLAN_MAX_TOKENS
        )
    if phase == "answer" or current is None:
        return StepBinding("answer", [], None, ANSWER_MAX_TOKENS)
    close = compact_tool(by_name["complete_todo"], todo_id=current.id)
    if phase == "close":
        if _action_succeeded(history):
            # The action worked: the item is completed (a small model picked "cancelled" at
            # random when offered the choice), and its outcome says which tool did what (left
            # free, it wrote "completed_todo"). After failed attempts it may cancel, freely.
            properties = close["function"]["parameters"]["properties"]
            properties.pop("status", None)
            properties["outcome"] = {"enum": action_outcomes(history)}
        return StepBinding(phase, [close], "complete_todo", ACTION_MAX_TOKENS)
    phrases = grounded_phrases(current, request)
    domain = [
        ground_strings(compact_tool(tool), phrases)
        for tool in tools
        if tool.name not in TODO_TOOL_NAMES and tool.name != ASK_USER
    ]
    return StepBinding(phase, [dispatch_tool([*domain, close])], DISPATCH_TOOL, ACTION_MAX_TOKENS)


def grounded_phrases(current: TurnTodo, request: str) -> list[str]:
    """What a free-text argument of the item's action may be: the item's title, and the quoted
    phrases of its title, its context, or the request that share a word with the title."""
    title_words = set(_words(current.title))
    phrases = [current.title.strip()]
    for text in (current.title, current.context or "", request):
        for match in _QUOTED.finditer(text):
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


def bind_step(model: BaseChatModel, binding: StepBinding, rows: Sequence[TurnTodo] = ()) -> Any:
    """``model`` bound to the step's tools, tool choice, temperature and token cap.

    The answer after a finished plan is built from the rows, not generated: asked to sum up,
    the 270M model echoed its prompt or imitated the tool-call history (measured), and the rows
    already say what was done, with each outcome.
    """
    if binding.phase == "answer" and rows:
        answer = AIMessage(content=plan_complete_message(rows))
        return RunnableLambda(lambda _prompt: answer)
    if not binding.tools:
        return model.bind(temperature=TEMPERATURE, max_tokens=binding.max_tokens)
    bound = model.bind_tools(
        binding.tools,
        tool_choice=binding.tool_choice,
        temperature=TEMPERATURE,
        max_tokens=binding.max_tokens,
    )
    if binding.tool_choice == DISPATCH_TOOL:
        return bound | RunnableLambda(unwrap_dispatch)
    return bound


FINISH_TOOL = "answer"
"""The no-plan loop's way to finish: a ``use_tool`` variant whose text becomes the answer."""
FINISH_MAX_LENGTH = 400


def no_plan_binding(
    tools: Sequence[BaseTool], history: Sequence[AnyMessage], request: str
) -> StepBinding:
    """The step of a compact turn under ``planning="off"``: no plan, no rows, so every call is
    a forced ``use_tool`` over the domain tools plus ``answer`` (the way to finish).

    Kept apart from ``step_binding`` (the planned loop) so the two can change independently.
    Free-text arguments are held to the request's quoted phrases when it quotes any (the
    grounding of the planned act step, without a plan item to read); otherwise they are free,
    capped as in every compact schema. ``history`` is part of the signature for the same
    reason as ``step_binding``'s: what the step offers may come to depend on what already ran.
    """
    del history  # every no-plan step offers the same tools
    phrases = [
        next(group for group in match.groups() if group).strip()
        for match in _QUOTED.finditer(request)
    ]
    phrases = list(dict.fromkeys(phrase for phrase in phrases if phrase))
    domain = [
        ground_strings(compact_tool(tool), phrases) if phrases else compact_tool(tool)
        for tool in tools
        if tool.name not in TODO_TOOL_NAMES and tool.name not in (ASK_USER, "delegate")
    ]
    finish = {
        "type": "function",
        "function": {
            "name": FINISH_TOOL,
            "description": "Reply to the user and end the turn.",
            "parameters": {
                "type": "object",
                "properties": {"text": {"type": "string", "maxLength": FINISH_MAX_LENGTH}},
                "required": ["text"],
            },
        },
    }
    return StepBinding("act", [dispatch_tool([*domain, finish])], DISPATCH_TOOL, ACTION_MAX_TOKENS)


def unwrap_no_plan(message: Any) -> Any:
    """``unwrap_dispatch``, with a call of ``answer`` turned into the plain reply it carries."""
    if isinstance(message, AIMessage):
        for call in message.tool_calls:
            args = call["args"]
            if call["name"] == DISPATCH_TOOL and args.get("name") == FINISH_TOOL:
                arguments = args.get("arguments")
                text = arguments.get("text") if isinstance(arguments, dict) else None
                return AIMessage(content=str(text or "").strip(), id=message.id)
    return unwrap_dispatch(message)


def bind_no_plan(model: BaseChatModel, binding: StepBinding) -> Any:
    """``model`` bound to a ``no_plan_binding`` step, its dispatch call unwrapped."""
    bound = model.bind_tools(
        binding.tools,
        tool_choice=binding.tool_choice,
        temperature=TEMPERATURE,
        max_tokens=binding.max_tokens,
    )
    return bound | RunnableLambda(unwrap_no_plan)
