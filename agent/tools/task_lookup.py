"""Finding the task a model means by ``task_identifier``: an id, or (part of) a title.

Models copy ids from ``list_tasks`` output but users speak in titles, so seed 002 accepts both.
The rules, in order:

1. A valid UUID (``8-4-4-4-12`` hex digits, any case, or the same 32 digits without hyphens) is
   an id. It is looked up among the user's live tasks only, so another user's id, or a deleted
   task's, is ``NOT_FOUND``: the answer never reveals that the id exists elsewhere.
2. Text that *looks like* a UUID but is not one is ``INVALID_ID`` rather than a title search,
   because it is almost always an id the model truncated or mistyped, and searching titles for
   it would only produce a confusing ``NOT_FOUND``. "Looks like" means any of: eight hex digits
   and a hyphen followed only by hex digits and hyphens (``550e8400-e29b-41d4-a716``); the
   36-character letters-and-digits shape with hyphens at positions 8, 13, 18 and 23, at least
   one digit, and a non-hex character (a typo); or 16 or more hex digits alone. Ordinary titles
   ("2024 taxes", "add-beef stew", "deadbeef") do not match.
3. Anything else is a title, compared case-insensitively (Unicode case folding, done in Python
   because SQLite's ``lower`` only folds ASCII) after trimming. A title equal to the text wins
   over titles that contain it as whole words ("report" is in "submit report"; "it" is not in
   "submit report": part of a word never names a task); one match is the task; several are
   ambiguous and the error names each candidate with its id; none is ``NOT_FOUND``.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from agent.errors import ErrorCode, ToolFailure
from storage.models import Task
from storage.repositories import TaskRepository

_CANONICAL_UUID = re.compile(r"[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}|[0-9a-f]{32}", re.I)
_HEX_PREFIXED = re.compile(r"[0-9a-f]{8}-[0-9a-f-]*", re.I)
_UUID_SHAPE = re.compile(r"(?=.*[0-9])[0-9a-z]{8}(-[0-9a-z]{4}){3}-[0-9a-z]{12}", re.I)
_LONG_HEX = re.compile(r"[0-9a-f]{16,}", re.I)

MAX_NAMED_CANDIDATES = 10
"""Candidates spelled out in an ambiguity error; more would flood the model's context."""


@dataclass(frozen=True)
class TaskId:
    """The identifier is a task id, normalised to the lowercase hyphenated form we store."""

    value: str


@dataclass(frozen=True)
class TitleQuery:
    """The identifier is (part of) a title, trimmed."""

    text: str


def looks_like_uuid(text: str) -> bool:
    """Whether ``text`` would be taken for an id by a reader (rule 2 of the module docstring)."""
    return any(
        pattern.fullmatch(text) is not None
        for pattern in (_CANONICAL_UUID, _HEX_PREFIXED, _UUID_SHAPE, _LONG_HEX)
    )


def parse_task_identifier(raw: str) -> TaskId | TitleQuery:
    """Classify a ``task_identifier``; raise ``INVALID_ID`` for a malformed id, and
    ``VALIDATION_ERROR`` for an empty one."""
    text = raw.strip()
    if not text:
        raise ToolFailure(
            ErrorCode.VALIDATION_ERROR,
            "task_identifier is empty.",
            "Pass the task's id or title; ask the user which task they mean if unsure.",
            status="error",
        )
    if _CANONICAL_UUID.fullmatch(text):
        return TaskId(str(uuid.UUID(text)))
    if looks_like_uuid(text):
        raise ToolFailure(
            ErrorCode.INVALID_ID,
            f"'{text}' is not a valid task id (a task id is a UUID such as "
            "'550e8400-e29b-41d4-a716-446655440000').",
            "Copy the full id from list_tasks output, or pass the task's title instead.",
            status="error",
        )
    return TitleQuery(text)


def match_title(tasks: Sequence[Task], query: str) -> list[Task]:
    """The tasks ``query`` names: those whose title equals it if any, else those containing it
    as whole words (both case-insensitive)."""
    needle = " ".join(query.split()).casefold()
    exact = [task for task in tasks if " ".join(task.title.split()).casefold() == needle]
    if exact:
        return exact
    words = re.compile(rf"(?<!\w){re.escape(needle)}(?!\w)")
    return [task for task in tasks if words.search(" ".join(task.title.split()).casefold())]


def _describe(task: Task) -> str:
    state = "completed" if task.completed else "pending"
    return f"'{task.title}' (id {task.id}, {state})"


async def resolve_task(tasks: TaskRepository, identifier: str) -> Task:
    """The one live task of the repository's user that ``identifier`` names, or a
    ``ToolFailure`` the model can act on."""
    parsed = parse_task_identifier(identifier)
    if isinstance(parsed, TaskId):
        task = await tasks.get(parsed.value)
        if task is None:
            raise ToolFailure(
                ErrorCode.NOT_FOUND,
                f"No task found with id {parsed.value}.",
                "The task may have been deleted. Use list_tasks to see the user's tasks and "
                "their ids.",
                status="error",
            )
        return task
    matches = match_title(await tasks.find(), parsed.text)
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise ToolFailure(
            ErrorCode.NOT_FOUND,
            f"No task found matching '{parsed.text}'.",
            "Use list_tasks to see the user's tasks, then retry with an exact title or id; or "
            "ask the user whether they want it created.",
            status="error",
        )
    named = ", ".join(_describe(task) for task in matches[:MAX_NAMED_CANDIDATES])
    more = len(matches) - MAX_NAMED_CANDIDATES
    if more > 0:
        named += f" and {more} more"
    raise ToolFailure(
        ErrorCode.VALIDATION_ERROR,
        f"'{parsed.text}' matches {len(matches)} tasks: {named}.",
        "Ask the user which one they mean, then call again with that task's id.",
        status="error",
        candidates=[
            {"id": task.id, "title": task.title, "completed": task.completed}
            for task in matches[:MAX_NAMED_CANDIDATES]
        ],
    )
