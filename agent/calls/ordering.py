"""A tools node: LangGraph's ``ToolNode`` with our error envelope and a call order that keeps
the plan consistent while independent calls run side by side.

Shared by the supervisor (``agent.nodes.tools_node`` adds its turn check) and the workers.

``ToolNode`` starts every call of one AI message at once. Two kinds of call are told apart:

- calls *in order* (the todo tools and ``ask_user``, see
  ``agent.tool_names.ORDERED_TOOL_NAMES``, and any tool whose ``metadata`` sets
  ``"turnplan_in_order": True``, as the built-in task tools do: their calls depend on each
  other's effects) wait for every call written before them: a supervisor that completes row k
  and starts row k+1 in one message, or plans and acts in one message, has them applied in the
  order it wrote them;
- every other call waits only for the calls in order written before it, then runs beside the
  other free calls, at most ``Context.max_parallel_tools`` at a time: the twenty actions of a
  stage, or three delegations, take about as long as the slowest of them.

Results come back in call order (``ToolNode`` gathers them so). The bookkeeping belongs to one run
of the node (a ``ToolsStep``, made when the node starts and carried to each of its calls in the
call's config, ``RunnableConfig["configurable"]``): separate threads served by one process, or
the same thread resumed, each have their own, and nothing outlives the step.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.errors import GraphBubbleUp
from langgraph.prebuilt import ToolNode
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command

from agent.calls.injected_args import quiet_injected_args
from agent.calls.safe_input import unstorable_arguments, unstorable_failure
from agent.context import Context, ContextDefaults, run_settings
from agent.errors import tool_error_content
from agent.tool_names import IN_ORDER_METADATA, ORDERED_TOOL_NAMES
from agent.turn.identity import issuing_message

ToolResult = ToolMessage | Command[Any]
Execute = Callable[[ToolCallRequest], Awaitable[ToolResult]]


@dataclass(frozen=True)
class CallPlace:
    """Where a call stands among the calls of its AI message in one run of the tools node,
    handed to the wrapper with the call: ``memo``, what the wrapper keeps once for all the
    calls of the message (a read, a batch writer) and which goes with the node's input;
    ``position``, the call's index in the message (a call id the model repeated still has one
    of its own), None for a call that is not one of its message's."""

    memo: dict[str, Any]
    position: int | None


Wrapper = Callable[[ToolCallRequest, Execute, CallPlace], Awaitable[ToolResult]]
"""Runs each call, in call order, told its place (a ``ToolFailure`` it raises answers the call
instead)."""


class CallAbandoned(Exception):
    """An earlier call of the same message paused the run (an interrupt): this call waits for
    the resumed run instead of running while the user has not answered."""


DEFAULT_PARALLEL_TOOLS = Context().max_parallel_tools
"""Free calls of one message running at once in a run whose context is not a ``Context``."""


@dataclass(eq=False)
class _MessageCalls:
    """The calls of one AI message in one run of the tools node: when each has finished, which
    may start, and whether one of them paused the run (then the rest do not start)."""

    call_ids: list[str]
    in_order: list[bool]
    slots: asyncio.Semaphore
    finished: list[asyncio.Event] = field(default_factory=list)
    claimed: set[int] = field(default_factory=set)
    paused: bool = False
    memo: dict[str, Any] = field(default_factory=dict)
    """What the wrapper keeps for all the calls of this message in this run (``CallPlace``)."""

    def __post_init__(self) -> None:
        self.finished = [asyncio.Event() for _ in self.call_ids]

    def claim(self, call_id: str) -> int | None:
        """The position of this call in the message (the first unclaimed one with its id, so
        a model that repeats an id still gets each call placed once)."""
        for index, candidate in enumerate(self.call_ids):
            if candidate == call_id and index not in self.claimed:
                self.claimed.add(index)
                return index
        return None

    async def wait_turn(self, index: int) -> None:
        """Wait for the calls this one must follow: all earlier calls if it is in order, else
        the earlier calls in order."""
        for earlier in range(index):
            if self.in_order[index] or self.in_order[earlier]:
                await self.finished[earlier].wait()


