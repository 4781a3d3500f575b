"""Plan edits without a model call: the user changes the current turn's plan directly.

A run whose input has ``planEdits`` and no new human message applies them to the thread's
current turn in one transaction and makes no LLM call (``agent.nodes.plan``):

- ``{"op": "add", "title": "...", "description"?: "..."}``: a new pending row at the end (the
  description is the row's ``context``);
- ``{"op": "cancel", "id": "...", "reason"?: "..."}``: the open row is cancelled, its outcome
  ``"Cancelled by the user: <reason>"`` so it reads as the user's doing, not the model's;
- ``{"op": "move", "id": "...", "position": N}``: the open row goes to index ``N`` (0-based)
  among the turn's open rows; rows that shared a stage keep sharing it.

Edits apply in list order, each to the plan the ones before it left. One bad edit (an unknown
or closed row, an empty title, a move that would leave a pending row before the row in
progress, which would make a second row in progress) fails the whole batch with the same error
envelope as a tool call's, and nothing changes. Every edit is recorded in ``tool_audit`` as a
call of ``plan_edit`` (the failing one with its error code), so the user's edits sit beside the
model's calls in the audit trail.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError
from sqlalchemy.exc import SQLAlchemyError

from agent.errors import ErrorCode, ToolFailure, database_failure, describe_validation_error
from agent.turn.plan_rows import PlanLimits, TodoItemInput, TurnPlan, validate_items
from storage import Database
from storage.models import OPEN_TODO_STATUSES, TurnTodo, utc_now_iso
from storage.repositories import (
    CallOrigin,
    NewTurnTodo,
    ToolAuditRepository,
    TurnScope,
    TurnTodoRepository,
)

AUDIT_NAME = "plan_edit"
"""The tool name the edits are audited under."""
CANCELLED_BY_USER = "Cancelled by the user"


class AddEdit(BaseModel):
    """A new pending row at the end of the plan."""

    model_config = ConfigDict(extra="forbid")
    op: Literal["add"]
    title: str
    description: str = ""


class CancelEdit(BaseModel):
    """Cancel an open row; the reason becomes its outcome."""

    model_config = ConfigDict(extra="forbid")
    op: Literal["cancel"]
    id: str
    reason: str = ""


class MoveEdit(BaseModel):
    """Move an open row to ``position`` (0-based) among the open rows."""

    model_config = ConfigDict(extra="forbid")
    op: Literal["move"]
    id: str
    position: int = Field(ge=0)


PlanEdit = Annotated[AddEdit | CancelEdit | MoveEdit, Field(discriminator="op")]
_EDITS = TypeAdapter(list[PlanEdit])


@dataclass
class _Draft:
    """One row as the edits so far leave it (not written until every edit is valid)."""

    row: TurnTodo | None
    title: str
    context: str = ""
    status: str = "pending"
    stage: int | None = None
    """The stage the row had before the edits (None: a new row, or a moved one: its own)."""
    outcome: str | None = None


@dataclass
class EditResult:
    """What a batch of edits did: the rows afterwards and how many edits were applied."""

    applied: int
    rows: list[TurnTodo] = field(default_factory=list)


def parse_edits(value: Any) -> list[AddEdit | CancelEdit | MoveEdit]:
    """``planEdits`` as edits (``ToolFailure`` ``VALIDATION_ERROR``: malformed)."""
    try:
        edits = _EDITS.validate_python(value)
    except ValidationError as error:
        raise ToolFailure(
            ErrorCode.VALIDATION_ERROR,
            f"planEdits is malformed: {describe_validation_error(error)}",
            'Send a list of {"op": "add", "title"}, {"op": "cancel", "id", "reason"} or '
            '{"op": "move", "id", "position"} objects.',
        ) from None
    if not edits:
        raise ToolFailure(
            ErrorCode.VALIDATION_ERROR, "planEdits is empty.", "Send at least one edit."
        )
    return edits


def _edit_failure(index: int, code: ErrorCode, message: str, suggestion: str) -> ToolFailure:
    return ToolFailure(code, f"Edit {index}: {message}", suggestion, edit=index)


def _open_draft(drafts: Sequence[_Draft], todo_id: str, index: int) -> _Draft:
    found = next((d for d in drafts if d.row is not None and d.row.id == todo_id), None)
    if found is None:
        raise _edit_failure(
            index,
            ErrorCode.NOT_FOUND,
            f"no row with id '{todo_id}' in this turn's plan.",
            "Use an id from values.todos of the thread's current turn.",
        )
    if found.status not in OPEN_TODO_STATUSES:
        raise _edit_failure(
            index,
            ErrorCode.VALIDATION_ERROR,
            f"row '{found.title}' is already {found.status}.",
            "Only pending or in-progress rows can be cancelled or moved.",
        )
    return found


def plan_after_edits(
    rows: Sequence[TurnTodo], edits: Sequence[AddEdit | CancelEdit | MoveEdit], limits: PlanLimits
) -> list[_Draft]:
    """The open rows in their new order, new ones included, and the cancelled ones, as the
    edits leave them; ``ToolFailure`` names the first bad edit (index from 0)."""
    drafts = [
        _Draft(row, row.title, row.context, row.status, row.priority)
        for row in rows
        if row.status in OPEN_TODO_STATUSES
    ]
    for index, edit in enumerate(edits):
        if isinstance(edit, AddEdit):
            try:
                (item,) = validate_items(
                    [TodoItemInput(title=edit.title, context=edit.description)], limits
                )
            except ToolFailure as failure:
                raise _edit_failure(
                    index,
                    failure.code,
                    failure.message.replace("Item 1", "the new row"),
                    failure.suggestion,
                ) from None
            drafts.append(_Draft(None, item.title, item.context))
            continue
        draft = _open_draft(drafts, edit.id.strip(), index)
        if isinstance(edit, CancelEdit):
            reason = edit.reason.strip()
            draft.status = "cancelled"
            draft.outcome = f"{CANCELLED_BY_USER}: {reason}" if reason else f"{CANCELLED_BY_USER}."
            continue
        still_open = [d for d in drafts if d.status in OPEN_TODO_STATUSES]
        if edit.position >= len(still_open):
            raise _edit_failure(
                index,
                ErrorCode.VALIDATION_ERROR,
                f"position {edit.position} is past the end of the {len(still_open)} open rows.",
                f"Use a position from 0 to {len(still_open) - 1}.",
            )
        still_open.remove(draft)
        still_open.insert(edit.position, draft)
        draft.stage = None
        closed = [d for d in drafts if d.status not in OPEN_TODO_STATUSES]
        drafts = [*still_open, *closed]
        seen_pending = False
        for candidate in still_open:
            if candidate.status == "pending":
                seen_pending = True
            elif seen_pending:
                raise _edit_failure(
                    index,
                    ErrorCode.VALIDATION_ERROR,
                    f"moving row '{draft.title}' to {edit.position} puts a pending row before "
                    f"the row in progress, '{candidate.title}': that would make a second row in "
                    "progress.",
                    "Keep the rows in progress first among the open rows; cancel a row instead "
                    "of moving work ahead of it.",
                )
    return drafts


def _priorities(drafts: Sequence[_Draft], base: int) -> list[int]:
    """New priorities for the open rows in order: rows that shared a stage before and are
    still next to each other share one; a moved or new row is a stage of its own."""
    priorities: list[int] = []
    previous: _Draft | None = None
    for draft in drafts:
        same = (
            previous is not None
            and draft.stage is not None
            and previous.stage is not None
            and draft.stage == previous.stage
        )
        priorities.append(priorities[-1] if same else (priorities[-1] + 1 if priorities else base))
        previous = draft
    return priorities


async def _audit(
    database: Database,
    origin: CallOrigin,
    edits: Sequence[dict[str, Any]],
    failure: ToolFailure | None,
) -> None:
    """One ``tool_audit`` row per edit: all of them on success, else the one that failed."""
    failed_at = failure.extra.get("edit") if failure is not None else None
    try:
        async with database.session() as session:
            audit = ToolAuditRepository(session)
            for index, edit in enumerate(edits):
                if failure is not None and failed_at not in (None, index):
                    continue
                call = CallOrigin(
                    origin.user_id,
                    origin.conversation_id,
                    origin.turn_id,
                    f"{origin.tool_call_id}:{index}",
                )
                await audit.record(
                    call,
                    AUDIT_NAME,
                    edit if isinstance(edit, dict) else {"edit": edit},
                    status="error" if failure is not None else "success",
                    error_code=failure.code.value if failure is not None else None,
                )
                if failure is not None and failed_at is None:
                    break
    except (SQLAlchemyError, OSError) as error:
        raise database_failure(error, "audit record") from error


async def apply_plan_edits(
    database: Database,
    scope: TurnScope,
    raw_edits: Any,
    limits: PlanLimits,
    *,
    user_id: str,
    start_next: bool,
) -> EditResult:
    """Apply ``raw_edits`` (the input's ``planEdits``) to the turn's rows in one transaction,
    audited; ``ToolFailure`` (nothing changed) names the first bad edit. ``start_next``: the
    turn is still running (paused), so a cancelled row in progress hands over to the next."""
    origin = CallOrigin(user_id, scope.conversation_id, scope.turn_id, f"plan-edit-{uuid.uuid4()}")
    audited = raw_edits if isinstance(raw_edits, list) else [raw_edits]
    try:
        edits = parse_edits(raw_edits)
        if not scope.turn_id:
            raise ToolFailure(
                ErrorCode.NOT_FOUND,
                "This thread has no turn whose plan could be edited.",
                "Send a message first; planEdits edit the plan of the thread's current turn.",
            )
        async with database.session() as session:
            repository = TurnTodoRepository(session)
            rows = await repository.find_by_turn(scope)
            drafts = plan_after_edits(rows, edits, limits)
            open_drafts = [d for d in drafts if d.status in OPEN_TODO_STATUSES]
            closed_priorities = [r.priority for r in rows if r.status not in OPEN_TODO_STATUSES]
            base = max(closed_priorities, default=-1) + 1
            now = utc_now_iso()
            for draft in drafts:
                if draft.status == "cancelled" and draft.row is not None and draft.outcome:
                    await repository.close_if_open(
                        draft.row.id, status="cancelled", outcome=draft.outcome, completed_at=now
                    )
            new_rows: list[NewTurnTodo] = []
            for draft, priority in zip(open_drafts, _priorities(open_drafts, base), strict=True):
                if draft.row is None:
                    new_rows.append(
                        NewTurnTodo(
                            title=draft.title,
                            context=draft.context,
                            completion_criteria="",
                            agent_type=None,
                            priority=priority,
                        )
                    )
                elif draft.row.priority != priority:
                    await repository.update(draft.row.id, priority=priority)
            await repository.create_batch(scope, new_rows)
    except ToolFailure as failure:
        await _audit(database, origin, audited, failure)
        raise
    except (SQLAlchemyError, OSError) as error:
        raise database_failure(error) from error
    plan = TurnPlan(database, scope)
    if start_next:
        await plan.start_next()
    await _audit(database, origin, audited, None)
    after, _ = await plan.rows()
    return EditResult(applied=len(edits), rows=after)
