"""Seed 001's rules on a whole todo list, without a server: what is accepted, what each rejected
list is told, and that a session's list lives exactly as long as the session."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agent.todolist.schemas import Todo
from agent.todolist.sessions import SessionLists, TodoList
from agent.todolist.validation import (
    ErrorCode,
    TodoListError,
    parse_get_arguments,
    parse_set_arguments,
)

REPO = Path(__file__).resolve().parents[3]


def item(content: str, status: Any = "pending", active_form: str | None = None) -> dict[str, Any]:
    return {"content": content, "status": status, "activeForm": active_form or f"{content}ing"}


def rejected(arguments: dict[str, Any]) -> TodoListError:
    with pytest.raises(TodoListError) as raised:
        parse_set_arguments(arguments)
    return raised.value


SEED_STEPS = [
    # (statuses of Run build, Fix errors, Run tests) -> the seed's summary
    (("pending", "pending", "pending"), (3, 3, 0, 0)),
    (("in_progress", "pending", "pending"), (3, 2, 1, 0)),
    (("completed", "in_progress", "pending"), (3, 1, 1, 1)),
    (("completed", "completed", "in_progress"), (3, 0, 1, 2)),
    (("completed", "completed", "completed"), (3, 0, 0, 3)),
]


@pytest.mark.parametrize(("statuses", "counts"), SEED_STEPS)
def test_the_seeds_example_session_gives_the_seeds_summaries(
    statuses: tuple[str, str, str], counts: tuple[int, int, int, int]
) -> None:
    names = ["Run build", "Fix errors", "Run tests"]
    todos = parse_set_arguments(
        {"todos": [item(name, status) for name, status in zip(names, statuses, strict=True)]}
    )

    summary = TodoList().replace(todos)

    assert summary == dict(
        zip(["total", "pending", "in_progress", "completed"], counts, strict=True)
    )


def test_an_empty_list_is_accepted_and_clears_the_list() -> None:
    todo_list = TodoList()
    todo_list.replace(parse_set_arguments({"todos": [item("Run build")]}))

    todo_list.replace(parse_set_arguments({"todos": []}))

    assert todo_list.state() == {
        "todos": [],
        "summary": {"total": 0, "pending": 0, "in_progress": 0, "completed": 0},
    }


def test_items_are_kept_as_sent_in_order() -> None:
    todos = [item("Fix errors", "in_progress", "Fixing errors"), item("  Run tests ")]
    todo_list = TodoList()

    todo_list.replace(parse_set_arguments({"todos": todos}))

    assert todo_list.state()["todos"] == todos


@pytest.mark.parametrize("blank", ["", " ", "\t\n"])
def test_empty_or_whitespace_content_is_empty_content_and_names_the_item(blank: str) -> None:
    error = rejected({"todos": [item("Run build"), item(blank, active_form="Fixing")]})

    assert error.code == ErrorCode.EMPTY_CONTENT
    assert "todos[1].content" in error.message


@pytest.mark.parametrize("blank", ["", "   "])
def test_empty_or_whitespace_active_form_is_empty_active_form(blank: str) -> None:
    todos = [item("Run build")]
    todos[0]["activeForm"] = blank

    error = rejected({"todos": todos})

    assert error.code == ErrorCode.EMPTY_ACTIVE_FORM
    assert "todos[0].activeForm" in error.message


@pytest.mark.parametrize("status", ["done", "IN_PROGRESS", "", 1, None, ["pending"]])
def test_a_status_outside_the_three_is_invalid_status(status: Any) -> None:
    error = rejected({"todos": [item("Run build"), item("Run tests", status)]})

    assert error.code == ErrorCode.INVALID_STATUS
    assert "todos[1].status" in error.message
    assert "pending, in_progress, completed" in error.message


def test_two_items_in_progress_is_multiple_in_progress_naming_both() -> None:
    todos = [item("A", "in_progress"), item("B"), item("C", "in_progress")]

    error = rejected({"todos": todos})

    assert error.code == ErrorCode.MULTIPLE_IN_PROGRESS
    assert "todos[0] and todos[2]" in error.message


def test_every_problem_is_reported_at_once_under_the_first_ones_code() -> None:
    todos = [item("A", "in_progress"), item(" ", "in_progress"), item("C", "finished")]

    error = rejected({"todos": todos})

    assert error.code == ErrorCode.EMPTY_CONTENT
    for part in ("todos[1].content", "todos[2].status", "todos[0] and todos[1] are in_progress"):
        assert part in error.message
    assert error.envelope() == {"error": {"code": "empty_content", "message": error.message}}


@pytest.mark.parametrize(
    ("arguments", "names"),
    [
        ({}, ["'todos' is required"]),
        ({"todos": "[]"}, ["'todos' must be an array", "not a string"]),
        ({"todos": {"content": "A"}}, ["'todos' must be an array", "not an object"]),
        ({"todos": [], "mode": "append"}, ["takes only 'todos'", "'mode'"]),
        ({"todos": ["Run build"]}, ["todos[0] must be an object", "not a string"]),
        (
            {"todos": [item("A"), {"content": "B", "status": "pending"}]},
            ["todos[1]", "'activeForm'"],
        ),
        ({"todos": [{**item("A"), "id": 1}]}, ["todos[0] has unknown field(s) 'id'"]),
        ({"todos": [{**item("A"), "content": 7}]}, ["todos[0].content must be a string", "number"]),
        ({"todos": [{**item("A"), "activeForm": None}]}, ["todos[0].activeForm", "not null"]),
    ],
)
def test_what_the_schema_forbids_is_invalid_arguments_saying_what_and_where(
    arguments: dict[str, Any], names: list[str]
) -> None:
    error = rejected(arguments)

    assert error.code == ErrorCode.INVALID_ARGUMENTS
    for name in names:
        assert name in error.message


def test_get_takes_no_arguments() -> None:
    parse_get_arguments({})
    parse_get_arguments(None)
    with pytest.raises(TodoListError) as raised:
        parse_get_arguments({"all": True})

    assert raised.value.code == ErrorCode.INVALID_ARGUMENTS
    assert "'all'" in raised.value.message


def test_each_session_has_its_own_list_which_is_forgotten_when_it_ends() -> None:
    sessions = SessionLists()
    plan = [Todo(content="Run build", status="pending", activeForm="Running build")]

    with sessions.open_session() as first, sessions.open_session() as second:
        first.replace(plan)
        assert len(sessions) == 2
        assert second.state()["todos"] == []
    assert len(sessions) == 0

    with sessions.open_session() as third:
        assert third.state()["todos"] == []


def test_the_todolist_server_loads_none_of_the_supervisor() -> None:
    """The layering rule: ``agent.todolist`` imports only its own modules, so the server stays
    small and the supervisor can use it without an import cycle."""
    code = (
        "import sys, agent.todolist.transports; "
        "print(sorted(m for m in sys.modules if m.startswith('agent.') or m == 'agent'))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout

    assert set(ast.literal_eval(loaded)) == {
        "agent",
        "agent.todolist",
        "agent.todolist.mcp_server",
        "agent.todolist.schemas",
        "agent.todolist.sessions",
        "agent.todolist.transports",
        "agent.todolist.validation",
    }
