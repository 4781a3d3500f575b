"""The drain rule: where a turn may end after the model's newest message.

One function for both faces of turnplan: the ``drain`` node of the supervisor graph and
``agent.middleware.TurnPlanMiddleware`` (after each model call) decide with it, from plain
values (the messages, the rows just read, the turn's counters and settings), so the rule cannot
drift between them.

- The model answered while rows remain: remind it (a prompt file) and go on; after
  ``max_reminders`` such answers in a row, stop ``stalled`` with an honest partial answer.
- The model answered and every row is closed (or there was no plan): ``answered``, or
  ``incomplete`` when a row was cancelled for a failure, the answer reports the request not
  done, or it claims a change nothing made (``agent.turn.claim_check``); the answer then says
  what was not done and why.
- The model replied with nothing: ask once more; a second empty reply ends ``no_answer``.
- The budget is spent (LLM calls, or ``Context.max_turn_tokens`` tokens): an honest answer built
  from the rows, ``budget_exhausted``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage

from agent.context import Context
from agent.turn.budget import budget_after_round
from agent.turn.claim_check import backed_or_restated
from agent.turn.empty_answer import after_empty_reply
from agent.turn.identity import REMINDER_NAME
from agent.turn.outcome import (
    budget_exhausted_message,
    plan_finished_message,
    stalled_message,
    tokens_exhausted_message,
    turn_end_status,
    with_not_done,
)
from agent.turn.plan_rows import count_rows
from agent.turn.usage import TurnUsage, tokens_exhausted
from prompts import Prompts, chosen
from storage.models import TodoEvidence, TurnTodo


@dataclass(frozen=True)
class TurnCounters:
    """The turn's counters the rule reads (graph state fields, or the middleware's)."""

    llm_calls: int
    budget: int
    reminders_in_a_row: int
    usage: TurnUsage


def open_rows(rows: Sequence[TurnTodo]) -> list[TurnTodo]:
    """The rows still to do (``pending`` or ``in_progress``)."""
    return [row for row in rows if row.status in ("pending", "in_progress")]


def reminder(rows: Sequence[TurnTodo], prompts: Prompts | None = None) -> HumanMessage:
    """The nudge sent when the model answers with rows still open."""
    remaining = open_rows(rows)
    current = next((row for row in remaining if row.status == "in_progress"), remaining[0])
    return HumanMessage(
        content=chosen(prompts).render(
            "reminder",
            open_count=len(remaining),
            open_titles="; ".join(f'"{row.title}"' for row in remaining),
            current_title=current.title,
            current_id=current.id,
        ),
        name=REMINDER_NAME,
    )


def drain_decision(
    messages: Sequence[AnyMessage],
    rows: list[TurnTodo],
    counters: TurnCounters,
    context: Context,
    prompts: Prompts | None = None,
    evidence: Sequence[TodoEvidence] = (),
) -> dict[str, Any]:
    """The update after the newest message: ``turnStatus`` set when the turn ends here (with
    the closing message in ``messages``), else the reminder (if the model answered) and the
    budget. Keys are the supervisor state's names; ``prompts``: the texts of the messages it
    writes (default: the environment's); ``evidence``: the turn's, when
    ``agent.turn.claim_check.needs_row_evidence`` asks for it (see ``ended``)."""
    last = messages[-1] if messages else None
    answered = isinstance(last, AIMessage) and not last.tool_calls
    remaining = count_rows(rows).remaining
    budget = budget_after_round(
        counters.budget, counters.llm_calls, remaining > 0, not answered, context
    )
    out_of_tokens = tokens_exhausted(counters.usage, context.max_turn_tokens)
    out_of_calls = counters.llm_calls >= budget or out_of_tokens

    if not (out_of_calls and remaining):
        # An empty reply is no answer (agent.turn.empty_answer): asked again once, else no_answer.
        empty = after_empty_reply(messages, rows, call_left=not out_of_calls, prompts=prompts)
        if empty is not None:
            return {"iterationBudget": budget, **empty}
    if answered and not remaining:
        assert isinstance(last, AIMessage)
        return ended(last, rows, prompts, messages, evidence)
    if out_of_calls and rows and not remaining:
        # The last item closed on the last allowed call: nothing is missing but the words.
        message = AIMessage(content=plan_finished_message(rows, prompts))
        return {"messages": [message], "turnStatus": turn_end_status(rows)}
    if out_of_calls:
        message = AIMessage(
            content=tokens_exhausted_message(
                rows, counters.usage.total_tokens, context.max_turn_tokens, prompts
            )
            if out_of_tokens and context.max_turn_tokens is not None
            else budget_exhausted_message(rows, counters.llm_calls, prompts)
        )
        return {"messages": [message], "turnStatus": "budget_exhausted", "iterationBudget": budget}
    update: dict[str, Any] = {"iterationBudget": budget, "remindersInARow": 0}
    if answered:
        if counters.reminders_in_a_row >= context.max_reminders:
            message = AIMessage(
                content=stalled_message(rows, counters.reminders_in_a_row + 1, prompts)
            )
            return {"messages": [message], "turnStatus": "stalled"}
        update["messages"] = [reminder(rows, prompts)]
        update["remindersInARow"] = counters.reminders_in_a_row + 1
    return update


def ended(
    answer: AIMessage,
    rows: list[TurnTodo],
    prompts: Prompts | None = None,
    messages: Sequence[AnyMessage] = (),
    evidence: Sequence[TodoEvidence] = (),
) -> dict[str, Any]:
    """The end of a turn the model answered with every row closed: ``answered`` only when all
    that was asked was done; otherwise ``incomplete``, the answer restated with the rows
    cancelled for a failure and why, unless it lists them already, with the change it claims
    that nothing made, or with a row closed as completed on failed calls alone
    (``agent.turn.claim_check``)."""
    status = turn_end_status(rows, answer)
    restated = with_not_done(answer, rows, prompts) if status == "incomplete" else None
    if status == "answered" and (
        restated := backed_or_restated(messages, answer, rows, prompts, evidence)
    ):
        status = "incomplete"
    return {"turnStatus": status, **({"messages": [restated]} if restated else {})}
