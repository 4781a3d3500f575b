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
from typing import Any

from langchain_core.messages import AnyMessage, ToolMessage
from langchain_core.tools import BaseTool
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

_locks_by_message: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()


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


async def run_in_call_order(
    request: ToolCallRequest, execute: Execute, inner: Wrapper | None = None
) -> ToolResult:
    """Run one tool call after the earlier calls of the same AI message have finished.

    ``ToolNode`` starts its calls in message order and ``asyncio.Lock`` wakes waiters first in,
    first out, so the calls complete in the order the model wrote them.
    """
    key = _message_key(request)
    lock = _locks_by_message.get(key)
    if lock is None:
        lock = asyncio.Lock()
        _locks_by_message[key] = lock
    async with lock:
        problems = unstorable_arguments(request.tool_call.get("args") or {})
        if problems:
            raise ToolFailure(
                ErrorCode.VALIDATION_ERROR,
                "The tool arguments cannot be accepted: " + "; ".join(problems) + ".",
                "Call the tool again with plain text and numbers that fit in 64 bits.",
            )
        if inner is not None:
            return await inner(request, execute)
        return await execute(request)


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
