"""Seed 004's iteration budget: how many LLM calls a turn may still make.

Shared by ``execute`` (after a tool round, before its call) and ``drain`` (after an answer), so
the rule is one function whichever node applies it; applying it twice to the same state gives
the same budget.
"""

from __future__ import annotations

from agent.context import Context


def extended_budget(budget: int, llm_calls: int, context: Context) -> int:
    """While rows remain, allow ``base`` more calls from here, never more than the absolute
    cap."""
    return min(context.max_iterations, max(budget, llm_calls + context.base_iterations))


def budget_after_round(
    budget: int, llm_calls: int, rows_remain: bool, tools_ran: bool, context: Context
) -> int:
    """The budget once the last round is taken into account: a tool round with rows still
    open extends it; an answer, or a round with nothing left to do, does not."""
    budget = budget or context.base_iterations
    if rows_remain and tools_ran:
        budget = extended_budget(budget, llm_calls, context)
    return budget
