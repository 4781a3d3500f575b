"""LangChain ``create_agent`` with ``TodoListMiddleware`` (the ``write_todos`` tool).

Needs the ``langchain`` package (the ``bench`` extra). Two oracles, see ``todo_oracles``:
``todolist`` takes the cheapest legal path (3 calls); ``todolist-seq`` works one item at a time
like turnplan (N + 2 calls), to compare the two planning layers under the same discipline.
Unlike turnplan, ``create_agent`` sends the whole turn's history with every call.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage
from langchain_core.tools import BaseTool
from langgraph.types import Checkpointer

from bench.systems import PreparedTurn, TurnResult, turn_config
from bench.systems.todo_oracles import parallel_todo_oracle, sequential_todo_oracle
from bench.wire import Oracle, text_of
from prompts import load_prompt


class TodoListSystem:
    """``create_agent(model, [tool], middleware=[TodoListMiddleware()])``."""

    def __init__(self, *, sequential: bool = False) -> None:
        self.sequential = sequential
        self.name = "todolist-seq" if sequential else "todolist"
        self.path = (
            "write_todos(1st in progress) + act; per call write_todos + act next; "
            "write_todos(all done); answer (N+2)"
            if sequential
            else "write_todos(all in progress) + N actions; write_todos(all done); answer (3)"
        )

    def unavailable(self) -> str | None:
        if importlib.util.find_spec("langchain") is None:
            return "package `langchain` is not installed (pip install -e '.[bench]')"
        return None

    def oracle(self, titles: list[str]) -> Oracle:
        return sequential_todo_oracle(titles) if self.sequential else parallel_todo_oracle(titles)

    def build_agent(
        self, model: BaseChatModel, tool: BaseTool, checkpointer: Checkpointer = None
    ) -> Any:
        """The framework's agent with our tool, our base prompt and the todo-list middleware."""
        from langchain.agents import create_agent
        from langchain.agents.middleware import TodoListMiddleware

        return create_agent(
            model,
            [tool],
            system_prompt=load_prompt("supervisor"),
            middleware=[TodoListMiddleware()],
            checkpointer=checkpointer,
        )

    def prepare(
        self,
        model: BaseChatModel,
        tool: BaseTool,
        workdir: Path,
        n: int,
        checkpointer: Checkpointer = None,
        database_url: str | None = None,
    ) -> PreparedTurn:
        agent = self.build_agent(model, tool, checkpointer)

        async def run(request: str) -> TurnResult:
            state = await agent.ainvoke(
                {"messages": [HumanMessage(content=request)]},
                config=turn_config(),
            )
            return TurnResult(answer=text_of(state["messages"][-1].content))

        return PreparedTurn(run=run)
