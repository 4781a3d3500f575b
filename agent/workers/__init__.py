"""Workers: specialists the supervisor delegates plan items to, awaited inside the turn.

``Worker`` wraps a compiled graph; ``build_worker`` makes a small ReAct one from a model, tools
and prompt files; ``build_task_worker`` is the built-in personal-task specialist;
``WorkerRegistry`` holds the workers of one supervisor by ``agentType``.
"""

from agent.workers.react import build_worker
from agent.workers.registry import WorkerRegistry
from agent.workers.tasks import TASK_WORKER_NAME, build_task_worker
from agent.workers.worker import FORBIDDEN_WORKER_TOOLS, Worker, WorkerState, worker_tool_names

__all__ = [
    "FORBIDDEN_WORKER_TOOLS",
    "TASK_WORKER_NAME",
    "Worker",
    "WorkerRegistry",
    "WorkerState",
    "build_task_worker",
    "build_worker",
    "worker_tool_names",
]
