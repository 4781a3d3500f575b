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

Results come back in call order (``ToolNode`` gathers them so). The bookkeeping is keyed by the AI
message and the node's input, so separate threads served by one process still run side by side.
"""

from __future__ import annotations

import asyncio
import contextvars
import weakref
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, ToolMessage
from langchain_core.tools import BaseTool
from langgraph.errors import GraphBubbleUp
from langgraph.prebuilt import ToolNode
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command

from agent.calls.safe_input import unstorable_arguments, unstorable_failure
from agent.context import Context
from agent.errors import tool_error_content
from agent.tool_names import IN_ORDER_METADATA, ORDERED_TOOL_NAMES
from agent.turn.identity import issuing_message

ToolResult = ToolMessage | Command[Any]
Execute = Callable[[ToolCallRequest], Awaitable[ToolResult]]
Wrapper = Callable[[ToolCallRequest, Execute], Awaitable[ToolResult]]
"""Runs each call, in call order (a ``ToolFailure`` it raises answers the call instead)."""


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
    """What the wrapper keeps for all the calls of this message in this run (see
    ``message_memo``)."""

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

    @property
    def all_finished(self) -> bool:
        return all(event.is_set() for event in self.finished)


_calls_by_state: weakref.WeakKeyDictionary[object, dict[str, _MessageCalls]] = (
    weakref.WeakKeyDictionary()
)
"""The bookkeeping of each node input (the graph state a tools step runs on), by AI message: it
lives as long as that input, so a call that finishes before its neighbours start (an answer
already in the state) leaves its mark for them."""

_calls_by_state_id: dict[tuple[int, str], tuple[object, _MessageCalls]] = {}
"""The same for a state that cannot be weakly referenced (a plain dict): held, with the state so
its id is not reused, until every call of the message has finished."""


_running_message: contextvars.ContextVar[_MessageCalls | None] = contextvars.ContextVar(
    "turnplan_running_message", default=None
)
"""The message whose call the running task is making (each call runs in a task of its own)."""

_running_position: contextvars.ContextVar[int | None] = contextvars.ContextVar(
    "turnplan_running_position", default=None
)
"""The position in that message of the call the running task is making."""


def message_memo() -> dict[str, Any]:
    """A dict shared by the calls of one AI message in one run of the tools node, for the
    wrapper (``inner``) that is running one of them: what it reads or writes once for the whole
    message instead of once per call lives here, and goes with the node's input. Outside such a
    call, a fresh dict (nothing is shared)."""
    calls = _running_message.get()
    return calls.memo if calls is not None else {}


def call_position() -> int | None:
    """For the wrapper running a call: its position among the calls of its AI message (a call
    id the model repeated still has a position of its own); None outside such a call, or for a
    call that is not one of its message's."""
    return _running_position.get()


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
    call_id = request.tool_call.get("id") or ""
    issuer = issuing_message(request_messages(request), call_id)
    key = call_id if issuer is None else f"{issuer.id or id(issuer)}"
    state = request.state
    try:
        by_message = _calls_by_state.setdefault(state, {})
    except TypeError:
        by_message = None
    existing = (
        by_message.get(key)
        if by_message is not None
        else _calls_by_state_id.get((id(state), key), (None, None))[1]
    )
    if existing is not None:
        return existing
    tool_calls = issuer.tool_calls if issuer is not None else [request.tool_call]
    calls = _MessageCalls(
        call_ids=[call.get("id") or "" for call in tool_calls],
        in_order=[_tool_in_order(call["name"], tools_by_name) for call in tool_calls],
        slots=asyncio.Semaphore(max(1, limit)),
    )
    if by_message is not None:
        by_message[key] = calls
    else:
        _calls_by_state_id[(id(state), key)] = (state, calls)
    return calls


def _forget_when_done(calls: _MessageCalls) -> None:
    """Drop the held bookkeeping of a plain-dict state once every call has finished."""
    if not calls.all_finished:
        return
    for key, (_, held) in list(_calls_by_state_id.items()):
        if held is calls:
            del _calls_by_state_id[key]


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
        _forget_when_done(calls)


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
    token = _running_message.set(calls)
    position_token = _running_position.set(position)
    try:
        if inner is not None:
            return await inner(request, execute)
        return await execute(request)
    except GraphBubbleUp:
        calls.paused = True
        raise
    finally:
        _running_position.reset(position_token)
        _running_message.reset(token)


def parallel_limit(request: ToolCallRequest) -> int:
    """How many free calls of one message may run at once: the run's ``max_parallel_tools``."""
    context = request.runtime.context if request.runtime is not None else None
    if isinstance(context, Context):
        return context.max_parallel_tools
    return DEFAULT_PARALLEL_TOOLS


def build_tools_node(
    tools: Sequence[BaseTool], *, name: str = "tools", inner: Wrapper | None = None
) -> ToolNode:
    """A tools node whose recoverable errors reach the model as error ``ToolMessage``s;
    ``inner`` wraps each call inside the ordering."""
    tools_by_name = {tool.name: tool for tool in tools}

    async def wrap(request: ToolCallRequest, execute: Execute) -> ToolResult:
        return await run_in_call_order(
            request, execute, inner, tools_by_name=tools_by_name, limit=parallel_limit(request)
        )

    return ToolNode(
        list(tools),
        name=name,
        handle_tool_errors=tool_error_content,
        awrap_tool_call=wrap,
    )


__all__ = [
    "IN_ORDER_METADATA",
    "build_tools_node",
    "call_position",
    "message_memo",
    "run_in_call_order",
]
