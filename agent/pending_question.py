"""A new message on a thread paused at ``ask_user`` is the answer, not a new turn.

A user who types into the chat box while the agent waits for their answer means it as the
answer, and a client that does not know about interrupts can only send messages. So when a turn
is still running, and the message before the new one is an AI message whose ``ask_user`` call
has no result, the ``plan`` node turns the new message into that call's result and the turn
goes on; the new message itself leaves the history, because a tool result must follow the AI
message that asked for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    HumanMessage,
    RemoveMessage,
    ToolCall,
    ToolMessage,
)

from agent.tool_names import ASK_USER
from agent.tools.ask_user import answer_text
from agent.turn_identity import message_text


def pending_question(messages: Sequence[AnyMessage], human: HumanMessage) -> ToolCall | None:
    """The unanswered ``ask_user`` call the new ``human`` message answers, if there is one."""
    try:
        position = next(i for i, m in enumerate(messages) if m is human)
    except StopIteration:
        return None
    answered: set[str] = set()
    for message in reversed(messages[:position]):
        if isinstance(message, ToolMessage):
            answered.add(message.tool_call_id)
        elif isinstance(message, AIMessage):
            return next(
                (
                    call
                    for call in message.tool_calls
                    if call["name"] == ASK_USER and call["id"] not in answered
                ),
                None,
            )
        else:
            return None
    return None


def answer_with_message(call: ToolCall, human: HumanMessage) -> dict[str, Any]:
    """The state update that makes ``human`` the result of ``call``."""
    assert human.id, "add_messages gives every message an id"
    return {
        "messages": [
            RemoveMessage(id=human.id),
            ToolMessage(
                content=answer_text(message_text(human)),
                tool_call_id=call["id"] or "",
                name=ASK_USER,
            ),
        ]
    }
