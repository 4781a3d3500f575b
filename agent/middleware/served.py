"""The ``turnplan_agent`` graph ``langgraph.json`` serves: LangChain's ``create_agent`` with
``TurnPlanMiddleware`` and ``ModelCallLimitMiddleware``, the middleware face of turnplan beside
the ``supervisor`` graph.

A factory, so importing this module builds nothing: the agent (its model, from
``TURNPLAN_MODEL``; its database, ``TURNPLAN_DATABASE_URL`` else ``.turnplan/turnplan.db``; the
personal task tools) is made on the server's first access and kept for the process. A run's
context may carry turnplan's settings as a dict (``approve_plan``, ``base_iterations``, ...).
"""

from __future__ import annotations

import asyncio
from typing import Any

from langgraph.graph.state import CompiledStateGraph
from langgraph_sdk.runtime import ServerRuntime

RUN_MODEL_CALLS = 60
"""LangChain's own per-run limit on model calls, above turnplan's cap (50): a backstop."""

_built: dict[str, CompiledStateGraph[Any, Any, Any, Any]] = {}
_lock = asyncio.Lock()


async def build_turnplan_agent() -> CompiledStateGraph[Any, Any, Any, Any]:
    """Build the served agent (imports and the model resolved here, not at import)."""
    from langchain.agents import create_agent
    from langchain.agents.middleware import AgentMiddleware, ModelCallLimitMiddleware

    from agent.context import Context
    from agent.llm.chat_models import resolve_chat_model
    from agent.middleware.turn_plan import TurnPlanMiddleware
    from agent.run_fates import server_run_fate
    from agent.tools.personal_tasks import build_task_tools
    from storage import Database

    database = Database()
    model = await resolve_chat_model(None, Context())
    middleware: list[AgentMiddleware[Any, Any, Any]] = [
        TurnPlanMiddleware(database, run_fates=server_run_fate),
        ModelCallLimitMiddleware(run_limit=RUN_MODEL_CALLS),
    ]
    return create_agent(
        model,
        build_task_tools(database),
        middleware=middleware,
        context_schema=Context,
        name="turnplan_agent",
    )


async def turnplan_agent(runtime: ServerRuntime[Any]) -> CompiledStateGraph[Any, Any, Any, Any]:
    """The served agent, built on first access."""
    async with _lock:
        if "agent" not in _built:
            _built["agent"] = await build_turnplan_agent()
    return _built["agent"]
