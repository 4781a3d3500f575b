"""A tools node: LangGraph's ``ToolNode`` with our error envelope and in-order execution.

Shared by the supervisor (``agent.nodes.tools`` adds its turn check) and the workers.

``ToolNode`` runs the calls of one AI message concurrently. A supervisor that completes row k and
starts work on row k+1 in the same message needs them applied in the order the model wrote them,
so each call waits for the one before it. The wait is keyed by the AI message, so separate threads
served by one process still run side by side.
"""

from __future__ import annotations

import asyncio
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

from agent.errors import ErrorCode, ToolFailure, tool_error_content
from agent.safe_input import unstorable_arguments
from agent.turn_identity import issuing_message

ToolResult = ToolMessage | Command[Any]
Execute = Callable[[ToolCallRequest], Awaitable[ToolResult]]
Wrapper = Callable[[ToolCallRequest, Execute], Awaitable[ToolResult]]
"""Runs each call, in call order (a ``ToolFailure`` it raises answers the call instead)."""


class CallAbandoned(Exception):
    """An earlier call of the same message paused the run (an interrupt): this call waits for
    the resumed run instead of running while the user has not answered."""


@dataclass(eq=False)
class _MessageCalls:
    """The calls of one AI message in one run of the tools node: they take turns, and once one
    of them pauses the run, the rest do not start."""

    state: object
    """The node's input; held so the ``id`` in the key is not reused while this lives."""
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    paused: bool = False


_calls_by_message: weakref.WeakValueDictionary[tuple[str, int], _MessageCalls] = (
    weakref.WeakValueDictionary()
)


def _message_key(request: ToolCallRequest) -> str:
    """The id of the AI message that issued this call (or the call id when it cannot be found)."""
    call_id = request.tool_call.get("id") or ""
    message = issuing_message(request_messages(request), call_id)
    return call_id if message is None else f"{message.id or id(message)}"


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


async def run_in_call_order(
    request: ToolCallRequest, execute: Execute, inner: Wrapper | None = None
) -> ToolResult:
    """Run one tool call after the earlier calls of the same AI message have finished.

    ``ToolNode`` starts its calls in message order and ``asyncio.Lock`` wakes waiters first in,
    first out, so the calls complete in the order the model wrote them. A call that pauses the
    run (``interrupt()``) stops the ones after it: ``ToolNode`` gathers its calls without
    cancelling the rest, which would otherwise run while the run waits for the user.
    """
    key = (_message_key(request), id(request.state))
    calls = _calls_by_message.get(key)
    if calls is None:
        calls = _calls_by_message[key] = _MessageCalls(request.state)
    async with calls.lock:
        if calls.paused:
            raise CallAbandoned(request.tool_call.get("name", ""))
        answered = existing_answer(request)
        if answered is not None:
            return answered
        problems = unstorable_arguments(request.tool_call.get("args") or {})
        if problems:
            raise ToolFailure(
                ErrorCode.VALIDATION_ERROR,
                "The tool arguments cannot be accepted: " + "; ".join(problems) + ".",
                "Call the tool again with plain text and numbers that fit in 64 bits.",
            )
        try:
            if inner is not None:
                return await inner(request, execute)
            return await execute(request)
        except GraphBubbleUp:
            calls.paused = True
            raise


def build_tools_node(
    tools: Sequence[BaseTool], *, name: str = "tools", inner: Wrapper | None = None
) -> ToolNode:
    """A tools node whose recoverable errors reach the model as error ``ToolMessage``s;
    ``inner`` wraps each call inside the ordering."""

    async def wrap(request: ToolCallRequest, execute: Execute) -> ToolResult:
        return await run_in_call_order(request, execute, inner)

    return ToolNode(
        list(tools),
        name=name,
        handle_tool_errors=tool_error_content,
        awrap_tool_call=wrap,
    )
