"""A plain ReAct agent without planning: ``langgraph.prebuilt.create_react_agent``.

Oracle: call 1 makes all N actions as parallel tool calls in one message (the prebuilt
``ToolNode`` runs them together); call 2 answers. 2 calls, whatever N. This is the floor any
planning layer is paid for against: no plan, no progress tracking, nothing left in a database.

``create_react_agent`` is deprecated in langgraph 1.x in favour of ``langchain``'s
``create_agent``; it is used here because it ships with langgraph (a core dependency), so this
baseline needs no extra package. Its deprecation warning is silenced where it is built.
"""

from __future__ import annotations

import warnings
from pathlib import Path

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage
from langchain_core.tools import BaseTool
from langgraph.types import Checkpointer

from bench.scenario import action
from bench.systems import PreparedTurn, TurnResult, turn_config
from bench.wire import Body, Oracle, assistant_calls, text_of
from prompts import load_prompt
from tests.scripted_openai import Reply, text, tool_calls


def react_oracle(titles: list[str]) -> Oracle:
    """Every action at once, then the answer."""

    def respond(body: Body) -> Reply:
        if not assistant_calls(body):
            return tool_calls(*(action(t) for t in titles))
        return text("All done.")

    return respond


class ReactSystem:
    """The prebuilt ReAct agent, with turnplan's base prompt (``prompts/supervisor.md``)."""

    name = "react"
    path = "all N actions in parallel; answer (2)"

    def unavailable(self) -> str | None:
        return None

    def oracle(self, titles: list[str]) -> Oracle:
        return react_oracle(titles)

    def prepare(
        self,
        model: BaseChatModel,
        tool: BaseTool,
        workdir: Path,
        n: int,
        checkpointer: Checkpointer = None,
        database_url: str | None = None,
    ) -> PreparedTurn:
        from langgraph.prebuilt import create_react_agent

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            agent = create_react_agent(
                model, [tool], prompt=load_prompt("supervisor"), checkpointer=checkpointer
            )

        async def run(request: str) -> TurnResult:
            state = await agent.ainvoke(
                {"messages": [HumanMessage(content=request)]},
                config=turn_config(),
            )
            return TurnResult(answer=text_of(state["messages"][-1].content))

        return PreparedTurn(run=run)
