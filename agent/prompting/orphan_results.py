"""The recorded results of the orphaned tool calls a model call's window holds.

A run stopped in its tools step leaves calls no tool message answers. Those that ran have their
results recorded (``agent.turn.call_ledger``); the prompt shows those results, and the others
as never run (``agent.prompting.builder.model_messages``). Shared by the graph's model step
and ``TurnPlanMiddleware``. Only calls the window can hold are looked up: an orphan older than
the window would otherwise cost a read on every later call of the thread.
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import AnyMessage

from agent.prompting.builder import orphaned_tool_calls, recent_history
from agent.turn.call_ledger import recorded_results
from storage import Database


async def orphan_results(
    database: Database, conversation_id: str, history: Sequence[AnyMessage], history_limit: int
) -> dict[str, str]:
    """The results of the window's orphaned calls that ran, by tool call id."""
    orphans = orphaned_tool_calls(recent_history(history, history_limit))
    if not orphans:
        return {}
    found = await recorded_results(database, conversation_id, orphans)
    return {orphans[record_id]: result.content for record_id, result in found.items()}
