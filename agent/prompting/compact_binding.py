"""What one compact call is: its phase, tools, sampling settings, or the harness's own reply.

Every step of the compact profile (plan, act, close, answer) is described by a
``StepBinding``; this module holds that type, the sampling settings every step shares and the
tool call the harness writes on the model's behalf, so the modules that build each step
(``compact_plan_step``, ``compact_act``, ``compact_questions``, ``compact_no_plan``) and the
one that routes between them (``compact_tools``) share one small vocabulary that sits below
all of them.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from langchain_core.messages import AIMessage, AnyMessage
from langchain_core.tools import BaseTool

from agent.prompting.request_steps import RequestStep

TEMPERATURE = 0.2
PLAN_MAX_TOKENS = 200
ACTION_MAX_TOKENS = 120
ANSWER_MAX_TOKENS = 120

Phase = Literal["plan", "act", "close", "answer"]


DELEGATE = "delegate"
"""The supervisor's tool that hands an item to a worker (``agent.tools.delegate``)."""


@dataclass(frozen=True)
class StepBinding:
    """The tools and sampling settings of one compact call.

    ``reply`` is set when the harness knows the step's message without asking the model (the
    close of an item whose action returned, an action whose arguments are all fixed by the
    user's words); ``plan_steps`` when the call is the plan, answered as one tool per step of
    the request and turned into ``create_todo``.
    """

    phase: Phase
    tools: list[dict[str, Any]]
    tool_choice: str | None
    max_tokens: int
    reply: AIMessage | None = None
    plan_steps: tuple[RequestStep, ...] = ()
    plan_decided: Mapping[str, str] = field(default_factory=dict)
    plan_required: bool = False
    plan_tools: tuple[BaseTool, ...] = ()
    plan_history: tuple[AnyMessage, ...] = ()
    """The turn so far, for a lone step the model names and the harness then does (its lookup
    result, once made, is there)."""
    plan_can_ask: bool = False
    """Whether that lone step may ask the user which task they mean (``ask_user`` is bound)."""


def tool_call_message(name: str, args: dict[str, Any]) -> AIMessage:
    """A tool call the harness makes on the model's behalf (no model call)."""
    call_id = f"call_{uuid.uuid4().hex[:24]}"
    return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": call_id}])
