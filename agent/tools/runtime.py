"""What a tool may know about its run, read from the injected ``ToolRuntime``.

Tools declare ``runtime: ToolRuntime[Context, Any]``. (Parametrising the state type as the
dataclass makes pydantic warn when it serialises the runtime, so tools read state through these
helpers instead, which also accept a plain dict state.)
"""

from __future__ import annotations

from typing import Any

from langgraph.prebuilt import ToolRuntime

from agent.context import Context
from agent.errors import ErrorCode, ToolFailure
from storage.repositories import TurnScope

ToolRuntimeT = ToolRuntime[Context, Any]


def state_value(runtime: ToolRuntimeT, key: str, default: Any = None) -> Any:
    """One state field, whether the graph's state is a dataclass or a dict."""
    state = runtime.state
    if isinstance(state, dict):
        return state.get(key, default)
    return getattr(state, key, default)


def run_context(runtime: ToolRuntimeT) -> Context:
    """The run's settings; a run started without a context gets the defaults."""
    context = runtime.context
    return context if isinstance(context, Context) else Context()


def turn_scope(runtime: ToolRuntimeT) -> TurnScope:
    """The conversation and turn of this call, from graph state (never from the model)."""
    conversation_id = state_value(runtime, "conversationId", "") or ""
    turn_id = state_value(runtime, "turnId", "") or ""
    if not conversation_id or not turn_id:
        raise ToolFailure(
            ErrorCode.VALIDATION_ERROR,
            "This tool is not available here: the run has no conversation or turn id.",
            "Answer the user without the turn plan tools.",
        )
    return TurnScope(conversation_id=conversation_id, turn_id=turn_id)
