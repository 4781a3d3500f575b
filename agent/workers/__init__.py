"""Workers: specialists the supervisor delegates plan items to, awaited inside the turn.

``Worker`` wraps a compiled graph; ``build_worker`` makes a small ReAct one from a model, tools
and prompt files (the built-in personal-task specialist is ``agent.tools.task_worker``);
``WorkerRegistry`` holds the workers of one supervisor by ``agentType``.
"""

from agent.workers.react import build_worker
from agent.workers.registry import WorkerRegistry
from agent.workers.worker import FORBIDDEN_WORKER_TOOLS, Worker, WorkerState, worker_tool_names

__all__ = [
    "FORBIDDEN_WORKER_TOOLS",
    "Worker",
    "WorkerRegistry",
    "WorkerState",
    "build_worker",
    "worker_tool_names",
]
