"""``drain``: where a turn may end. It runs after every answer, after the tool round that made
a plan the user must approve, and when ``execute`` finds the budget spent; a tool round with
budget left goes straight back to ``execute`` (``agent.nodes.routing.after_tools``).

- The model answered while rows remain: remind it (a prompt file) and go back; after
  ``max_reminders`` such answers in a row, stop with an honest partial answer (a model that
  will not work on the plan only burns calls).
- The model answered and every row is closed (or there was no plan): the turn ends
  ``answered``, or ``incomplete`` when a row was cancelled for a failure (not by the user) or
  the answer reports the request not done; the answer then says what was not done and why
  (``agent.turn.outcome.turn_end_status``).
- The model replied with nothing (no text, no tool call): ask once more; a second empty reply,
  or one on the last allowed call, ends the turn ``no_answer`` (``agent.turn.empty_answer``).
- The budget is spent (LLM calls, or ``Context.max_turn_tokens`` tokens: the answer says which):
  end with an honest answer built from the rows themselves; open rows stay
  ``pending``/``in_progress`` and are not resumed by later turns (seed 004, issue 3). If the last
  row closed on the last allowed call, the same rows make the answer (``incomplete`` when some
  were cancelled for a failure).
- The model answered, every row is closed and ``Context.audit_model`` is set: the answer is
  audited first, and may be sent back once or end ``incomplete`` (``agent.calls.answer_audit``).
- After a tool round (a plan that was approved, or a step ``update_state`` made as ``tools``):
  extend the budget as ``execute`` would (seed 004: base more calls, never past the cap) and go
  on to ``execute``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langgraph.runtime import Runtime

from agent.calls.answer_audit import audited
from agent.context import Context
from agent.errors import ToolFailure, operator_faults
from agent.nodes import SupervisorNode
from agent.nodes.deps import SupervisorDeps
from agent.nodes.model_step import end_turn_with_failure
from agent.nodes.owned_turn import refuse_another_users_turn
from agent.state import SupervisorState
from agent.turn.approval import ask_for_approval, awaiting_approval
from agent.turn.claim_check import needs_row_evidence
from agent.turn.drain_rule import TurnCounters, drain_decision, open_rows
from agent.turn.evidence import folded_snapshot, turn_evidence
from agent.turn.lineage import claim_next_step, moved_on
from agent.turn.plan_card import plan_card, ui_todos
from agent.turn.plan_rows import PlanCounts, TurnPlan, count_rows, plan_limits
from agent.turn.rows_handoff import NOTHING_HANDED, hand_over, take_over
from agent.turn.usage import store_row_usage, todos_with_usage, turn_usage
from prompts import Prompts
from storage.models import TodoEvidence, TurnTodo
from storage.repositories import TurnScope


def make_drain_node(deps: SupervisorDeps) -> SupervisorNode:
    async def drain(state: SupervisorState, *, runtime: Runtime[Context]) -> dict[str, Any]:
        context = runtime.context or Context()
        await deps.prepare()
        approval: dict[str, Any] = {}
        scope = TurnScope(state.conversationId, state.turnId)
        known = take_over(state, scope, state.turnStep)
        try:
            await refuse_another_users_turn(deps.database, scope.conversation_id, context)
            asking = state.approvePlan and not state.planApproved
            behind = asking and await moved_on(
                deps.database, scope, state.turnStep, state.catchUpTo
            )
            if asking and not behind:
                # Before the step is claimed: the pause must not move the turn's step on, or
                # the run that answers it would look like a fork (``agent.turn.lineage``).
                plan = TurnPlan(deps.database, scope)
                rows, _ = await plan.rows()
                if awaiting_approval(state.approvePlan, state.planApproved, open_rows(rows)):
                    approval = await ask_for_approval(
                        plan, rows, plan_limits(context), deps.prompts
                    )
                known = None  # the approval may have changed them
            claim = await claim_next_step(
                deps.database, state, read_rows=True, known_rows=known, saved=deps.checkpoints
            )
            rows = claim.rows or []
            if behind and open_rows(rows):
                # A run from before the decision whose turn has moved on (a fork) decides on
                # its own copy of the plan, never on the original turn's rows; run again to
                # take the answer, its claim finds the same fork (``agent.turn.lineage``).
                plan = TurnPlan(deps.database, claim.scope)
                approval = await ask_for_approval(plan, rows, plan_limits(context), deps.prompts)
                rows, _ = await plan.rows()
            counts = count_rows(rows)
            evidence = (
                await turn_evidence(deps.database, claim.scope)
                if rows and not open_rows(rows) and needs_row_evidence(state.messages)
                else []
            )
        except ToolFailure as failure:
            return end_turn_with_failure(failure.message, None, prompts=deps.prompts)
        result = _drain(state, context, rows, counts, deps.prompts, evidence)
        if context.audit_model and rows and result.get("turnStatus") == "answered":
            snapshot = folded_snapshot(rows, state.todos, state.evidenceLog)
            result = await audited(state, context, snapshot, result, deps.prompts)
        if result.get("turnStatus", "running") != "running":
            await store_row_usage(deps.database, claim.scope, state.rowUsage, state.usageEstimated)
        messages = [*approval.pop("messages", []), *result.pop("messages", [])]
        todos = ui_todos(
            todos_with_usage(folded_snapshot(rows, state.todos, state.evidenceLog), state.rowUsage)
        )
        card = plan_card(
            state.turnId,
            todos,
            [*state.messages, *messages],
            turn_status=result.get("turnStatus", "running"),
            llm_calls=result.get("llmCalls", state.llmCalls),
        )
        handed = NOTHING_HANDED
        if result.get("turnStatus", "running") == "running" and not approval:
            handed = hand_over(todos, claim.scope, claim.step, rows, shown=True)
        return {
            **claim.update(),
            **handed,
            "todos": todos,
            "evidenceLog": [],
            "toolErrors": operator_faults(state.messages, state.turnMessageId),
            **approval,
            **result,
            **({"messages": messages} if messages else {}),
            **card,
        }

    return drain


def _drain(
    state: SupervisorState,
    context: Context,
    rows: list[TurnTodo],
    counts: PlanCounts,
    prompts: Prompts,
    evidence: Sequence[TodoEvidence],
) -> dict[str, Any]:
    """The decision itself (``agent.turn.drain_rule``), from the state and the rows just read."""
    counters = TurnCounters(
        llm_calls=state.llmCalls,
        budget=state.iterationBudget,
        reminders_in_a_row=state.remindersInARow,
        usage=turn_usage(state),
    )
    return drain_decision(state.messages, rows, counters, context, prompts, evidence)
