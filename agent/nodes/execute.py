"""``execute``: one LLM call working on the plan item in progress (or answering at the end).

The graph has already started the item; the prompt shows it, with the rest of the plan and the
turn's request, so the model always knows what to do next without a ``list_todo`` round trip.
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from agent.context import Context
from agent.deps import SupervisorDeps
from agent.errors import ToolFailure
from agent.model_step import TurnView, end_turn_with_failure, model_step
from agent.nodes import SupervisorNode
from agent.rows_handoff import hand_over, take_over
from agent.state import SupervisorState
from agent.turn_lineage import claim_next_step
from storage.repositories import TurnScope


def make_execute_node(deps: SupervisorDeps) -> SupervisorNode:
    async def execute(state: SupervisorState, *, runtime: Runtime[Context]) -> dict[str, Any]:
        context = runtime.context or Context()
        scope = TurnScope(state.conversationId, state.turnId)
        known = take_over(state.todos, scope, state.turnStep)
        try:
            claim = await claim_next_step(deps.database, state, read_rows=True, known_rows=known)
        except ToolFailure as failure:
            return end_turn_with_failure(failure.message, None)
        if claim.rows is not None:
            # For this step's tools, or the next drain if the model answers (rows_handoff).
            hand_over(state.todos, claim.scope, claim.step, claim.rows)
        view = TurnView(
            scope=claim.scope,
            llm_calls=state.llmCalls,
            turn_request=state.turnRequest,
            turn_message_id=state.turnMessageId or None,
            rows=claim.rows,
            claimed_step=claim.step,
        )
        return await model_step(deps, state.messages, view, context, claim.update())

    return execute
