"""What ``langgraph.json`` serves: the supervisor graph, behind a factory that checks the context.

The LangGraph server drops context keys that are not in the graph's context schema before the
graph sees them (``langgraph_api.stream``: "Filtering out context parameter ... not found in
context schema", logged at debug level), so a misspelt setting would silently fall back to its
default, while the same dict raises in Python. The server calls a graph factory with the run's
context before it filters it (``ServerRuntime.execution_runtime.context``), so the factory applies
the Python rule: a run whose context names an unknown key fails with an error naming it.

The factory returns the module-level graph unchanged; for every other access (schemas, state
reads and updates, drawing) there is no context and nothing to check.
"""

from __future__ import annotations

from collections.abc import Mapping

from langgraph_sdk.runtime import ServerRuntime

from agent.context import Context, check_context_keys
from agent.graph import SupervisorGraph, graph


def supervisor(runtime: ServerRuntime[Context]) -> SupervisorGraph:
    """The ``supervisor`` graph for one server access; refuses a run with unknown context keys."""
    execution = runtime.execution_runtime
    if execution is not None and isinstance(execution.context, Mapping):
        check_context_keys(execution.context)
    return graph
