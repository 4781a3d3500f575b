"""What a tool may know about its run, read from the injected ``ToolRuntime``.

Tools declare ``runtime: ToolRuntimeT`` (``ToolRuntime[Context, Any]``), never a bare
``ToolRuntime``. langchain-core validates and then ``model_dump``s every tool's arguments,
injected runtime included, against the annotation; a bare ``ToolRuntime`` means
``ToolRuntime[None, dict]``, so our ``Context`` and dataclass state make pydantic emit
``PydanticSerializationUnexpectedValue`` on every call. The state stays ``Any`` because one tool
may run in the supervisor (``SupervisorState``) and in a worker (``WorkerState``): naming one
breaks the call in the other (pydantic dumps it as the wrong class). Tools therefore read state
through these helpers, which also accept a plain dict state.
"""

from __future__ import annotations

from typing import Any

from langgraph.prebuilt import ToolRuntime

from agent.context import Context
from agent.tools.errors import ErrorCode, ToolFailure
from storage.repositories import TurnScope

ToolRuntimeT = ToolRuntime[Context, Any]
"""How a tool declares its injected runtime: typed context, any graph state, no warnings."""


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
