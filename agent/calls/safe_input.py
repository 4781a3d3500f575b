"""Tool-call arguments that no store can hold, found before any tool runs.

JSON allows what a database cannot take: a lone UTF-16 surrogate (``"\\ud800"`` is valid JSON
but not encodable as UTF-8, so SQLite and PostgreSQL drivers raise) and integers beyond 64 bits
(``OverflowError`` in the drivers). A model, or a client, can send either. Every tools node
checks a call's arguments with ``unstorable_arguments`` first and answers a bad call with a
``VALIDATION_ERROR`` that names the argument, without echoing the bad text back.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, InvalidToolCall, ToolMessage

from agent.errors import ErrorCode, ToolFailure, tool_error_content

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1


def _walk(value: Any, path: str) -> Iterator[tuple[str, Any]]:
    if isinstance(value, Mapping):
        for key, item in value.items():
            yield from _walk(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from _walk(item, f"{path}[{index}]")
    else:
        yield path, value


def _has_lone_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def unstorable_failure(problems: Sequence[str]) -> ToolFailure:
    """The error a call with unstorable arguments gets, naming them (``unstorable_arguments``)."""
    return ToolFailure(
        ErrorCode.VALIDATION_ERROR,
        "The tool arguments cannot be accepted: " + "; ".join(problems) + ".",
        "Call the tool again with plain text and numbers that fit in 64 bits.",
    )


def unstorable_arguments(arguments: Mapping[str, Any]) -> list[str]:
    """What is wrong with ``arguments``, one line per bad value (empty when all can be stored)."""
    problems = []
    for path, value in _walk(arguments, ""):
        if isinstance(value, str) and _has_lone_surrogate(value):
            problems.append(
                f"`{printable(path)}` contains an invalid character (an unpaired surrogate)"
            )
        elif (
            isinstance(value, int)
            and not isinstance(value, bool)
            and not INT64_MIN <= value <= INT64_MAX
        ):
            problems.append(f"`{printable(path)}` is out of range (integers must fit in 64 bits)")
        if _has_lone_surrogate(path):
            problems.append("an argument name contains an invalid character")
    return problems


def printable(text: str) -> str:
    """``text`` with each unpaired surrogate replaced by U+FFFD, safe to store, log or send."""
    if not _has_lone_surrogate(text):
        return text
    return "".join("\ufffd" if 0xD800 <= ord(char) <= 0xDFFF else char for char in text)


def unsendable(text: str) -> bool:
    """Whether ``text`` cannot be encoded for a model request or a store."""
    return _has_lone_surrogate(text)


def quarantine_unstorable_calls(message: AIMessage) -> tuple[AIMessage, list[ToolMessage]]:
    """The model's message made safe to keep and send back, and an error result for each tool
    call whose arguments cannot be stored (moved to ``invalid_tool_calls``, so it never runs)."""
    answers: list[ToolMessage] = []
    kept = []
    invalid: list[InvalidToolCall] = list(message.invalid_tool_calls)
    for call in message.tool_calls:
        problems = unstorable_arguments(call["args"])
        if not problems:
            kept.append(call)
            continue
        raw = printable(json.dumps(call["args"], ensure_ascii=False))
        reason = "; ".join(problems)
        invalid.append(
            InvalidToolCall(
                type="invalid_tool_call", name=call["name"], args=raw, id=call["id"], error=reason
            )
        )
        answers.append(
            ToolMessage(
                content=tool_error_content(unstorable_failure(problems)),
                tool_call_id=call["id"] or "",
                name=call["name"],
                status="error",
            )
        )
    content = message.content
    if isinstance(content, str) and unsendable(content):
        content = printable(content)
    if not answers and content is message.content:
        return message, []
    safe = message.model_copy(
        update={"content": content, "tool_calls": kept, "invalid_tool_calls": invalid}
    )
    return safe, answers


def sendable(messages: Sequence[AnyMessage]) -> list[AnyMessage]:
    """``messages`` with any unpaired surrogate in their text replaced, so one bad character from
    a user or a client never makes every later model request of the thread fail."""
    result: list[AnyMessage] = []
    for message in messages:
        content = message.content
        if isinstance(content, str) and unsendable(content):
            message = message.model_copy(update={"content": printable(content)})
        result.append(message)
    return result
