"""Answers for tool calls the model botched, so the conversation stays valid.

When a model sends tool-call arguments that are not valid JSON, langchain-openai moves the call
to ``AIMessage.invalid_tool_calls`` and still sends it back to the server on the next request.
OpenAI-compatible servers reject an assistant tool call without a tool result, so each one gets an
error ``ToolMessage`` in our envelope, and the model can retry with a well-formed call.
"""

from __future__ import annotations

import json

from langchain_core.messages import AIMessage, ToolMessage

from agent.tools.errors import ErrorCode


def invalid_tool_call_messages(message: AIMessage) -> list[ToolMessage]:
    """One error tool message per invalid tool call of ``message``."""
    replies = []
    for index, call in enumerate(message.invalid_tool_calls):
        name = call.get("name") or "unknown"
        envelope = {
            "error": ErrorCode.VALIDATION_ERROR.value,
            "message": f"The arguments of your call to `{name}` are not valid JSON"
            + (f": {call['error']}" if call.get("error") else "."),
            "suggestion": f"Call `{name}` again with a JSON object matching its schema.",
        }
        replies.append(
            ToolMessage(
                content=json.dumps(envelope, ensure_ascii=False),
                tool_call_id=call.get("id") or f"invalid_call_{index}",
                name=name,
                status="error",
            )
        )
    return replies
