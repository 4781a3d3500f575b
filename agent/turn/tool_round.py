"""What a tool round means for the turn, judged before the next model call.

One function for both faces of turnplan: the ``execute`` node of the supervisor graph and
``agent.middleware.TurnPlanMiddleware`` (before each model call that follows a tool round).
From plain values (the messages, the rows after the round, the turn's counters and settings):

- rows still open extend the budget (``agent.turn.budget``: base more calls, never past the cap)
  and the reminder count starts again;
- a budget that is spent (calls or tokens) makes no call: the drain rule then writes the honest
  closing answer (``agent.turn.drain_rule``);
- a round that made no progress is counted (``agent.turn.idle``); the ``max_idle_rounds``-th in a
  row ends the turn ``stalled`` with the report naming the calls that went round.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, ToolMessage

from agent.context import Context
from agent.turn.budget import budget_after_round
from agent.turn.idle import judge_round, repeated_summary
from agent.turn.outcome import stalled_idle_message
from agent.turn.plan_rows import count_rows
from agent.turn.usage import TurnUsage, tokens_exhausted
from prompts import Prompts
from storage.models import TurnTodo


def after_tool_round(messages: Sequence[AnyMessage]) -> bool:
    """The step before this one ran tools (its results end the history): a reminder or an
    approval leaves its own message last, and the drain rule has already counted the round
    then."""
    return bool(messages) and isinstance(messages[-1], ToolMessage)


@dataclass(frozen=True)
class IdleCount:
    """The no-progress count so far (state fields ``progressMark``, ``idleRounds``,
    ``idleCalls``)."""

    mark: str = ""
    rounds: int = 0
    calls: Sequence[str] = ()


@dataclass(frozen=True)
class RoundVerdict:
    """The round's update (state keys), and how the turn goes on: ``out_of_budget`` (no call
    left: hand over to the drain rule) or ``stalled`` (the closing message to send)."""

    update: dict[str, Any]
    out_of_budget: bool = False
    stalled: AIMessage | None = None


def judge_tool_round(
    messages: Sequence[AnyMessage],
    turn_message_id: str,
    rows: Sequence[TurnTodo],
    *,
    budget: int,
    llm_calls: int,
    usage: TurnUsage,
    idle: IdleCount,
    context: Context,
    prompts: Prompts | None = None,
) -> RoundVerdict:
    """Judge the tool round that just ended (``rows``: the rows after it; ``prompts``: the
    texts of the closing message, default the environment's)."""
    budget = budget_after_round(budget, llm_calls, count_rows(rows).remaining > 0, True, context)
    update: dict[str, Any] = {"iterationBudget": budget, "remindersInARow": 0}
    if llm_calls >= budget or tokens_exhausted(usage, context.max_turn_tokens):
        return RoundVerdict(update, out_of_budget=True)
    verdict = judge_round(
        messages,
        turn_message_id,
        rows,
        mark_before=idle.mark,
        idle_before=idle.rounds,
        calls_before=list(idle.calls),
        max_idle_rounds=context.max_idle_rounds,
    )
    update.update(verdict.update)
    if not verdict.stalled:
        return RoundVerdict(update)
    message = AIMessage(
        content=stalled_idle_message(
            list(rows), verdict.rounds, repeated_summary(verdict.calls), prompts
        )
    )
    return RoundVerdict(update, stalled=message)
