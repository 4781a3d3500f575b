"""The graph ``langgraph.json`` serves (``agent.server``), built once per process.

Here, in a module imported by its name, not in ``agent/server.py``: the LangGraph server executes
that file twice, as two unrelated modules (once for the graph factory, once for ``http.app``),
so state kept there would be two: the lifespan would close a database the runs never used.
"""

from __future__ import annotations

import threading
from typing import NamedTuple

from agent.graph import SupervisorGraph, build_graph
from agent.run_fates import server_run_fate
from agent.tools.mcp import McpTools
from storage import Database


class Served(NamedTuple):
    """The served graph and what the server closes when it stops."""

    graph: SupervisorGraph
    database: Database
    """``TURNPLAN_DATABASE_URL``, else ``.turnplan/turnplan.db``."""
    mcp_tools: McpTools
    """The MCP servers ``TURNPLAN_MCP_SERVERS`` names."""


class ServedGraph:
    """The graph ``langgraph.json`` serves, built once, on first use, whichever thread asks."""

    def __init__(self) -> None:
        self._served: Served | None = None
        self._lock = threading.Lock()

    @property
    def built(self) -> Served | None:
        """The served graph if it has been built, else None (nothing to close)."""
        return self._served

    def get(self) -> Served:
        """The served graph, built now if it is the first access (blocking: reads files)."""
        with self._lock:
            if self._served is None:
                database, mcp_tools = Database(), McpTools()
                graph = build_graph(
                    database=database, mcp_servers=mcp_tools, run_fates=server_run_fate
                )
                self._served = Served(graph, database, mcp_tools)
            return self._served


served = ServedGraph()
