"""The compact profile's turn under ``planning="off"``: no plan, no rows, a forced call a step.

Why apart from the planned loop (``agent.prompting.compact_tools``): with no plan there is
no item to read a tool or a target from, so every step offers the same domain tools plus
``answer`` (the way to finish) in one ``use_tool`` call, and the two loops can change
independently.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage
from langchain_core.runnables import RunnableLambda
from langchain_core.tools import BaseTool

from agent.prompting.compact_binding import (
    ACTION_MAX_TOKENS,
    TEMPERATURE,
    StepBinding,
)
from agent.prompting.compact_schemas import (
    DISPATCH_TOOL,
    compact_tool,
    dispatch_tool,
    ground_strings,
    unwrap_dispatch,
)
from agent.prompting.request_steps import QUOTED
from agent.tool_names import ASK_USER, TODO_TOOL_NAMES

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
        for match in QUOTED.finditer(request)
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
