"""Seed 001's rules, checked on the whole list a client sends, and the error it gets back.

The server does not rely on the SDK's JSON-schema check: that stops at the first violation and
answers with a bare sentence, while a client (usually a model) needs the seed's error codes and
the index of every item to fix, so it can repair the list in one more call. Everything the input
schema forbids is caught here too, so a malformed call gets an error envelope, never a crash.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final, TypeGuard

from agent.todolist.schemas import GET_TOOL, SET_TOOL, STATUSES, Status, Todo

FIELDS: Final = ("content", "status", "activeForm")
MAX_ITEMS: Final = 100
"""Most items one list may hold: a session's list is kept in the server's memory until the
session ends, so it has a size like everything else a client can make the server keep."""
MAX_LIST_BYTES: Final = 64 * 1024
"""Most bytes of a list, as UTF-8 JSON (the seed's own encoding of it)."""


class ErrorCode(StrEnum):
    """The seed's four codes, then the two for calls its schemas already forbid."""

    EMPTY_CONTENT = "empty_content"
    EMPTY_ACTIVE_FORM = "empty_active_form"
    MULTIPLE_IN_PROGRESS = "multiple_in_progress"
    INVALID_STATUS = "invalid_status"
    INVALID_ARGUMENTS = "invalid_arguments"
    """The arguments do not have the input schema's shape (a field missing, unknown or not a
    string, ``todos`` not an array)."""
    UNKNOWN_TOOL = "unknown_tool"
    LIST_TOO_LARGE = "list_too_large"
    """More than ``MAX_ITEMS`` items, or more than ``MAX_LIST_BYTES`` bytes; nothing stored."""
    SERVER_FULL = "server_full"
    """The lists of the open sessions already hold the server's memory budget for lists
    (``agent.todolist.sessions``); nothing stored. Shorter lists, or fewer sessions, fit."""


@dataclass(frozen=True)
class Problem:
    code: ErrorCode
    message: str


class TodoListError(Exception):
    """A rejected call. The code is the first problem's; the message lists every problem, so a
    model can fix them all at once."""

    def __init__(self, problems: list[Problem]) -> None:
        assert problems, "an error needs at least one problem"
        self.code = problems[0].code
        self.message = "; ".join(problem.message for problem in problems)
        super().__init__(self.message)

    @classmethod
    def single(cls, code: ErrorCode, message: str) -> TodoListError:
        return cls([Problem(code, message)])

    def envelope(self) -> dict[str, Any]:
        """The seed's error shape: ``{"error": {"code", "message"}}``."""
        return {"error": {"code": self.code.value, "message": self.message}}


def parse_get_arguments(arguments: Mapping[str, Any] | None) -> None:
    """``todolist__get`` takes nothing (its schema has ``additionalProperties: false``)."""
    if arguments:
        raise TodoListError.single(
            ErrorCode.INVALID_ARGUMENTS,
            f"{GET_TOOL} takes no arguments; got {_names(arguments)}; call it with {{}}",
        )


def parse_set_arguments(arguments: Mapping[str, Any] | None) -> list[Todo]:
    """The new list, or ``TodoListError`` naming every problem in it (nothing is stored then)."""
    arguments = arguments or {}
    unknown = [name for name in arguments if name != "todos"]
    if unknown:
        raise TodoListError.single(
            ErrorCode.INVALID_ARGUMENTS,
            f"{SET_TOOL} takes only 'todos'; remove {_names(unknown)}",
        )
    if "todos" not in arguments:
        raise TodoListError.single(
            ErrorCode.INVALID_ARGUMENTS,
            "'todos' is required: the whole list, as an array of "
            "{content, status, activeForm} objects ([] clears it)",
        )
    items = arguments["todos"]
    if not isinstance(items, list):
        raise TodoListError.single(
            ErrorCode.INVALID_ARGUMENTS,
            f"'todos' must be an array of {{content, status, activeForm}} objects, "
            f"not {_json_type(items)}",
        )
    _check_size(items)
    problems = [problem for index, item in enumerate(items) for problem in _check(index, item)]
    in_progress = [
        index
        for index, item in enumerate(items)
        if isinstance(item, dict) and item.get("status") == "in_progress"
    ]
    if len(in_progress) > 1:
        problems.append(
            Problem(
                ErrorCode.MULTIPLE_IN_PROGRESS,
                f"{_and(f'todos[{index}]' for index in in_progress)} are in_progress; only "
                "one item may be in_progress at a time: set the others to pending or completed",
            )
        )
    if problems:
        raise TodoListError(problems)
    return [
        Todo(content=item["content"], status=item["status"], activeForm=item["activeForm"])
        for item in items
    ]


def list_bytes(items: list[Any]) -> int:
    """The size of a list as UTF-8 JSON: what the caps and the server's budget count."""
    return len(json.dumps(items, ensure_ascii=False, separators=(",", ":")).encode())


def _check_size(items: list[Any]) -> None:
    """Refuse a list past ``MAX_ITEMS`` or ``MAX_LIST_BYTES`` before its items are checked one
    by one (a problem per item of a huge list would be a huge error)."""
    if len(items) > MAX_ITEMS:
        raise TodoListError.single(
            ErrorCode.LIST_TOO_LARGE,
            f"'todos' has {len(items)} items; a list may have at most {MAX_ITEMS}: merge "
            "related steps, or drop completed ones",
        )
    size = list_bytes(items)
    if size > MAX_LIST_BYTES:
        raise TodoListError.single(
            ErrorCode.LIST_TOO_LARGE,
            f"'todos' is {size} bytes as JSON; a list may have at most {MAX_LIST_BYTES}: "
            "shorten the items' content and activeForm",
        )


def _check(index: int, item: object) -> list[Problem]:
    """Every problem with one item, field by field in the schema's order."""
    where = f"todos[{index}]"
    if not isinstance(item, dict):
        return [
            Problem(
                ErrorCode.INVALID_ARGUMENTS,
                f"{where} must be an object {{content, status, activeForm}}, "
                f"not {_json_type(item)}",
            )
        ]
    problems = []
    unknown = [name for name in item if name not in FIELDS]
    if unknown:
        problems.append(
            Problem(
                ErrorCode.INVALID_ARGUMENTS,
                f"{where} has unknown field(s) {_names(unknown)}; an item has only content, "
                "status and activeForm",
            )
        )
    for name in FIELDS:
        if name not in item:
            problems.append(Problem(ErrorCode.INVALID_ARGUMENTS, f"{where} is missing '{name}'"))
            continue
        value = item[name]
        if name == "status":
            if not _is_status(value):
                problems.append(
                    Problem(
                        ErrorCode.INVALID_STATUS,
                        f"{where}.status is {json.dumps(value, ensure_ascii=False)}; "
                        f"use one of {', '.join(STATUSES)}",
                    )
                )
        elif not isinstance(value, str):
            problems.append(
                Problem(
                    ErrorCode.INVALID_ARGUMENTS,
                    f"{where}.{name} must be a string, not {_json_type(value)}",
                )
            )
        elif not value.strip():
            problems.append(_empty(where, name))
    return problems


def _empty(where: str, name: str) -> Problem:
    if name == "content":
        return Problem(
            ErrorCode.EMPTY_CONTENT,
            f"{where}.content is empty or whitespace; say the task in imperative form, "
            "e.g. 'Fix authentication bug'",
        )
    return Problem(
        ErrorCode.EMPTY_ACTIVE_FORM,
        f"{where}.activeForm is empty or whitespace; say the task in present continuous form, "
        "e.g. 'Fixing authentication bug'",
    )


def _is_status(value: object) -> TypeGuard[Status]:
    return isinstance(value, str) and value in STATUSES


def _json_type(value: object) -> str:
    """The JSON name of a decoded value's type, as the client wrote it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def _names(names: Iterable[str]) -> str:
    return ", ".join(f"'{name}'" for name in names)


def _and(parts: Iterable[str]) -> str:
    *rest, last = parts
    return f"{', '.join(rest)} and {last}" if rest else last
