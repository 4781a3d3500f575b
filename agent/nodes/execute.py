"""``execute``: one LLM call working on the plan item in progress (or answering at the end).

The graph has already started the item; the prompt shows it, with the rest of the plan and the
turn's request, so the model always knows what to do next without a ``list_todo`` round trip.
"""

from __future__ import annotations

from langgraph.runtime import Runtime
from langgraph.types import Command

from agent.context import Context
from agent.deps import SupervisorDeps
from agent.model_step import ModelStepTarget, TurnView, model_step
from agent.nodes import SupervisorNode
from agent.state import SupervisorState
from storage.repositories import TurnScope


def make_execute_node(deps: SupervisorDeps) -> SupervisorNode[ModelStepTarget]:
    async def execute(
        state: SupervisorState, *, runtime: Runtime[Context]
    ) -> Command[ModelStepTarget]:
        context = runtime.context or Context()
        view = TurnView(
            scope=TurnScope(conversation_id=state.conversationId, turn_id=state.turnId),
            llm_calls=state.llmCalls,
            turn_request=state.turnRequest,
            turn_message_id=state.turnMessageId or None,
        )
        return await model_step(deps, state.messages, view, context)

    return execute
