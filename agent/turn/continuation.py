"""Continuing a plan that earlier turns of the conversation left open (issue 30, part 3).

Seed 004 rules that an unfinished plan is reported and never resumed on its own. The user may
ask for it, though: the ``continue_open_todos`` tool, or ``continuePlan`` in a run's input. Then
the open rows of the conversation's other turns are copied into the current turn as its plan
(pending, each turn's stages kept, after any rows the turn already has) and the old ones are
closed ``cancelled`` with the outcome "continued in turn <id>", each linked to its copy in
``todo_continuations``. Closed rows are never copied, so nothing done is done again.

All of it is one transaction, and each old row is closed only if it is still open (the same
conditional statement that closes rows everywhere) and linked under its id as primary key: a
retry, a resume or a concurrent continuation finds the rows already closed and copies nothing
twice. A tool call's result is recorded in the same transaction (``agent.turn.call_ledger``).

The continued plan is a plan like any other: it holds at most ``max_plan_rows`` rows (the
turn's own included), so a continuation that would copy more is refused whole with
``VALIDATION_ERROR`` and closes nothing. Without that cap the rows of many unfinished turns
would all land in one plan, sent with every LLM call of the turn.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm.attributes import set_committed_value

from agent.errors import database_failure
from agent.turn.call_ledger import record_result
from agent.turn.plan_rows import PlanChange, PlanLimits, TurnPlan, check_plan_size
from storage import Database
from storage.models import TurnTodo, utc_now_iso
from storage.repositories import (
    NewTurnTodo,
    TodoContinuationRepository,
    ToolCallKey,
    TurnScope,
    TurnTodoRepository,
    copy_dependencies,
)

CONTINUED_OUTCOME = "continued in turn {turn_id}"
"""The outcome an old row is closed with (the turn id is filled in)."""


@dataclass
class ContinuedPlan:
    """What one continuation did."""

    copies: list[TurnTodo] = field(default_factory=list)
    """The new rows of this turn, in plan order (empty: nothing was left open)."""
    closed: list[TurnTodo] = field(default_factory=list)
    """The old rows, now ``cancelled``, in the same order as their copies."""
    change: PlanChange = field(default_factory=PlanChange)
    """The turn's rows afterwards and the stage started with them."""


ContinuationReceipt = tuple[ToolCallKey, Callable[[ContinuedPlan], str]]
"""A tool call's key and how its result is rendered, recorded with the change."""


async def open_titles_elsewhere(database: Database, scope: TurnScope) -> list[str]:
    """The titles of the rows other turns of the conversation left open, in plan order."""
    try:
        async with database.session(readonly=True) as session:
            rows = await TodoContinuationRepository(session).open_elsewhere(scope)
    except (SQLAlchemyError, OSError) as error:
        raise database_failure(error) from error
    return [row.title for row in rows]


def _new_priorities(rows: list[TurnTodo], start: int) -> list[int]:
    """Priorities for the copies: each old turn's stages in their order, one turn after
    another, all after ``start``. The rows a turn had in progress together (a stage, or the
    branches a closed blocker freed at once, issue 30) are one stage of the copy, so they start
    together again."""
    stage_of: dict[tuple[str, int], int] = {}
    keys = [(row.turnId, -1 if row.status == "in_progress" else row.priority) for row in rows]
    for key in keys:
        if key not in stage_of:
            stage_of[key] = start + len(stage_of)
    return [stage_of[key] for key in keys]


async def continue_open_rows(
    database: Database,
    scope: TurnScope,
    receipt: ContinuationReceipt | None = None,
    limits: PlanLimits | None = None,
) -> ContinuedPlan:
    """Copy the rows other turns left open into ``scope``'s turn and close the old ones as
    continued, in one transaction; start the plan's first stage if none is in progress.
    ``ToolFailure`` (``VALIDATION_ERROR``, nothing changed): the plan would pass
    ``limits.max_plan_rows`` (default ``PlanLimits()``)."""
    limits = limits or PlanLimits()
    try:
        async with database.session() as session:
            todos = TurnTodoRepository(session)
            links = TodoContinuationRepository(session)
            old_rows = await links.open_elsewhere(scope)
            existing = sum((await todos.count_by_status(scope)).values())
            check_plan_size(existing, len(old_rows), limits, "Continuing the open plan")
            highest = await todos.max_priority(scope)
            priorities = _new_priorities(old_rows, 0 if highest is None else highest + 1)
            outcome = CONTINUED_OUTCOME.format(turn_id=scope.turn_id)
            closed_at = utc_now_iso()
            closed: list[TurnTodo] = []
            wanted: list[NewTurnTodo] = []
            for row, priority in zip(old_rows, priorities, strict=True):
                # Conditional: a row another writer closed meanwhile is not copied.
                if not await todos.close_if_open(
                    row.id,
                    status="cancelled",
                    outcome=outcome,
                    completed_at=closed_at,
                    cancelled_by="system",
                ):
                    continue
                closed.append(row)
                wanted.append(
                    NewTurnTodo(
                        title=row.title,
                        context=row.context,
                        completion_criteria=row.completionCriteria,
                        agent_type=row.agentType,
                        priority=priority,
                    )
                )
            copies = await todos.create_batch(scope, wanted) if wanted else []
            for old, new in zip(closed, copies, strict=True):
                await links.link(old, new)
                set_committed_value(new, "continuedFrom", old.id)
                set_committed_value(old, "continuedIn", new.id)
            copied = {old.id: new.id for old, new in zip(closed, copies, strict=True)}
            await copy_dependencies(session, scope, copied)
            change = await TurnPlan(database, scope).start_next_in(todos)
            continued = ContinuedPlan(copies=copies, closed=closed, change=change)
            if receipt is not None:
                key, render = receipt
                await record_result(session, key, render(continued))
    except (SQLAlchemyError, OSError) as error:
        raise database_failure(error) from error
    return continued
