"""A model reply with no text and no tool call is not an answer, and neither is a tool call
written out as text that no parser turned into a call.

Why: small local models (the embedded Gemma 3 270M, measured) and some compatible servers return
empty completions: content ``""`` or null, only whitespace, or only blocks without text (a
reasoning block, say). ``drain`` took any reply without a tool call for the turn's answer, so
the user got nothing, reported as ``answered``. Now ``drain`` asks once more
(``prompts/answer_required.md``: an ordinary model call, counted against the budget like any
other); a second empty reply in a row, or an empty one on the last call the budget allows,
ends the turn ``no_answer`` with a message built from the rows (``no_answer_message``), never
from the model. A spent budget with items still open keeps its own honest ending
(``budget_exhausted``), which already says what was and was not done.

A reply whose text is a tool call the server did not parse (``<tool_call>{...}``, ``<tools>
<create_todo items=...``, a bare ``{"name": ..., "arguments": ...}``: measured on the packaged
Qwen2.5-Coder 1.5B) did nothing, yet read as the turn's answer: it is asked again once
(``prompts/tool_call_as_text.md``), and a second such reply ends the turn ``no_answer`` saying
so (``prompts/written_tool_call.md``).

Only pure functions of the messages live here, so every path that can answer (``plan``'s
direct answer, ``execute``, an answer to a reminder or to the approval decision, either prompt
profile) gets the same rule by going through ``drain``.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage

from agent.tool_names import TODO_TOOL_NAMES
from agent.turn.identity import REMINDER_NAME, message_text
from agent.turn.outcome import no_answer_message, written_tool_call_message
from prompts import Prompts, chosen
from storage.models import TurnTodo

ANSWER_REQUIRED_ID = "turnplan-answer-required-"
"""Prefix of the id of the graph's "a reply is required" message: how ``drain`` knows the empty
reply it judges answered that request (its text may come from a deployment's own prompts)."""


def is_empty_reply(message: BaseMessage | None) -> bool:
    """An AI message with no text (whitespace and non-text blocks do not count) and no tool
    call, valid or not (a malformed call gets an error result and another try, not this)."""
    return (
        isinstance(message, AIMessage)
        and not message.tool_calls
        and not message.invalid_tool_calls
        and not message_text(message).strip()
    )


_MARKUP = re.compile(
    r"</?tool_call>|<tools>|<function[=\s>]|\[TOOL_CALLS\]|<\|python_tag\|>|<\|tool_call"
    rf"|^\s*<\s*(?:{'|'.join(sorted(TODO_TOOL_NAMES))})\b",
    re.IGNORECASE,
)


def is_written_tool_call(message: BaseMessage | None) -> bool:
    """An AI message without a tool call whose text is one written out: tool-call markup a
    chat template uses, or, alone, a JSON object with a ``name`` and its ``arguments``."""
    if not isinstance(message, AIMessage) or message.tool_calls or message.invalid_tool_calls:
        return False
    text = message_text(message).strip()
    if _MARKUP.search(text):
        return True
    fenced = text.removeprefix("```json").removeprefix("```").removesuffix("```").strip()
    try:
        value = json.loads(fenced)
    except ValueError:
        return False
    calls = value if isinstance(value, list) else [value]
    return bool(calls) and all(
        isinstance(call, dict)
        and isinstance(call.get("name"), str)
        and isinstance(call.get("arguments", call.get("parameters")), dict)
        for call in calls
    )


def answer_required(*, written_call: bool = False, prompts: Prompts | None = None) -> HumanMessage:
    """The request for a reply after an empty one (or one that wrote its tool call as text);
    named like the reminders, so it never opens a turn
    (``agent.turn.identity.latest_human_message``)."""
    return HumanMessage(
        content=chosen(prompts).load("tool_call_as_text" if written_call else "answer_required"),
        name=REMINDER_NAME,
        id=f"{ANSWER_REQUIRED_ID}{uuid.uuid4()}",
    )


def _asked_again(messages: Sequence[AnyMessage]) -> bool:
    """The newest message (an empty reply) answers the graph's request for a reply."""
    if len(messages) < 2:
        return False
    asked = messages[-2]
    return isinstance(asked, HumanMessage) and (asked.id or "").startswith(ANSWER_REQUIRED_ID)


def after_empty_reply(
    messages: Sequence[AnyMessage],
    rows: Sequence[TurnTodo],
    *,
    call_left: bool,
    prompts: Prompts | None = None,
) -> dict[str, Any] | None:
    """``drain``'s decision when the newest message is an empty reply (None when it is not):
    ask once more while a call is left, else end the turn ``no_answer``. The caller first
    ends a turn whose budget is spent with items still open as ``budget_exhausted``."""
    if not messages:
        return None
    written = is_written_tool_call(messages[-1])
    if not written and not is_empty_reply(messages[-1]):
        return None
    asked_again = _asked_again(messages)
    if call_left and not asked_again:
        return {"messages": [answer_required(written_call=written, prompts=prompts)]}
    if written:
        text = written_tool_call_message(rows, asked_again=asked_again, prompts=prompts)
    else:
        text = no_answer_message(rows, asked_again=asked_again, prompts=prompts)
    return {"messages": [AIMessage(content=text)], "turnStatus": "no_answer"}


def without_empty_replies(messages: Sequence[AnyMessage]) -> list[AnyMessage]:
    """``messages`` without empty replies, for a model's prompt: they carry nothing, and some
    providers reject an assistant message without content (Anthropic does, for any but the
    last), which would fail the very call that asks for a reply."""
    return [message for message in messages if not is_empty_reply(message)]
