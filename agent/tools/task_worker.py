"""The built-in ``tasks`` worker: the user's personal task list, and nothing else.

It joins a toolset (``agent.tools.personal_tasks``) with the worker machinery
(``agent.workers``), so it lives above both: the workers package knows no toolset, and
``agent.tools.delegate`` can use the workers without a circle."""

from __future__ import annotations

from agent.llm.chat_models import ModelSetting
from agent.tools.personal_tasks import build_task_tools
from agent.workers.react import build_worker
from agent.workers.worker import Worker
from storage import Database

TASK_WORKER_NAME = "tasks"


def build_task_worker(
    model: ModelSetting, database: Database, *, recursion_limit: int = 25
) -> Worker:
    """A worker for items with ``agentType: "tasks"``: add, list, complete, update and delete the
    user's personal tasks (the same audited tools as the supervisor's, for the same user)."""
    return build_worker(
        TASK_WORKER_NAME,
        "Manages the user's personal task list: add, list, complete, update, delete tasks.",
        model=model,
        tools=build_task_tools(database),
        prompt_sections=("worker_tasks", "personal_tasks"),
        recursion_limit=recursion_limit,
    )
