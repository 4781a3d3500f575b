"""What a tool may know about its run, read from the injected ``ToolRuntime``.

Tools declare ``runtime: ToolRuntimeT`` (``ToolRuntime[Context, Any]``), never a bare
``ToolRuntime``. langchain-core validates and then ``model_dump``s every tool's arguments,
injected runtime included, against the annotation; a bare ``ToolRuntime`` means
``ToolRuntime[None, dict]``, so our ``Context`` and dataclass state make pydantic emit
``PydanticSerializationUnexpectedValue`` on every call. The state stays ``Any`` because one tool
may run in the supervisor (``SupervisorState``) and in a worker (``WorkerState``): naming one
breaks the call in the other (pydantic dumps it as the wrong class). Tools therefore read state
through these helpers, which also accept a plain dict state.

That dump is thrown away (langchain-core keeps only its keys) but it walked the whole state, every
message of the thread included, on every call: a cost that grew with the turn. So the runtime
dumps as ``None``; ``InjectedToolArg`` keeps it out of the schema the model sees, as the bare
``ToolRuntime`` did.
"""

from __future__ import annotations

from typing import Annotated, Any, get_type_hints

from langchain_core.tools import BaseTool, InjectedToolArg, StructuredTool
from langgraph.prebuilt import ToolRuntime
from pydantic import PlainSerializer

from agent.context import Context, run_settings
from agent.errors import ErrorCode, ToolFailure
from agent.turn.identity import call_record_id, issuing_message
from storage.repositories import ToolCallKey, TurnScope

ToolRuntimeT = Annotated[
    ToolRuntime[Context, Any], InjectedToolArg(), PlainSerializer(lambda runtime: None)
]
"""How a tool declares its injected runtime: typed context, any graph state, no warnings."""


def state_value(runtime: ToolRuntimeT, key: str, default: Any = None) -> Any:
    """One state field, whether the graph's state is a dataclass or a dict."""
    state = runtime.state
    if isinstance(state, dict):
        return state.get(key, default)
    return getattr(state, key, default)


def run_context(runtime: ToolRuntimeT) -> Context:
    """The run's settings (``agent.context.run_settings``): in the supervisor, its tools node
    has already put them in the runtime with the graph's defaults; elsewhere (a worker, a
    graph of your own) a context that is not turnplan's gives the defaults."""
    return run_settings(runtime.context)


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


def call_key(runtime: ToolRuntimeT, tool_name: str) -> ToolCallKey:
    """This call, as its result is recorded for exactly-once replay (``agent.turn.call_ledger``)."""
    return record_key(runtime, tool_name, turn_scope(runtime))


def record_key(
    runtime: ToolRuntimeT, tool_name: str, scope: TurnScope | None = None
) -> ToolCallKey:
    """``call_key`` for tools that also run outside a turn (workers, scripts): with no turn
    scope in the state, the ids are taken as they are (empty ones record nothing)."""
    if scope is None:
        scope = TurnScope(
            state_value(runtime, "conversationId", "") or "",
            state_value(runtime, "turnId", "") or "",
        )
    call_id = runtime.tool_call_id or ""
    message = issuing_message(state_value(runtime, "messages", []) or [], call_id)
    return ToolCallKey(
        conversation_id=scope.conversation_id,
        turn_id=scope.turn_id,
        tool_call_id=call_record_id(message.id if message else None, call_id) if call_id else "",
        tool_name=tool_name,
    )


def resolve_annotations(tool: BaseTool) -> BaseTool:
    """Replace the annotations of ``tool``'s function by the types they name, once.

    langchain-core reads a tool function's type hints on every call (to find a
    ``RunnableConfig`` parameter); under ``from __future__ import annotations`` they are strings,
    which ``typing.get_type_hints`` compiles and evaluates each time: two of each plan item's
    tool calls spent more there than in the call itself. Resolved here with ``include_extras``,
    the ``Annotated`` markers (``InjectedToolArg``) stay as they were."""
    if isinstance(tool, StructuredTool):
        for function in (tool.func, tool.coroutine):
            if function is not None:
                function.__annotations__ = get_type_hints(function, include_extras=True)
    return tool
