"""turnplan's two faces, built the same way for one test body: the supervisor graph
(``build_graph``) and ``create_agent`` with ``TurnPlanMiddleware``.

``Face.build`` takes what a user would pass (model, tools, database, settings, completion
checks) and returns a compiled graph; ``Face.run`` sends one message on a thread and returns the
run's values. Both answer with ``messages``, ``turnStatus``, ``todos`` and ``llmCalls``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage
from langchain_core.tools import BaseTool
from langgraph.checkpoint.memory import InMemorySaver

from agent.calls.completion import CompletionCheck
from agent.context import Context
from agent.graph import build_graph
from agent.middleware import TurnPlanMiddleware
from storage import Database

FACES = ("graph", "middleware")


@dataclass
class Face:
    name: str
    context: Context | None = None

    def build(
        self,
        model: BaseChatModel,
        database: Database,
        tools: Sequence[BaseTool] = (),
        *,
        context: Context | None = None,
        completion_checks: Mapping[str, CompletionCheck] | None = None,
        middleware: Sequence[AgentMiddleware[Any, Any, Any]] = (),
    ) -> Any:
        self.context = context or Context()
        if self.name == "graph":
            return build_graph(
                model,
                tools=list(tools),
                database=database,
                include_default_tools=False,
                checkpointer=InMemorySaver(),
                completion_checks=completion_checks,
            )
        turnplan = TurnPlanMiddleware(
            database, context=self.context, completion_checks=completion_checks
        )
        return create_agent(
            model,
            list(tools),
            middleware=[turnplan, *middleware],
            checkpointer=InMemorySaver(),
        )

    def config(self, thread: str = "t") -> dict[str, Any]:
        return {"configurable": {"thread_id": thread}}

    async def run(self, agent: Any, text: str | None, thread: str = "t") -> dict[str, Any]:
        """One run on ``thread``: a new message, or (None) the thread's run resumed."""
        value = None if text is None else {"messages": [HumanMessage(content=text)]}
        return await self.invoke(agent, value, thread)

    async def invoke(self, agent: Any, value: Any, thread: str = "t") -> dict[str, Any]:
        if self.name == "graph":
            result: dict[str, Any] = await agent.ainvoke(
                value, self.config(thread), context=self.context
            )
        else:
            result = await agent.ainvoke(value, self.config(thread))
        return result
