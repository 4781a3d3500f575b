"""turnplan itself: ``agent.graph.build_graph`` with its SQLite store in a temporary folder.

Oracle (``tests.http_oracle.HttpPlanOracle``, the one the graph tests use): call 1 plans all N
items with one ``create_todo`` and acts on the first in the same message; each later call closes
the item in progress and acts on the next; one call closes the last item; one answers. N + 2
calls. It reads only the plan view it is sent. This is the sequential path (items with distinct
orders, one in progress at a time); ``turnplan-stages`` measures the same graph with the items as
one stage.
"""

from __future__ import annotations

from pathlib import Path

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage
from langchain_core.tools import BaseTool
from langgraph.types import Checkpointer

from agent.context import Context
from agent.graph import build_graph
from agent.state import InputState
from agent.turn.plan_rows import TurnPlan
from bench.scenario import action
from bench.systems import PreparedTurn, TurnResult, turn_config
from bench.wire import Oracle, text_of
from storage import Database
from storage.repositories import TurnScope
from tests.http_oracle import HttpPlanOracle

MAX_ITERATIONS = 1_000
"""The per-turn LLM-call cap, raised for the benchmark: the default (50) would end N = 50
(52 calls) and the naive loop from N = 16 (3N + 2 calls) as ``budget_exhausted``."""


def prepare_turnplan(
    model: BaseChatModel,
    tool: BaseTool,
    workdir: Path,
    n: int,
    checkpointer: Checkpointer = None,
    database_url: str | None = None,
) -> PreparedTurn:
    """A turnplan graph with only the benchmark's domain tool, on ``database_url`` (a fresh
    database), else on a fresh SQLite file."""
    database = Database(database_url or f"sqlite+aiosqlite:///{workdir / 'turnplan.db'}")
    graph = build_graph(
        model,
        tools=[tool],
        database=database,
        include_default_tools=False,
        checkpointer=checkpointer,
    )

    async def run(request: str) -> TurnResult:
        state = await graph.ainvoke(
            InputState(messages=[HumanMessage(content=request)]),
            config=turn_config(),
            context=Context(max_iterations=MAX_ITERATIONS, max_batch_items=max(50, n)),
        )
        answer = text_of(state["messages"][-1].content)
        if not state.get("turnId"):
            return TurnResult(answer=answer, rows_total=0, rows_completed=0)
        scope = TurnScope(state["conversationId"], state["turnId"])

        async def count_rows() -> tuple[int, int]:
            _, counts = await TurnPlan(database, scope).rows()
            return counts.total, counts.completed

        return TurnResult(answer=answer, count_rows=count_rows)

    return PreparedTurn(run=run, warm=database.create_schema, close=database.dispose)


class TurnplanSystem:
    """turnplan driven along its intended path (see the module docstring)."""

    name = "turnplan"
    path = "create_todo + act; then per call close one + act next; close last; answer (N+2)"

    def unavailable(self) -> str | None:
        return None

    def oracle(self, titles: list[str]) -> Oracle:
        return HttpPlanOracle(titles, action)

    def prepare(
        self,
        model: BaseChatModel,
        tool: BaseTool,
        workdir: Path,
        n: int,
        checkpointer: Checkpointer = None,
        database_url: str | None = None,
    ) -> PreparedTurn:
        return prepare_turnplan(model, tool, workdir, n, checkpointer, database_url)
