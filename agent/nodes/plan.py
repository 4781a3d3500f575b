"""``plan``: the first step of every turn.

It names the turn (ids from the newest human message and the thread), records it in ``turns``,
resets the per-turn counters, and makes the turn's first LLM call with every tool bound. A simple
request is answered right here (one call, no rows); a multi-step one comes back as a
``create_todo`` call.

A run that sends its turn's message again is that turn resumed, not a new one
(``agent.turn.resume``): a LangGraph Server retries a run whose worker died by starting it over
from its input, on whatever checkpoint the thread last saved.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, RemoveMessage
from langgraph.config import get_config
from langgraph.runtime import Runtime

from agent.auth import acting_user
from agent.context import Context
from agent.errors import ToolFailure
from agent.nodes import SupervisorNode
from agent.nodes.deps import SupervisorDeps
from agent.nodes.model_step import TurnView, end_turn_with_failure, model_step
from agent.state import SupervisorState
from agent.turn.approval import (
    apply_decision,
    awaiting_approval,
    decided_by_message,
    decision_from_message,
)
from agent.turn.identity import (
    conversation_id_of,
    latest_human_message,
    message_text,
    turn_id_of,
)
from agent.turn.lineage import TurnRefused, begin_turn, identity_of
from agent.turn.plan_rows import TurnPlan, plan_limits
from agent.turn.question import answer_with_message, pending_question, question_was_asked
from agent.turn.resume import resumed_turn_of_run, resumed_turn_update
from agent.turn.rows_handoff import hand_over
from storage.repositories import TurnScope

NO_REQUEST = "There is no new message to answer: send a human message to start a turn."


def make_plan_node(deps: SupervisorDeps) -> SupervisorNode:
    async def plan(state: SupervisorState, *, runtime: Runtime[Context]) -> dict[str, Any]:
        context = runtime.context or Context()
        human = latest_human_message(state.messages)
        config = get_config()
        identity = identity_of(config, deps.checkpoints)
        running = state.turnStatus == "running" and bool(state.turnId)
        try:
            resent = (
                await resumed_turn_of_run(deps.database, state, identity, context, config)
                if human is not None
                else None
            )
            if human is not None and (resent == state.turnId or human.id == state.turnMessageId):
                # This run's input again on a checkpoint inside its turn (agent.turn.resume): a
                # copy with a new id is dropped; a running turn goes on, catching up; an ended
                # one (a server retry of a run that had finished) stays as it ended. The same
                # message from another run is no new request (below).
                again = resent == state.turnId or (running and human.id == state.turnMessageId)
                dropped = human.id != state.turnMessageId
                update: dict[str, Any] = (
                    {"messages": [RemoveMessage(id=human.id or "")]} if dropped else {}
                )
                if again and running:
                    return {**await resumed_turn_update(deps.database, state), **update}
                if again:
                    return update
        except ToolFailure as failure:
            return end_turn_with_failure(failure.message, None)
        # A run with no new human message (empty input on an existing thread) is not a turn:
        # re-running a finished one would resume its rows, which seed 004 rules out.
        if human is None or (human.id and human.id == state.turnMessageId):
            return {"messages": [AIMessage(content=NO_REQUEST)], "turnStatus": "failed"}
        if state.turnStatus == "running" and state.turnId:
            question = pending_question(state.messages, human)
            try:
                shown = question is not None and await question_was_asked(
                    deps.database, state.conversationId, question.record_id
                )
            except ToolFailure as failure:
                return end_turn_with_failure(failure.message, None)
            if question is not None and shown:
                return answer_with_message(question.call, human)
            if state.approvePlan and not state.planApproved:
                plan = TurnPlan(deps.database, TurnScope(state.conversationId, state.turnId))
                decision = decision_from_message(message_text(human))
                try:
                    open_items, _ = await plan.rows(["pending", "in_progress"])
                    if awaiting_approval(state.approvePlan, state.planApproved, open_items):
                        update = await apply_decision(plan, decision, plan_limits(context))
                        return decided_by_message(human, decision, update)
                except ToolFailure as failure:
                    return end_turn_with_failure(failure.message, None)
        named = TurnScope(
            conversation_id=conversation_id_of(
                context.conversation_id, config, state.conversationId
            ),
            # A server retry whose checkpoint is older than its turn: the turn it began.
            turn_id=resent or turn_id_of(human),
        )
        request = message_text(human)
        turn_start: dict[str, Any] = {
            "conversationId": named.conversation_id,
            "turnId": named.turn_id,
            "turnRequest": request,
            "turnMessageId": human.id or "",
            "llmCalls": 0,
            "remindersInARow": 0,
            "planApproved": False,
            "approvePlan": context.approve_plan,
            "iterationBudget": context.base_iterations,
            "turnStatus": "running",
            "turnStep": 0,
            "catchUpTo": 0,
            "todos": [],
            "toolErrors": 0,
            "verifierCalls": 0,
            "verifierTokens": 0,
            "evidenceLog": [],
            "modifiedTasks": [],
        }
        try:
            claim = await begin_turn(
                deps.database,
                named,
                message_id=human.id or "",
                identity=identity,
                user_id=acting_user(context.user_id, config),
            )
        except TurnRefused as refused:
            return end_turn_with_failure(str(refused), None, turn_start)
        except ToolFailure as failure:
            return end_turn_with_failure(failure.message, None, turn_start)
        turn_start.update(claim.update())
        if claim.rows is not None:
            # For this step's tools, or drain if the model answers (agent.turn.rows_handoff).
            handed = hand_over(turn_start["todos"], claim.scope, claim.step, claim.rows, shown=True)
            turn_start.update(handed)
        view = TurnView(
            scope=claim.scope,
            llm_calls=0,
            turn_request=request,
            turn_message_id=human.id,
            rows=claim.rows,
            claimed_step=claim.step,
            retaken=claim.retaken,
        )
        required = "create_todo" if context.planning == "always" else None
        return await model_step(
            deps, state.messages, view, context, turn_start, required_tool=required
        )

    return plan
