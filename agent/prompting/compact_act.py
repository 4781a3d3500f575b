"""The act step of the compact profile: the one call that does the item in progress.

Why: an item planned with a tool is offered that tool alone, its free-text arguments fixed
from the user's words, and when that leaves the model no choice the harness makes the call
itself (no model call); an action on an existing task looks the task up first and may stop to
ask (``agent.prompting.compact_questions``); a worker's item is handed over; any other item
gets the domain tools with grounded strings in one forced ``use_tool`` call. A lone step done
without a plan (planning ``auto``) is made here too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool

from agent.prompting.compact_binding import (
    ACTION_MAX_TOKENS,
    DELEGATE,
    StepBinding,
    tool_call_message,
)
from agent.prompting.compact_lookup import looked_up, lookup_call, lookup_tool, task_reference
from agent.prompting.compact_plan import (
    NO_TOOL_OUTCOME,
    NOT_AN_ACTION,
    PlannedAction,
    agent_type,
    planned_action,
    stored_action,
)
from agent.prompting.compact_questions import chosen_task, unconfirmed_step
from agent.prompting.compact_schemas import (
    DISPATCH_TOOL,
    compact_tool,
    dispatch_tool,
    ground_strings,
    grounded_phrases,
    is_free_string,
)
from agent.tool_names import ASK_USER
from prompts import Prompts
from storage.models import TurnTodo


def act_binding(
    current: TurnTodo,
    by_name: Mapping[str, BaseTool],
    domain_tools: Sequence[BaseTool],
    history: Sequence[AnyMessage],
    request: str,
    prompts: Prompts | None = None,
) -> StepBinding:
    """The act step of the item in progress: its planned action (asked about first when it
    cannot be taken back and the words are not this turn's), its worker, or the model's choice
    among the domain tools with grounded strings."""
    planned = planned_action(current)
    if planned is not None and planned.tool == NOT_AN_ACTION:
        args = {"todoId": current.id, "outcome": NO_TOOL_OUTCOME, "status": "cancelled"}
        return StepBinding(
            "close",
            [],
            "complete_todo",
            ACTION_MAX_TOKENS,
            reply=tool_call_message("complete_todo", args),
        )
    if planned is not None and planned.tool in by_name:
        unconfirmed = unconfirmed_step(
            by_name[planned.tool], current, planned, history, request, prompts=prompts
        )
        if unconfirmed is not None:
            return unconfirmed
        return planned_action_binding(
            by_name[planned.tool],
            planned,
            domain_tools,
            history,
            todo_id=current.id,
            can_ask=ASK_USER in by_name,
            prompts=prompts,
        )
    if planned is not None and current.agentType and DELEGATE in by_name:
        # A worker's tool: the harness hands the item to the worker its row names.
        reply = tool_call_message(DELEGATE, {"todoId": current.id})
        return StepBinding("act", [], DELEGATE, ACTION_MAX_TOKENS, reply=reply)
    close = compact_tool(by_name["complete_todo"], todo_id=current.id)
    phrases = grounded_phrases(current, request)
    domain = [ground_strings(compact_tool(tool), phrases) for tool in domain_tools]
    return StepBinding("act", [dispatch_tool([*domain, close])], DISPATCH_TOOL, ACTION_MAX_TOKENS)


def direct_action(
    items: Sequence[Mapping[str, Any]],
    tools: Sequence[BaseTool],
    history: Sequence[AnyMessage] = (),
    *,
    can_ask: bool = False,
    prompts: Prompts | None = None,
) -> AIMessage | None:
    """The call of a lone item whose arguments the user's words fix, made without a plan."""
    if len(items) != 1:
        return None
    action = stored_action(items[0].get("context"))
    by_name = {tool.name: tool for tool in tools}
    if action is None or action.tool not in by_name or agent_type(by_name[action.tool]):
        return None
    binding = planned_action_binding(
        by_name[action.tool], action, tools, history, can_ask=can_ask, prompts=prompts
    )
    return binding.reply


def planned_action_binding(
    tool: BaseTool,
    planned: PlannedAction,
    tools: Sequence[BaseTool] = (),
    history: Sequence[AnyMessage] = (),
    *,
    todo_id: str | None = None,
    can_ask: bool = False,
    prompts: Prompts | None = None,
) -> StepBinding:
    """The act step of an item whose tool the plan chose: only that tool, its first free text
    argument the item's target, any other the other quoted words of its clause. When that
    leaves the model no choice, the harness makes the call itself. A tool that acts on one
    listed task first gets the list (its lookup tool, called by the harness), and its target is
    the id of the task the user's words name without doubt (``agent.prompting.compact_lookup``);
    when they name none, the harness asks which (``can_ask``: ``ask_user`` is bound) or says
    plainly that nothing was changed. ``todo_id`` is the item in progress (None: a one-step
    request done without a plan), which such an outcome closes as cancelled."""
    definition = compact_tool(tool)
    parameters = definition["function"]["parameters"]
    quotes = planned.clause_quotes
    others = [phrase for phrase in quotes if phrase != planned.target]
    target = planned.target
    lister = lookup_tool(tool, tools)
    if lister is not None:
        listed = looked_up(history)
        if listed is None:
            reply = lookup_call(lister)
            return StepBinding("act", [], lister.name, ACTION_MAX_TOKENS, reply=reply)
        chosen = chosen_task(
            target, listed, target in quotes, history, todo_id, can_ask, prompts=prompts
        )
        if isinstance(chosen, StepBinding):
            return chosen
        target = task_reference(chosen)
    if others:
        # The clause quotes a second phrase ("rename 'a' to 'b'"): the first optional free
        # text argument (a new title) takes it; the compact schema drops optional ones.
        full = convert_to_openai_tool(tool)["function"].get("parameters", {})
        optional = [
            name
            for name, schema in full.get("properties", {}).items()
            if name not in parameters.get("properties", {}) and is_free_string(schema)
        ]
        if optional:
            parameters.setdefault("properties", {})[optional[0]] = {"type": "string"}
            parameters.setdefault("required", []).append(optional[0])
    first = True
    fixed: dict[str, Any] = {}
    choice = False
    for name, schema in parameters.get("properties", {}).items():
        if is_free_string(schema):
            options = [target] if first or not others else others
            first = False
            parameters["properties"][name] = {"enum": options}
            schema = parameters["properties"][name]
        values = schema.get("enum") or ([schema["const"]] if "const" in schema else None)
        if values is not None and len(values) == 1:
            fixed[name] = values[0]
        else:
            choice = True
    if not choice:
        return StepBinding(
            "act", [], tool.name, ACTION_MAX_TOKENS, reply=tool_call_message(tool.name, fixed)
        )
    return StepBinding("act", [definition], tool.name, ACTION_MAX_TOKENS)
