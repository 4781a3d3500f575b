"""The personal-task toolset (seeds 002 and 003): add, list, complete, update and delete the
user's own tasks.

Each function's docstring is the description the model reads, sent with every LLM call, so it is
kept to what the schema cannot say; the rules shared by all five (one task per call, asking
instead of guessing, what each error code means) are in ``prompts/personal_tasks.md`` once, and
every error result names its own fix. The user is never a parameter: every function receives a
``TaskRepository`` already scoped to the run's ``Context.user_id`` (injected by
``agent.tools.audited``, which also audits the call and owns the transaction), and the model's
arguments cannot name another user.

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
from pydantic.json_schema import SkipJsonSchema

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

TaskFilter = Literal["all", "pending", "completed"]
TaskAction = Literal["created", "completed", "updated", "deleted"]

# Lengths and choices are in the schema (maxLength, enum), so descriptions do not repeat them.
Title = Annotated[
    str, StringConstraints(strip_whitespace=True, min_length=1, max_length=TITLE_MAX_LENGTH)
]
Description = Annotated[
    str, StringConstraints(strip_whitespace=True, max_length=DESCRIPTION_MAX_LENGTH)
]
NewDescription = Annotated[Description, Field(description='"" clears it.')]
TaskIdentifier = Annotated[str, Field(description="Task id or title (or part of it).")]
Omitted = SkipJsonSchema[None]
"""None for an argument the model left out; not offered as a value (no ``anyOf`` with null)."""
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
    """Add a task to the user's list; returns its id."""
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
    """List the user's tasks, oldest first, with ids and done state ("pending": not done)."""
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
    """Mark one task done."""
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
    new_title: Title | Omitted = None,
    new_description: NewDescription | Omitted = None,
) -> Command[Any]:
    """Change one task's title and/or description (give at least one; omitted ones stay)."""
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
    """Delete one task, only when the user clearly asks to."""
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
