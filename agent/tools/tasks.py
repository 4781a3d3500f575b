"""The personal-task toolset (seeds 002 and 003): add, list, complete, update and delete the
user's own tasks.

Each function's docstring is the description the model reads, so it says when to use the tool and
what its errors mean. The user is never a parameter: every function receives a ``TaskRepository``
already scoped to the run's ``Context.user_id`` (injected by ``agent.tools.audited``, which also
audits the call and owns the transaction), and the model's arguments cannot name another user.

Changes return a ``Command`` that appends to ``modifiedTasks`` (seed 003) alongside the tool
message, so the turn's output says which tasks changed; reads and errors return plain content.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool, InjectedToolArg
from langgraph.types import Command
from pydantic import Field, StringConstraints

from agent.errors import ErrorCode, ToolFailure
from agent.tool_names import IN_ORDER_METADATA
from agent.tools.audited import TaskToolFunction, audited_task_tool
from agent.tools.runtime import ToolRuntimeT
from agent.tools.task_lookup import resolve_task
from storage import Database
from storage.models import Task
from storage.repositories import TaskRepository

TITLE_MAX_LENGTH = 200
DESCRIPTION_MAX_LENGTH = 2000

TaskFilter = Annotated[
    Literal["all", "pending", "completed"],
    Field(description='Which tasks: "all", "pending" (not done) or "completed".'),
]
TaskAction = Literal["created", "completed", "updated", "deleted"]

Title = Annotated[
    str,
    StringConstraints(strip_whitespace=True, min_length=1, max_length=TITLE_MAX_LENGTH),
    Field(description="The task title, 1-200 characters (surrounding spaces are trimmed)."),
]
NewTitle = Annotated[
    str,
    StringConstraints(strip_whitespace=True, min_length=1, max_length=TITLE_MAX_LENGTH),
    Field(description="New title, 1-200 characters. Omit to keep the current title."),
]
Description = Annotated[
    str,
    StringConstraints(strip_whitespace=True, max_length=DESCRIPTION_MAX_LENGTH),
    Field(description="Optional details, at most 2000 characters."),
]
NewDescription = Annotated[
    str,
    StringConstraints(strip_whitespace=True, max_length=DESCRIPTION_MAX_LENGTH),
    Field(
        description="New description, at most 2000 characters; an empty string clears it. "
        "Omit to keep the current description."
    ),
]
TaskIdentifier = Annotated[
    str,
    Field(description="The task's id (a UUID from list_tasks) or its title (or part of it)."),
]
Tasks = Annotated[TaskRepository, InjectedToolArg]


def _json(payload: dict[str, Any]) -> str:
    return json.dumps(payload, ensure_ascii=False)


def _changed(
    runtime: ToolRuntimeT, tool_name: str, action: TaskAction, task: Task, payload: dict[str, Any]
) -> Command[Any]:
    """The tool message plus the ``modifiedTasks`` entry for one change."""
    return Command(
        update={
            "modifiedTasks": [{"action": action, "task_id": task.id, "title": task.title}],
            "messages": [
                ToolMessage(
                    content=_json(payload),
                    tool_call_id=runtime.tool_call_id or "",
                    name=tool_name,
                )
            ],
        }
    )


async def add_task(
    title: Title, runtime: ToolRuntimeT, tasks: Tasks, description: Description = ""
) -> Command[Any]:
    """Create a new task in the user's personal task list.

    Use when the user asks to add, create or remember a task. If they gave no title, ask for one
    instead of calling. Returns the new task's id, which later calls can use.
    Errors: VALIDATION_ERROR (title empty or over 200 characters, description over 2000: fix and
    retry, or ask the user to shorten it); DATABASE_ERROR (nothing was saved: tell the user).
    """
    task = await tasks.add(title, description)
    return _changed(
        runtime,
        "add_task",
        "created",
        task,
        {
            "status": "success",
            "task_id": task.id,
            "title": task.title,
            "description": task.description,
            "completed": task.completed,
            "created_at": task.created_at,
        },
    )


async def list_tasks(runtime: ToolRuntimeT, tasks: Tasks, filter: TaskFilter = "all") -> str:
    """List the user's tasks, oldest first, with their ids and completion state.

    Use when the user asks to see their tasks, and before acting on a task whose title you are
    unsure of. filter: "all" (default), "pending" (not done) or "completed"; no other value.
    Errors: VALIDATION_ERROR (filter not one of the three values); DATABASE_ERROR (tell the user
    their tasks are unavailable right now).
    """
    # ``runtime`` is unused here but declared all the same: the tools node injects it only into
    # tools that ask for it, and the audit wrapper reads the user from it.
    completed: bool | None = {"all": None, "pending": False, "completed": True}[filter]
    rows = await tasks.find(completed=completed)
    return _json(
        {
            "status": "success",
            "filter": filter,
            "count": len(rows),
            "tasks": [row.to_dict() for row in rows],
        }
    )


async def complete_task(
    task_identifier: TaskIdentifier, runtime: ToolRuntimeT, tasks: Tasks
) -> Command[Any] | str:
    """Mark one of the user's tasks as done.

    Use when the user says a task is finished. task_identifier is the task's id or its title; an
    exact title beats partial matches. One task per call: for several, call once per task.
    Errors: NOT_FOUND (no such task: use list_tasks, or ask the user); VALIDATION_ERROR with
    "candidates" (several tasks match: ask the user which one, then pass its id); INVALID_ID (a
    malformed id: copy the full id from list_tasks or use the title); DATABASE_ERROR (nothing was
    changed: tell the user).
    """
    task = await resolve_task(tasks, task_identifier)
    payload = {"status": "success", "task_id": task.id, "title": task.title, "completed": True}
    if task.completed:
        return _json({**payload, "already_completed": True})
    await tasks.mark_completed(task)
    return _changed(runtime, "complete_task", "completed", task, payload)


async def update_task(
    task_identifier: TaskIdentifier,
    runtime: ToolRuntimeT,
    tasks: Tasks,
    new_title: NewTitle | None = None,
    new_description: NewDescription | None = None,
) -> Command[Any]:
    """Change the title and/or description of one of the user's tasks.

    Use when the user renames a task or adds or changes its details. Give new_title,
    new_description or both; task_identifier is the task's id or current title.
    Errors: VALIDATION_ERROR (neither field given, a field too long, or several tasks match, with
    "candidates": ask the user which one); NOT_FOUND (use list_tasks); INVALID_ID (malformed id);
    DATABASE_ERROR (nothing was changed: tell the user).
    """
    if new_title is None and new_description is None:
        raise ToolFailure(
            ErrorCode.VALIDATION_ERROR,
            "update_task needs new_title, new_description or both.",
            "Ask the user what to change, then call again with the new value.",
            status="error",
        )
    task = await resolve_task(tasks, task_identifier)
    await tasks.update(task, title=new_title, description=new_description)
    return _changed(
        runtime,
        "update_task",
        "updated",
        task,
        {
            "status": "success",
            "task_id": task.id,
            "title": task.title,
            "description": task.description,
            "completed": task.completed,
        },
    )


async def delete_task(
    task_identifier: TaskIdentifier, runtime: ToolRuntimeT, tasks: Tasks
) -> Command[Any]:
    """Delete one of the user's tasks; it disappears from every list.

    Use only when the user clearly asks to delete or remove a task, and name the task in your
    confirmation. One task per call. task_identifier is the task's id or title.
    Errors: NOT_FOUND (no such task, or already deleted: use list_tasks); VALIDATION_ERROR with
    "candidates" (several tasks match: ask the user which one, never guess when deleting);
    INVALID_ID (malformed id); DATABASE_ERROR (nothing was deleted: tell the user).
    """
    task = await resolve_task(tasks, task_identifier)
    await tasks.soft_delete(task)
    return _changed(
        runtime,
        "delete_task",
        "deleted",
        task,
        {"status": "success", "task_id": task.id, "title": task.title, "deleted": True},
    )


TASK_TOOL_FUNCTIONS: tuple[TaskToolFunction, ...] = (
    add_task,
    list_tasks,
    complete_task,
    update_task,
    delete_task,
)


def build_task_tools(database: Database) -> list[BaseTool]:
    """The five personal-task tools bound to ``database`` (process-wide; the user, conversation
    and turn come from each run). Every one is audited; see ``agent.tools.audited``."""
    tools: list[BaseTool] = [
        audited_task_tool(database, function) for function in TASK_TOOL_FUNCTIONS
    ]
    for task_tool in tools:  # "add X, then complete X" in one message must happen in that order
        task_tool.metadata = {**(task_tool.metadata or {}), IN_ORDER_METADATA: True}
    return tools
