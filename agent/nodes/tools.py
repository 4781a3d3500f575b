"""``tools``: the supervisor's tool calls, in the order written, never from a stale checkpoint.

- A run started from an older checkpoint of the turn (a fork or replay) must not change the
  original turn's rows: its tool calls are answered ``NOT_RUN`` and the next ``drain`` moves the
  run to a turn of its own (see ``agent.turn_lineage``).
- Failures that are not the model's doing (``DATABASE_ERROR``, ``WORKER_ERROR``, a tool's bug)
  are logged at warning level with the conversation and turn, so an operator sees them even
  when the model carries on and answers.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool
from langgraph.errors import GraphBubbleUp
from langgraph.prebuilt import ToolNode
from langgraph.prebuilt.tool_node import ToolCallRequest

from agent.errors import OPERATOR_FAULTS, error_code_of
from agent.ordered_tools import Execute, ToolResult, build_tools_node
from agent.turn_lineage import check_current
from storage import Database
from storage.repositories import TurnScope

logger = logging.getLogger("agent.tools")


def _scope(request: ToolCallRequest) -> tuple[TurnScope, int]:
    state = request.state
    values = state if isinstance(state, dict) else vars(state)
    scope = TurnScope(values.get("conversationId", ""), values.get("turnId", ""))
    return scope, int(values.get("turnStep", 0))


def build_supervisor_tools_node(tools: Sequence[BaseTool], database: Database) -> ToolNode:
    """The ordered tools node, refusing calls made from an older point of the turn and
    reporting operator faults to the log."""

    async def supervised(request: ToolCallRequest, execute: Execute) -> ToolResult:
        scope, step = _scope(request)
        name = request.tool_call.get("name", "?")
        if scope.conversation_id and scope.turn_id:
            await check_current(database, scope, step)
        try:
            result = await execute(request)
        except (GraphBubbleUp, asyncio.CancelledError):
            raise
        except Exception:
            logger.warning(
                "tool %s raised (conversation %s, turn %s)",
                name,
                scope.conversation_id,
                scope.turn_id,
                exc_info=True,
            )
            raise
        if isinstance(result, ToolMessage) and result.status == "error":
            code = error_code_of(result.content)
            if code in OPERATOR_FAULTS:
                logger.warning(
                    "tool %s failed with %s (conversation %s, turn %s): %s",
                    name,
                    code,
                    scope.conversation_id,
                    scope.turn_id,
                    result.content,
                )
        return result

    return build_tools_node(tools, inner=supervised)
