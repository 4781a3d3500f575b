"""``plan``: the first step of every turn.

It names the turn (ids from the newest human message and the thread), resets the per-turn
counters, and makes the turn's first LLM call with every tool bound. A simple request is answered
right here (one call, no rows); a multi-step one comes back as a ``create_todo`` call.
"""

from __future__ import annotations

from langchain_core.messages import AIMessage
from langgraph.config import get_config
from langgraph.runtime import Runtime
from langgraph.types import Command

from agent.context import Context
from agent.deps import SupervisorDeps
from agent.model_step import ModelStepTarget, TurnView, model_step
from agent.nodes import SupervisorNode
from agent.state import RESET, SupervisorState
from agent.turn_identity import (
    conversation_id_of,
    latest_human_message,
    message_text,
    turn_id_of,
)
from storage.repositories import TurnScope

NO_REQUEST = "There is no new message to answer: send a human message to start a turn."


def make_plan_node(deps: SupervisorDeps) -> SupervisorNode[ModelStepTarget]:
    async def plan(
        state: SupervisorState, *, runtime: Runtime[Context]
    ) -> Command[ModelStepTarget]:
        context = runtime.context or Context()
        human = latest_human_message(state.messages)
        # A run with no new human message (empty input on an existing thread) is not a turn:
        # re-running the last one would resume its rows, which seed 004 rules out.
        if human is None or (human.id and human.id == state.turnMessageId):
            return Command(
                goto="__end__",
                update={"messages": [AIMessage(content=NO_REQUEST)], "turnStatus": "failed"},
            )
        scope = TurnScope(
            conversation_id=conversation_id_of(
                context.conversation_id, get_config(), state.conversationId
            ),
            turn_id=turn_id_of(human),
        )
        request = message_text(human)
        turn_start = {
            "conversationId": scope.conversation_id,
            "turnId": scope.turn_id,
            "turnRequest": request,
            "turnMessageId": human.id or "",
            "llmCalls": 0,
            "remindersInARow": 0,
            "iterationBudget": context.base_iterations,
            "turnStatus": "running",
            "modifiedTasks": RESET,
        }
        view = TurnView(scope=scope, llm_calls=0, turn_request=request, turn_message_id=human.id)
        required = "create_todo" if context.planning == "always" else None
        return await model_step(
            deps, state.messages, view, context, turn_start, required_tool=required
        )

    return plan