TOOLS_STEP = "turnplan_tools_step"
"""The ``configurable`` key under which a run of an ``OrderedToolNode`` hands its ``ToolsStep`` to
each of its calls."""


@dataclass(eq=False)
class ToolsStep:
    """One run of a tools node: the bookkeeping of the calls of each AI message it runs (one, in
    a graph), made by the first call of the message to arrive. It lives as long as the run of the
    node, so a call that finishes before its neighbours start (an answer already in the state)
    leaves its mark for them."""

    messages: dict[str, _MessageCalls] = field(default_factory=dict)


def tools_step(config: Mapping[str, Any] | None) -> ToolsStep | None:
    """The ``ToolsStep`` a tool call's config carries (None outside an ``OrderedToolNode``)."""
    step = ((config or {}).get("configurable") or {}).get(TOOLS_STEP)
    return step if isinstance(step, ToolsStep) else None


def request_messages(request: ToolCallRequest) -> list[AnyMessage]:
    """The messages of the graph state a tool call runs in."""
    state = request.state
    messages = (
        state.get("messages", []) if isinstance(state, dict) else getattr(state, "messages", [])
    )
    return list(messages)


def existing_answer(request: ToolCallRequest) -> ToolMessage | None:
    """The tool message already in the state for this call (``ToolNode`` runs every call of the
    newest AI message, including one answered outside it, such as a question answered by the
    user's next message)."""
    call_id = request.tool_call.get("id")
    for message in reversed(request_messages(request)):
        if isinstance(message, ToolMessage) and message.tool_call_id == call_id:
            return message
        if isinstance(message, AIMessage):
            return None
    return None


def _tool_in_order(name: str, tools_by_name: dict[str, BaseTool]) -> bool:
    tool = tools_by_name.get(name)
    metadata = (tool.metadata or {}) if tool is not None else {}
    return name in ORDERED_TOOL_NAMES or bool(metadata.get(IN_ORDER_METADATA))


def _message_calls(
    request: ToolCallRequest, tools_by_name: dict[str, BaseTool], limit: int
) -> _MessageCalls:
    """The bookkeeping of the message that issued this call, made by its first call to arrive."""
    step = tools_step(request.runtime.config if request.runtime is not None else None)
    if step is None:
        raise RuntimeError(
            "Ordered tool calls run inside an OrderedToolNode (build_tools_node), which gives "
            "each run of the node its own bookkeeping; this call came without one."
        )
    call_id = request.tool_call.get("id") or ""
    issuer = issuing_message(request_messages(request), call_id)
    if issuer is None:
        key = f"call:{call_id}"
    else:  # a message in a graph's state has an id (``add_messages`` gives it one)
        key = issuer.id or "calls:" + "\x1f".join(
            call.get("id") or "" for call in issuer.tool_calls
        )
    existing = step.messages.get(key)
    if existing is not None:
        return existing
    tool_calls = issuer.tool_calls if issuer is not None else [request.tool_call]
    calls = step.messages[key] = _MessageCalls(
        call_ids=[call.get("id") or "" for call in tool_calls],
        in_order=[_tool_in_order(call["name"], tools_by_name) for call in tool_calls],
        slots=asyncio.Semaphore(max(1, limit)),
    )
    return calls


async def run_in_call_order(
    request: ToolCallRequest,
    execute: Execute,
    inner: Wrapper | None = None,
    *,
    tools_by_name: dict[str, BaseTool] | None = None,
    limit: int = DEFAULT_PARALLEL_TOOLS,
) -> ToolResult:
    """Run one tool call once the calls it must follow have finished (see the module docstring).

    A call that pauses the run (``interrupt()``) stops the ones after it that have not started:
    ``ToolNode`` gathers its calls without cancelling the rest, which would otherwise run while
    the run waits for the user.
    """
    calls = _message_calls(request, tools_by_name or {}, limit)
    index = calls.claim(request.tool_call.get("id") or "")
    if index is None:  # not a call of the message it names: nothing to wait for
        return await _run_call(request, execute, inner, calls, None)
    try:
        await calls.wait_turn(index)
        if calls.in_order[index]:
            return await _run_call(request, execute, inner, calls, index)
        async with calls.slots:
            return await _run_call(request, execute, inner, calls, index)
    finally:
        calls.finished[index].set()


