"""``execute``: one LLM call working on the plan items in progress (or answering at the end).

The graph has already started the item; the prompt shows it, with the rest of the plan and the
turn's request, so the model always knows what to do next without a ``list_todo`` round trip.

After a tool round (the tools step routes here directly, ``agent.nodes.routing.after_tools``)
it first takes the round into account, as ``drain`` does after an answer: rows still open extend the
budget (``agent.turn.budget``), the reminder count starts again and the operator faults are
counted (``toolErrors``, right even if the turn ends here). The tools step has left the plan
snapshot (``todos``: Studio's view, a fork's copy) as its plan changes made it; when that could
not be (``agent.turn.rows_handoff``: the rows handed over are not the ones it shows), it is brought
up to date here, as it is for a fork, whose rows are new copies with ids of their own. A
budget that is spent makes no call: the step hands over to ``drain``, which writes the turn's
honest closing answer; so does a spent token budget (``Context.max_turn_tokens``,
``agent.turn.usage``). A round that made no progress (``agent.turn.idle``) is counted, and the
``max_idle_rounds``-th in a row ends the turn ``stalled`` here, with no call. So a plan item costs
two graph steps (this and ``tools``) and one step claim, not three and two. Straight after a
tools step of this run (the rows were handed over) the claim is made with the answer's record,
one transaction (``agent.turn.lineage.DeferredClaim``); a run from a checkpoint claims first.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage
from langgraph.runtime import Runtime

from agent.context import Context
from agent.errors import ToolFailure, operator_faults
from agent.nodes import SupervisorNode
from agent.nodes.deps import SupervisorDeps
from agent.nodes.model_step import TurnView, end_turn_with_failure, model_step
from agent.nodes.owned_turn import refuse_another_users_turn
from agent.state import SupervisorState
from agent.turn.evidence import folded_snapshot
from agent.turn.lineage import DeferredClaim, TurnClaim, claim_next_step
from agent.turn.plan_card import plan_card, ui_todos
from agent.turn.rows_handoff import NOTHING_HANDED, HandedRows, hand_over, take_handed
from agent.turn.tool_round import IdleCount, after_tool_round, judge_tool_round
from agent.turn.usage import (
    store_row_usage,
    todos_with_usage,
    turn_usage,
    usage_after_workers,
)
from storage.models import TurnTodo
from storage.repositories import TurnScope


def _stalled(
    rows: list[TurnTodo],
    message: AIMessage,
    state: SupervisorState,
    row_usage: dict[str, dict[str, int]],
) -> dict[str, Any]:
    """The update that ends the turn ``stalled`` after idle tool rounds, with the honest
    partial report (``agent.turn.tool_round``)."""
    return {
        **NOTHING_HANDED,
        "todos": todos_with_usage(folded_snapshot(rows, state.todos, state.evidenceLog), row_usage),
        "evidenceLog": [],
        "messages": [message],
        "turnStatus": "stalled",
    }


def make_execute_node(deps: SupervisorDeps) -> SupervisorNode:
    async def execute(state: SupervisorState, *, runtime: Runtime[Context]) -> dict[str, Any]:
        return await execute_step(state, runtime=runtime)

    async def execute_step(state: SupervisorState, *, runtime: Runtime[Context]) -> dict[str, Any]:
        scope = TurnScope(state.conversationId, state.turnId)
        handed = take_handed(state, scope, state.turnStep)
        try:
            await refuse_another_users_turn(deps.database, scope.conversation_id, runtime.context)
            if handed is not None and state.turnStep + 1 > state.catchUpTo:
                # Straight on from this run's own step: the claim goes with the answer's record.
                deferred = DeferredClaim.next_of(deps.database, state)
                going_on = TurnClaim(scope, deferred.step, rows=handed.rows)
                update = await step_on(state, runtime, going_on, handed, deferred)
                if await deferred.alone():
                    return update
                handed = None  # the step was taken meanwhile: the answer is dropped
            claim = await claim_next_step(
                deps.database,
                state,
                read_rows=True,
                known_rows=handed.rows if handed is not None else None,
                saved=deps.checkpoints,
            )
        except ToolFailure as failure:
            return end_turn_with_failure(failure.message, None, prompts=deps.prompts)
        return await step_on(state, runtime, claim, handed)

    async def step_on(
        state: SupervisorState,
        runtime: Runtime[Context],
        claim: TurnClaim,
        handed: HandedRows | None,
        deferred: DeferredClaim | None = None,
    ) -> dict[str, Any]:
        """The step with its claim made (or ``deferred``, to be made with the answer's
        record): the tool round judged, then the model call."""
        context = runtime.context or Context()
        update = {**claim.update(), **NOTHING_HANDED}
        todos = state.todos
        shown = handed is not None and handed.shown and claim.forked_from is None
        tools_ran = after_tool_round(state.messages)
        if claim.rows is not None and not shown and (tools_ran or claim.forked_from is not None):
            # The state's plan may be behind these rows: the tools step could not leave a
            # snapshot of them (a call that failed before it ran, a read instead of a
            # hand-over), or this is a fork, whose rows are new copies with ids of their own.
            todos = ui_todos(folded_snapshot(claim.rows, state.todos, state.evidenceLog))
            update.update(todos=todos, evidenceLog=[])
            update.update(plan_card(state.turnId, todos, state.messages, llm_calls=state.llmCalls))
            shown = True
        llm_calls = state.llmCalls
        if state.workerLlmCalls:
            # The round's delegations: their workers' calls are the turn's calls too.
            llm_calls += sum(state.workerLlmCalls)
            update.update(llmCalls=llm_calls, workerLlmCalls=[])
        usage, row_usage = turn_usage(state), state.rowUsage
        if state.workerUsage:
            # ... and their tokens the turn's and the delegated rows' (issue 30 §4).
            usage, row_usage = usage_after_workers(usage, row_usage, state.workerUsage)
            update.update(
                promptTokens=usage.prompt_tokens,
                completionTokens=usage.completion_tokens,
                usageEstimated=usage.estimated,
                rowUsage=row_usage,
                workerUsage=[],
            )
        if claim.rows is not None and tools_ran:
            verdict = judge_tool_round(
                state.messages,
                state.turnMessageId,
                claim.rows,
                budget=state.iterationBudget,
                llm_calls=llm_calls,
                usage=usage,
                idle=IdleCount(state.progressMark, state.idleRounds, state.idleCalls),
                context=context,
                prompts=deps.prompts,
            )
            update.update(verdict.update)
            update["toolErrors"] = operator_faults(state.messages, state.turnMessageId)
            if verdict.out_of_budget:
                # No call left: ``drain`` (the next node, as no tool call is waiting) ends the
                # turn with the answer built from these rows.
                update.update(hand_over(todos, claim.scope, claim.step, claim.rows, shown=shown))
                return update
            if verdict.stalled is not None:
                await store_row_usage(deps.database, claim.scope, row_usage, usage.estimated)
                stalled = _stalled(claim.rows, verdict.stalled, state, row_usage)
                return {**update, **stalled}
        if claim.rows is not None:
            # For this step's tools, or the next drain if the model answers (rows_handoff).
            update.update(hand_over(todos, claim.scope, claim.step, claim.rows, shown=shown))
        view = TurnView(
            scope=claim.scope,
            llm_calls=llm_calls,
            turn_request=state.turnRequest,
            turn_message_id=state.turnMessageId or None,
            rows=claim.rows,
            claimed_step=claim.step,
            deferred_claim=deferred,
            retaken=claim.retaken,
            usage=usage,
            row_usage=row_usage,
        )
        return await model_step(deps, state.messages, view, context, update)

    return execute
