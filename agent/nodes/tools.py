"""``tools``: the supervisor's tool calls, in the order written, never from a stale checkpoint.

A run started from an older checkpoint of the turn (a fork or replay) must not change the
original turn's rows: its tool calls are answered ``NOT_RUN`` and the next ``drain`` moves the
run to a turn of its own (see ``agent.turn_lineage``).
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.tools import BaseTool
from langgraph.prebuilt import ToolNode
from langgraph.prebuilt.tool_node import ToolCallRequest

from agent.ordered_tools import build_tools_node
from agent.turn_lineage import check_current
from storage import Database
from storage.repositories import TurnScope


def build_supervisor_tools_node(tools: Sequence[BaseTool], database: Database) -> ToolNode:
    """The ordered tools node, refusing calls made from an older point of the turn."""

    async def from_current_step(request: ToolCallRequest) -> None:
        state = request.state
        values = state if isinstance(state, dict) else vars(state)
        scope = TurnScope(values.get("conversationId", ""), values.get("turnId", ""))
        if scope.conversation_id and scope.turn_id:
            await check_current(database, scope, int(values.get("turnStep", 0)))

    return build_tools_node(tools, before_call=from_current_step)
