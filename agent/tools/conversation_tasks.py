"""The conversation task list (seed 000): ``ListTasks``, ``AddTask``, ``CompleteTask``,
``UncompleteTask`` and ``DeleteTask``, kept in one JSON file per conversation
(``storage.task_files``).

The conversation comes from graph state (``conversationId``) through the injected runtime, never
from the model. Results are the seed's JSON. Failures are a ``ToolMessage`` with
``status="error"`` whose content is the seed's exact text, so the model reads what the seed
promises and the graph (and ``run_turn``'s output) still sees a failed call:

- no conversation id: ``Error: Task list is not available (no conversation context).``
- a file that is not a valid task list: ``Error: Task file is corrupt or invalid.``
- a disk error: ``Error: `` and the OS error's message;
- an argument the model can fix (empty or over-long title, over-long description, text that is
  not valid Unicode): ``Error: `` and what to change;
- an unknown task id: ``{"ok": false, "error": "Task not found"}``.

Corrupt files and disk errors are logged at warning level on ``agent.tools`` with the
conversation id; the model never sees a stack trace. Nothing is written on an error.

Exactly once: LangGraph runs an interrupted tools step again on resume. Each change records its
call (``call_record_id``) and result in the same file, in the same atomic write, and a call found
there returns its recorded result without acting again (``TaskList.apply_once``).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool, tool
from pydantic import BeforeValidator, Field

from agent.tool_names import IN_ORDER_METADATA
from agent.tools.runtime import ToolRuntimeT, record_key, state_value
from storage.task_files import CallResult, TaskFileCorrupt, TaskFiles, TaskList

logger = logging.getLogger("agent.tools")

CONVERSATION_TASKS_PROMPT = "conversation_tasks"
"""The prompt section (``prompts/conversation_tasks.md``) that goes with these tools."""

CONVERSATION_TASK_TOOL_NAMES = (
    "ListTasks",
    "AddTask",
    "CompleteTask",
    "UncompleteTask",
    "DeleteTask",
)

NO_CONVERSATION = "Error: Task list is not available (no conversation context)."
CORRUPT_FILE = "Error: Task file is corrupt or invalid."
TASK_NOT_FOUND = json.dumps({"ok": False, "error": "Task not found"})

TITLE_MAX_LENGTH = 200
DESCRIPTION_MAX_LENGTH = 2000


def _task_id_text(value: Any) -> Any:
    # Ids look like numbers ("3") and models often send them as numbers.
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return value.strip() if isinstance(value, str) else value


Title = Annotated[
    str, Field(description="Short title of the task, 1-200 characters (spaces are trimmed).")
]
Description = Annotated[
    str, Field(description="Optional brief description, at most 2000 characters.")
]
TaskId = Annotated[
    str,
    BeforeValidator(_task_id_text),
    Field(description='The task\'s id, as ListTasks or AddTask returned it (e.g. "3").'),
]


def _dumps(payload: dict[str, Any]) -> str:
    return json.dumps(payload, ensure_ascii=False)


def _error(runtime: ToolRuntimeT, tool_name: str, content: str) -> ToolMessage:
    return ToolMessage(
        content=content, tool_call_id=runtime.tool_call_id or "", name=tool_name, status="error"
    )


def _reply(runtime: ToolRuntimeT, tool_name: str, result: CallResult) -> str | ToolMessage:
    return _error(runtime, tool_name, result.content) if result.is_error else result.content


def _argument_problem(title: str, description: str) -> str | None:
    """What is wrong with AddTask's arguments, as the error the model reads (None: fine)."""
    for name, text in (("title", title), ("description", description)):
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return (
                f"Error: The {name} contains an invalid character (an unpaired surrogate). "
                "Call AddTask again with plain text."
            )
    if not title:
        return "Error: The title is empty. Call AddTask again with a short title."
    if len(title) > TITLE_MAX_LENGTH:
        return (
            f"Error: The title is {len(title)} characters long; the limit is "
            f"{TITLE_MAX_LENGTH}. Call AddTask again with a shorter title (put details in "
            "the description)."
        )
    if len(description) > DESCRIPTION_MAX_LENGTH:
        return (
            f"Error: The description is {len(description)} characters long; the limit is "
            f"{DESCRIPTION_MAX_LENGTH}. Call AddTask again with a shorter description."
        )
    return None


def _conversation_id(runtime: ToolRuntimeT) -> str | None:
    value = state_value(runtime, "conversationId", "") or ""
    return value if isinstance(value, str) and value.strip() else None


def _set_done(task_id: str, done: bool) -> Callable[[TaskList], CallResult]:
    def action(tasks: TaskList) -> CallResult:
        task = tasks.find(task_id)
        if task is None:
            return CallResult(TASK_NOT_FOUND, is_error=True)
        task.done = done
        return CallResult(_dumps({"ok": True, "task": task.public()}))

    return action


def _delete(task_id: str) -> Callable[[TaskList], CallResult]:
    def action(tasks: TaskList) -> CallResult:
        if tasks.remove(task_id) is None:
            return CallResult(TASK_NOT_FOUND, is_error=True)
        return CallResult(_dumps({"ok": True}))

    return action


