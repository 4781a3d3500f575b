"""Which turn a run is: the newest human message names it.

``turnId`` is the ``turnId`` in that message's metadata (a client that tracks its own turns sends
it), else the message's id (LangGraph gives every message one). ``conversationId`` is the
context's explicit value, else the LangGraph thread.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langchain_core.runnables import RunnableConfig

from agent.errors import ErrorCode, ToolFailure
from storage.ids import canonical_id

REMINDER_NAME = "turnplan"
"""``name`` of the human-role reminders the graph itself writes; they never open a turn."""


def latest_human_message(messages: Sequence[AnyMessage]) -> HumanMessage | None:
    """The newest message the user wrote (the graph's own reminders are skipped)."""
    for message in reversed(messages):
        if isinstance(message, HumanMessage) and message.name != REMINDER_NAME:
            return message
    return None


def _metadata_turn_id(message: HumanMessage) -> str | None:
    for source in (message.additional_kwargs, message.response_metadata):
        metadata: Any = source.get("metadata")
        if isinstance(metadata, dict) and metadata.get("turnId"):
            return str(metadata["turnId"])
        if source.get("turnId"):
            return str(source["turnId"])
    return None


def turn_id_of(message: HumanMessage) -> str:
    """The message's ``metadata.turnId``, else its id."""
    return _metadata_turn_id(message) or message.id or str(uuid.uuid4())


def message_text(message: AnyMessage) -> str:
    """Plain text of a message whose content may be a list of content blocks."""
    content = message.content
    if isinstance(content, str):
        return content
    parts = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict) and block.get("type") == "text":
            parts.append(str(block.get("text", "")))
    return "\n".join(parts)


def conversation_id_of(
    explicit: str | None, config: RunnableConfig | None, previous: str = ""
) -> str:
    """Explicit context value, else the thread id, else the id this state already had, else a
    fresh one (a run without a thread is a conversation of one turn); always in its canonical
    form (``storage.ids``), the one the ownership check, the rows and the task file all use,
    so a conversation spelt another way is still the same conversation with the same owner."""
    if explicit:
        return canonical_id(explicit)
    configurable = (config or {}).get("configurable") or {}
    thread_id = configurable.get("thread_id")
    if thread_id:
        return canonical_id(str(thread_id))
    return canonical_id(previous) if previous else str(uuid.uuid4())


def issuing_message(messages: Sequence[AnyMessage], tool_call_id: str) -> AIMessage | None:
    """The newest AI message that made the tool call ``tool_call_id``."""
    for message in reversed(messages):
        if isinstance(message, AIMessage) and any(
            call.get("id") == tool_call_id for call in message.tool_calls
        ):
            return message
    return None


def call_record_id(message_id: str | None, tool_call_id: str) -> str:
    """The id a tool call's result is recorded under: the issuing AI message's id with the call
    id, because some OpenAI-compatible servers number tool calls afresh in every response."""
    return f"{message_id}/{tool_call_id}" if message_id else tool_call_id


def refuse_a_reused_call_id(issuer: AIMessage | None, call: Mapping[str, Any]) -> None:
    """Raise ``ToolFailure`` (``VALIDATION_ERROR``) when an earlier call of the same message has
    this call's id with another tool or other arguments: its result is recorded under that id
    (``call_record_id``), so running it would give it the earlier call's result, or that one
    this one's. The same call repeated under one id is still one call, run once."""
    if issuer is None:
        return
    call_id = call.get("id")
    first = next((c for c in issuer.tool_calls if c.get("id") == call_id), None)
    if first is None or (first["name"], first["args"]) == (call.get("name"), call.get("args")):
        return
    raise ToolFailure(
        ErrorCode.VALIDATION_ERROR,
        f"This call reuses the id '{call_id}' of an earlier {first['name']} call in the same "
        "message, with other arguments; it was not run and nothing changed.",
        "Make this call again in a new message.",
    )
