"""``continue_open_todos``: the user asked to go on with a plan earlier turns left unfinished.

The supervisor is told in its plan step when earlier turns of the conversation left rows open
(``prompts/open_todos_note.md``) and gets this tool then; under the compact profile the harness
calls it when a step of the request starts with one of its verbs ("please continue"). The rules
live in
``agent.turn.continuation``: the open rows become this turn's plan, the old ones are closed as
continued and linked to their copies, and a call replayed after a crash returns its recorded
result instead of copying again.
"""

from __future__ import annotations

import json
from typing import Any

from langchain_core.tools import BaseTool, tool

from agent.tool_names import CONTINUE_OPEN_TODOS, IN_ORDER_METADATA
from agent.tools.runtime import ToolRuntimeT, call_key, run_context, state_value, turn_scope
from agent.turn.continuation import ContinuedPlan, continue_open_rows
from agent.turn.plan_rows import plan_limits
from agent.turn.progress import emit_todo_events
from agent.turn.rows_handoff import step_rows
from prompts import Prompts, chosen
from storage import Database


def continued_result(continued: ContinuedPlan, prompts: Prompts | None = None) -> str:
    """The tool's result: the copies (with the row each continues) and the item to work now,
    or, with nothing left open, a sentence saying so."""
    if not continued.copies:
        return json.dumps(
            {"continued": [], "message": chosen(prompts).load("nothing_to_continue")},
            ensure_ascii=False,
        )
    current = continued.change.current
    payload: dict[str, Any] = {
        "continued": [
            {
                "id": new.id,
                "title": new.title,
                "order": new.priority + 1,
                "continuedFrom": old.id,
            }
            for old, new in zip(continued.closed, continued.copies, strict=True)
        ],
        "totalPending": continued.change.counts.remaining,
        "current": None if current is None else {"id": current.id, "title": current.title},
    }
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"))


def build_continue_tool(database: Database, prompts: Prompts | None = None) -> BaseTool:
    """``continue_open_todos`` over the plan rows in ``database``; ``prompts``: the graph's
    texts."""

    def result(continued: ContinuedPlan) -> str:
        return continued_result(continued, prompts)

    @tool(CONTINUE_OPEN_TODOS)
    async def continue_open_todos(runtime: ToolRuntimeT) -> str:
        """Make the items earlier turns left open this turn's plan (only when the user asks)."""
        scope = turn_scope(runtime)
        step = int(state_value(runtime, "turnStep", 0) or 0)
        carried = step_rows(runtime.config)
        if carried is not None:
            # Rows handed over before this call go stale with it: take them so no later call
            # of the step uses them (``agent.turn.rows_handoff``).
            carried.take(state_value(runtime, "todos"), scope, step)
        receipt = (call_key(runtime, CONTINUE_OPEN_TODOS), result)
        limits = plan_limits(run_context(runtime))
        continued = await continue_open_rows(database, scope, receipt, limits)
        if carried is not None:
            carried.hand(state_value(runtime, "todos"), scope, step, continued.change.rows)
        emit_todo_events(runtime.stream_writer, "planned", continued.copies)
        emit_todo_events(runtime.stream_writer, "started", continued.change.started)
        return result(continued)

    # It changes the plan: it waits for the calls written before it, like the todo tools.
    continue_open_todos.metadata = {IN_ORDER_METADATA: True}
    return continue_open_todos