def _add(title: str, description: str) -> Callable[[TaskList], CallResult]:
    def action(tasks: TaskList) -> CallResult:
        return CallResult(_dumps(tasks.add(title, description).public()))

    return action


def build_conversation_task_tools(tasks_dir: str | Path | None = None) -> list[BaseTool]:
    """The five conversation task-list tools, storing under ``tasks_dir`` (default:
    ``TURNPLAN_TASKS_DIR``, else the working folder, read at each call off the event loop)."""
    files = TaskFiles(tasks_dir)

    async def on_file(
        runtime: ToolRuntimeT, tool_name: str, operation: Callable[[str], CallResult]
    ) -> str | ToolMessage:
        """Run ``operation`` on this conversation's file in a worker thread; failures become
        the seed's error messages."""
        conversation_id = _conversation_id(runtime)
        if conversation_id is None:
            return _error(runtime, tool_name, NO_CONVERSATION)
        try:
            result = await asyncio.to_thread(operation, conversation_id)
        except TaskFileCorrupt as error:
            logger.warning(
                "%s: task file of conversation %s is corrupt or invalid: %s",
                tool_name,
                conversation_id,
                error,
            )
            return _error(runtime, tool_name, CORRUPT_FILE)
        except OSError as error:
            logger.warning(
                "%s: task file of conversation %s could not be read or written: %s",
                tool_name,
                conversation_id,
                error,
            )
            return _error(runtime, tool_name, f"Error: {str(error) or type(error).__name__}")
        return _reply(runtime, tool_name, result)

    async def change(
        runtime: ToolRuntimeT, tool_name: str, action: Callable[[TaskList], CallResult]
    ) -> str | ToolMessage:
        call_id = record_key(runtime, tool_name).tool_call_id
        return await on_file(
            runtime,
            tool_name,
            lambda conversation_id: files.apply(conversation_id, call_id, tool_name, action),
        )

    @tool("ListTasks")
    async def list_tasks(runtime: ToolRuntimeT) -> str | ToolMessage:
        """List this conversation's task list: every task with its id, title, description and
        whether it is done.

        Call it first when you pick up multi-step work in this conversation, to see what is
        planned and what is already done, and before changing a task whose id you do not have.
        Returns {"tasks": [...]}; an empty list if nothing was added yet.
        """

        def read(conversation_id: str) -> CallResult:
            tasks = files.read(conversation_id).tasks
            return CallResult(_dumps({"tasks": [task.public() for task in tasks]}))

        return await on_file(runtime, "ListTasks", read)

    @tool("AddTask")
    async def add_task(
        title: Title, runtime: ToolRuntimeT, description: Description = ""
    ) -> str | ToolMessage:
        """Add a task to this conversation's task list (it stays there in later turns).

        Use it to record work still to do in this conversation, or to break a larger job into
        steps (one call per task). Returns the new task with its id; it starts not done.
        An "Error: ..." result changed nothing: fix what it names and call again.
        """
        title, description = title.strip(), description.strip()
        problem = _argument_problem(title, description)
        if problem is not None:
            return _error(runtime, "AddTask", problem)
        return await change(runtime, "AddTask", _add(title, description))

    @tool("CompleteTask")
    async def complete_task(
        taskId: TaskId,  # noqa: N803 - the seed names the argument taskId
        runtime: ToolRuntimeT,
    ) -> str | ToolMessage:
        """Mark a task of this conversation's task list as done.

        Use it as soon as the work of a task is finished. Returns {"ok": true, "task": {...}};
        {"ok": false, "error": "Task not found"} means no task has that id: call ListTasks.
        """
        return await change(runtime, "CompleteTask", _set_done(taskId, True))

    @tool("UncompleteTask")
    async def uncomplete_task(
        taskId: TaskId,  # noqa: N803 - the seed names the argument taskId
        runtime: ToolRuntimeT,
    ) -> str | ToolMessage:
        """Mark a task of this conversation's task list as not done again.

        Use it when a task marked done turns out to need more work. Returns {"ok": true,
        "task": {...}}; {"ok": false, "error": "Task not found"}: call ListTasks for the ids.
        """
        return await change(runtime, "UncompleteTask", _set_done(taskId, False))

    @tool("DeleteTask")
    async def delete_task(
        taskId: TaskId,  # noqa: N803 - the seed names the argument taskId
        runtime: ToolRuntimeT,
    ) -> str | ToolMessage:
        """Remove a task from this conversation's task list for good.

        Use it for a task that was cancelled or added by mistake, not for finished work (use
        CompleteTask). Returns {"ok": true}; {"ok": false, "error": "Task not found"}: call
        ListTasks for the ids.
        """
        return await change(runtime, "DeleteTask", _delete(taskId))

    tools = [list_tasks, add_task, complete_task, uncomplete_task, delete_task]
    for task_tool in tools:  # ids are handed out in call order: "add, then complete 1" must hold
        task_tool.metadata = {**(task_tool.metadata or {}), IN_ORDER_METADATA: True}
    return tools


__all__ = [
    "CONVERSATION_TASKS_PROMPT",
    "CONVERSATION_TASK_TOOL_NAMES",
    "CORRUPT_FILE",
    "NO_CONVERSATION",
    "TASK_NOT_FOUND",
    "build_conversation_task_tools",
]
