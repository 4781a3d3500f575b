"""deepagents' ``create_deep_agent`` with ``TodoListMiddleware`` added.

Needs the ``deepagents`` package (the ``bench`` extra). deepagents 0.7 no longer plans by
default: ``write_todos`` comes only with some model profiles (e.g. OpenAI Codex), not for a
generic ``ChatOpenAI``. So the adapter passes ``middleware=[TodoListMiddleware()]`` (the
documented extension point) and the planning tool is the same ``write_todos`` as ``todolist``,
with the same oracles (``todo_oracles``). What differs is what every call carries: deepagents'
built-in tools (files, ``task`` for sub-agents) on top of ours. The state backend is the
default in-memory one, so nothing touches the disk.
"""

from __future__ import annotations

import importlib.util
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.tools import BaseTool
from langgraph.types import Checkpointer

from bench.systems.todolist import TodoListSystem
from prompts import load_prompt


class DeepAgentsSystem(TodoListSystem):
    """``create_deep_agent`` with our tool, base prompt and ``TodoListMiddleware``; the oracles
    and the turn runner are ``todolist``'s, only the agent differs."""

    def __init__(self, *, sequential: bool = False) -> None:
        super().__init__(sequential=sequential)
        self.name = "deepagents-seq" if sequential else "deepagents"
        self.path = (
            "as todolist-seq, on deepagents (N+2)"
            if sequential
            else "write_todos(all in progress) + N actions; write_todos(all done); answer (3)"
        )

    def unavailable(self) -> str | None:
        if importlib.util.find_spec("deepagents") is None:
            return "package `deepagents` is not installed (pip install -e '.[bench]')"
        return None

    def build_agent(
        self, model: BaseChatModel, tool: BaseTool, checkpointer: Checkpointer = None
    ) -> Any:
        from deepagents import create_deep_agent
        from langchain.agents.middleware import TodoListMiddleware

        return create_deep_agent(
            model,
            [tool],
            system_prompt=load_prompt("supervisor"),
            middleware=[TodoListMiddleware()],
            checkpointer=checkpointer,
        )
