"""The ``todolist__*`` tools as seed 001 defines them: names, JSON schemas, the item type.

The schemas are the seed's JSON, written out by hand rather than generated from types, because
clients see them verbatim in ``tools/list`` and generators (pydantic, FastMCP) add titles, ``$defs``
and ``required`` lists the seed does not have. A test compares them with the seed's text.
"""

from __future__ import annotations

from typing import Any, Final, Literal, TypedDict, get_args

GET_TOOL: Final = "todolist__get"
SET_TOOL: Final = "todolist__set"

Status = Literal["pending", "in_progress", "completed"]
STATUSES: Final[tuple[Status, ...]] = get_args(Status)


class Todo(TypedDict):
    """One item. No id: the seed identifies items by their index in the list."""

    content: str
    """Imperative form, e.g. "Fix authentication bug"."""
    status: Status
    activeForm: str
    """Present continuous form, e.g. "Fixing authentication bug" (what a UI shows while it runs)."""


class Summary(TypedDict):
    """How many items are in each status; ``total`` is the length of the list."""

    total: int
    pending: int
    in_progress: int
    completed: int


def summarize(todos: list[Todo]) -> Summary:
    counts = {status: 0 for status in STATUSES}
    for todo in todos:
        counts[todo["status"]] += 1
    return Summary(
        total=len(todos),
        pending=counts["pending"],
        in_progress=counts["in_progress"],
        completed=counts["completed"],
    )


_STATUS_SCHEMA: Final[dict[str, Any]] = {"type": "string", "enum": list(STATUSES)}

_SUMMARY_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "total": {"type": "integer"},
        "pending": {"type": "integer"},
        "in_progress": {"type": "integer"},
        "completed": {"type": "integer"},
    },
}

GET_INPUT_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {},
}

GET_OUTPUT_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "todos": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "content": {"type": "string"},
                    "status": _STATUS_SCHEMA,
                    "activeForm": {"type": "string"},
                },
            },
        },
        "summary": _SUMMARY_SCHEMA,
    },
}

SET_INPUT_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "required": ["todos"],
    "additionalProperties": False,
    "properties": {
        "todos": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["content", "status", "activeForm"],
                "additionalProperties": False,
                "properties": {
                    "content": {"type": "string", "minLength": 1},
                    "status": _STATUS_SCHEMA,
                    "activeForm": {"type": "string", "minLength": 1},
                },
            },
        }
    },
}

SET_OUTPUT_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {"summary": _SUMMARY_SCHEMA},
}

GET_DESCRIPTION: Final = (
    "Get the current state of your todo list for this session: every item (content, status, "
    "activeForm) in order, and a summary of how many are pending, in_progress and completed."
)

SET_DESCRIPTION: Final = (
    "Replace your entire todo list for this session (there are no ids: an item is its index). "
    "Send every item each time, in order, each with content (imperative: 'Run tests'), "
    "activeForm (present continuous: 'Running tests') and status: pending, in_progress or "
    "completed. At most one item may be in_progress. Plan with all items pending, mark one "
    "in_progress when you start it, and mark it completed as you start the next; you are done "
    "when summary.pending is 0. A rejected list changes nothing; the error names the item to fix."
)

INSTRUCTIONS: Final = (
    "A todo list for tracking multi-step work in this session. Plan with todolist__set (all items "
    "pending), keep exactly one item in_progress while you work on it, and replace the whole list "
    "as items are completed. The list lasts as long as this session."
)