async def _run_call(
    request: ToolCallRequest,
    execute: Execute,
    inner: Wrapper | None,
    calls: _MessageCalls,
    position: int | None,
) -> ToolResult:
    if calls.paused:
        raise CallAbandoned(request.tool_call.get("name", ""))
    answered = existing_answer(request)
    if answered is not None:
        return answered
    problems = unstorable_arguments(request.tool_call.get("args") or {})
    if problems:
        raise unstorable_failure(problems)
    try:
        if inner is not None:
            return await inner(request, execute, CallPlace(calls.memo, position))
        return await execute(request)
    except GraphBubbleUp:
        calls.paused = True
        raise


def parallel_limit(request: ToolCallRequest, defaults: ContextDefaults | None = None) -> int:
    """How many free calls of one message may run at once: the run's ``max_parallel_tools``
    (``agent.context.run_settings``: inside a user's graph, the graph's defaults and turnplan's
    keys of the parent's context)."""
    context = request.runtime.context if request.runtime is not None else None
    return run_settings(context, defaults).max_parallel_tools


def with_state_update(output: Any, update: Mapping[str, Any]) -> Any:
    """A ``ToolNode``'s output with ``update`` added to the state update it makes: its output is
    either one update (``{"messages": [...]}``) or a list of updates and ``Command``s, which
    LangGraph applies in turn."""
    if not update:
        return output
    if isinstance(output, dict):
        return {**output, **update}
    if isinstance(output, list):
        return [*output, dict(update)]
    return [output, dict(update)]


class OrderedToolNode(ToolNode):
    """LangGraph's ``ToolNode``, running the calls of one AI message in the order the module
    docstring gives; each run of the node carries a fresh ``ToolsStep`` to its calls."""

    def __init__(
        self,
        tools: Sequence[BaseTool],
        *,
        name: str = "tools",
        inner: Wrapper | None = None,
        defaults: ContextDefaults | None = None,
    ) -> None:
        # Users' tools as they are written (``runtime: ToolRuntime``) run without warnings.
        tools = [quiet_injected_args(tool) for tool in tools]
        tools_by_name = {tool.name: tool for tool in tools}

        async def wrap(request: ToolCallRequest, execute: Execute) -> ToolResult:
            limit = parallel_limit(request, defaults)
            return await run_in_call_order(
                request, execute, inner, tools_by_name=tools_by_name, limit=limit
            )

        super().__init__(
            list(tools), name=name, handle_tool_errors=tool_error_content, awrap_tool_call=wrap
        )

    def begin_step(self, input: Any) -> dict[str, Any]:
        """What a run of the node carries to its calls in their config, besides its
        ``ToolsStep``, by ``configurable`` key (a subclass adds its own)."""
        return {}

    def end_step(self, carried: Mapping[str, Any]) -> dict[str, Any]:
        """The state update a run of the node adds once its calls are done, from what it
        carried (a subclass's own)."""
        return {}

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        """Run the calls of the input's last AI message with a ``ToolsStep`` of their own."""
        carried = {TOOLS_STEP: ToolsStep(), **self.begin_step(input)}
        given = config or {}
        step_config: RunnableConfig = {
            **given,
            "configurable": {**(given.get("configurable") or {}), **carried},
        }
        output = await super().ainvoke(input, step_config, **kwargs)
        return with_state_update(output, self.end_step(carried))


def build_tools_node(
    tools: Sequence[BaseTool], *, name: str = "tools", inner: Wrapper | None = None
) -> OrderedToolNode:
    """A tools node whose recoverable errors reach the model as error ``ToolMessage``s;
    ``inner`` wraps each call inside the ordering."""
    return OrderedToolNode(tools, name=name, inner=inner)


__all__ = [
    "IN_ORDER_METADATA",
    "CallPlace",
    "OrderedToolNode",
    "ToolsStep",
    "build_tools_node",
    "run_in_call_order",
    "tools_step",
    "with_state_update",
]
