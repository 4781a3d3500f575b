"""The model request of one call, as turnplan shapes it (``wrap_model_call``).

The same parts as the supervisor graph's calls (``agent.prompting.builder``): the tools of the
step's phase (``step_tools``: ``create_todo`` while there is no plan, ``complete_todo`` once
there is one; the agent's own tools on every call), turnplan's system prompt for the phase after
the agent's own, and the history window with the plan view (``model_messages``), so the model
always sees where the plan stands without a ``list_todo`` round trip.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from langchain.agents.middleware.types import ModelRequest
from langchain_core.messages import AnyMessage, SystemMessage
from langchain_core.tools import BaseTool

from agent.context import Context
from agent.prompting.builder import (
    FULL,
    history_limit,
    model_messages,
    step_phase,
    step_tools,
    system_prompt,
)
from prompts import Prompts
from storage.models import TurnTodo


def phase_tools(
    tools: Sequence[BaseTool | dict[str, Any]], rows: Sequence[TurnTodo], planning: str
) -> list[BaseTool | dict[str, Any]]:
    """The request's tools for this step: turnplan's plan tools of the phase, every other tool
    as the agent has it (provider tools given as dicts included)."""
    named = [tool for tool in tools if isinstance(tool, BaseTool)]
    kept = {id(tool) for tool in step_tools(named, rows, None, planning)}
    return [tool for tool in tools if not isinstance(tool, BaseTool) or id(tool) in kept]


def _tool_name(tool: BaseTool | dict[str, Any]) -> str:
    return tool.name if isinstance(tool, BaseTool) else str(tool.get("name", ""))


def turn_request(
    request: ModelRequest[Any],
    rows: Sequence[TurnTodo],
    settings: Context,
    recorded: Mapping[str, str] | None = None,
    prompts: Prompts | None = None,
) -> ModelRequest[Any]:
    """``request`` with the step's tools, turnplan's system prompt after the agent's, and the
    history window with the plan view; ``recorded``: the results of orphaned calls that ran,
    by call id (the others are answered as never run); ``prompts``: the middleware's texts.
    The turn's first call also gets the note on earlier turns a newer run stopped
    (``supersededNote``), as the supervisor graph's first call does."""
    state = request.state
    tools = phase_tools(request.tools, rows, settings.planning)
    names = [
        tool.name if isinstance(tool, BaseTool) else str(tool.get("name", "")) for tool in tools
    ]
    base = system_prompt(
        names,
        profile=FULL,
        phase=step_phase(rows),
        planning=settings.planning,
        prompts=prompts,
    )
    prompt = model_messages(
        base_prompt=base,
        history=request.messages,
        history_limit=history_limit(FULL, settings.history_limit, rows),
        rows=rows,
        turn_request=str(state.get("turnRequest", "")),
        turn_message_id=str(state.get("turnMessageId", "")) or None,
        profile=FULL,
        recorded=recorded,
        prompts=prompts,
    )
    superseded = str(state.get("supersededNote") or "") if not state.get("llmCalls") else ""
    if superseded:
        base = f"{base}\n\n{superseded}"
    own = request.system_prompt
    system = f"{own}\n\n{base}" if own else base
    return request.override(
        system_message=SystemMessage(content=system),
        messages=cast(list[AnyMessage], prompt[1:]),
        tools=tools,
    )
