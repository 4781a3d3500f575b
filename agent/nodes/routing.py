"""Where the supervisor goes after each node, read from the state alone.

Nodes return plain state updates and these functions pick the next node. Routing from the state
(not from a ``Command(goto=...)`` inside a node) is what lets Studio's "edit state" and
``threads.update_state(..., as_node=...)`` continue a turn: LangGraph computes the next node from
the edited state as if that node had just written it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from langchain_core.messages import AIMessage, AnyMessage, ToolMessage

from agent.state import SupervisorState

ModelStepTarget = Literal["tools", "drain", "__end__"]
DrainTarget = Literal["execute", "__end__"]
ToolsTarget = Literal["execute", "drain"]


def unanswered_tool_calls(messages: Sequence[AnyMessage]) -> list[str]:
    """Ids of the newest AI message's tool calls that no tool message has answered yet."""
    answered: set[str] = set()
    for message in reversed(messages):
        if isinstance(message, ToolMessage):
            answered.add(message.tool_call_id)
        elif isinstance(message, AIMessage):
            return [call["id"] or "" for call in message.tool_calls if call["id"] not in answered]
        else:
            return []
    return []


def after_model_step(state: SupervisorState) -> ModelStepTarget:
    """After ``plan`` or ``execute``: run the tool calls, else let ``drain`` judge the answer; a
    turn the step already ended (failed, or no new message) stops here."""
    if state.turnStatus != "running":
        return "__end__"
    if unanswered_tool_calls(state.messages):
        return "tools"
    return "drain"


def after_plan(state: SupervisorState) -> ModelStepTarget:
    """After ``plan``: as after a model step, except in a run that only edited the plan
    (``planEditResult`` set, no LLM call made): back to the pause the turn was at (its
    unanswered ``ask_user`` call, or ``drain`` for a plan awaiting approval), else the end. A
    run whose input was refused (``inputError``) changed nothing, and goes the same way."""
    if state.planEditResult is None and state.inputError is None:
        return after_model_step(state)
    if state.turnStatus != "running":
        return "__end__"
    if unanswered_tool_calls(state.messages):
        return "tools"
    if state.approvePlan and not state.planApproved:
        return "drain"
    return "__end__"


def after_drain(state: SupervisorState) -> DrainTarget:
    """After ``drain``: another model step while the turn runs, else the end."""
    return "execute" if state.turnStatus == "running" else "__end__"


def after_tools(state: SupervisorState) -> ToolsTarget:
    """After ``tools``: straight on to the next model step, which counts the round against the
    budget itself; ``drain`` first while a plan awaits the user's approval (it asks)."""
    return "drain" if state.approvePlan and not state.planApproved else "execute"
