"""Plan edits without a model call: the user changes the current turn's plan directly.

A run whose input has ``planEdits`` and no new human message applies them to the thread's
current turn in one transaction and makes no LLM call (``agent.nodes.plan``):

- ``{"op": "add", "title": "...", "description"?: "..."}``: a new pending row at the end (the
  description is the row's ``context``);
- ``{"op": "cancel", "id": "...", "reason"?: "..."}``: the open row is cancelled, its outcome
  ``"Cancelled by the user: <reason>"`` so it reads as the user's doing, not the model's;
- ``{"op": "move", "id": "...", "position": N}``: the open row goes to index ``N`` (0-based)
  among the turn's open rows; rows that shared a stage keep sharing it.

A run sends at most ``Context.max_plan_edits`` edits (50 by default), and the plan they leave
holds at most ``Context.max_plan_rows`` rows (100), closed ones included; fields are strictly
typed (``position`` an integer, never a boolean or a string). Anything else is refused as a whole
with ``VALIDATION_ERROR`` before a row is read. An edit's row is found by id in constant time, so
a batch costs the edits times the open rows at most, which the two caps bound.

Edits apply in list order, each to the plan the ones before it left. One bad edit (an unknown
or closed row, an empty title, a move that would leave a pending row before the row in
progress, which would make a second row in progress) fails the whole batch with the same error
envelope as a tool call's, and nothing changes. Every edit is recorded in ``tool_audit`` as a
call of ``plan_edit`` (the failing one with its error code), so the user's edits sit beside the
model's calls in the audit trail.

A run's edits apply exactly once: a LangGraph Server that re-picks a run whose worker died starts
it over from its input, ``planEdits`` included. The run's result is recorded in ``tool_results``
(the tool call ledger, ``agent.turn.call_ledger``) in the same transaction as the edits and their
audit rows, under the run's id, and an attempt that finds it returns it and changes nothing.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from agent.errors import ErrorCode, ToolFailure, database_failure, describe_validation_error
from agent.turn.call_ledger import CallAlreadyRecorded, record_result, recorded_results
from agent.turn.plan_rows import (
    PlanLimits,
    TodoItemInput,
    TurnPlan,
    check_plan_size,
    validate_items,
)
from storage import Database
from storage.models import OPEN_TODO_STATUSES, TurnTodo, utc_now_iso
from storage.repositories import (
    CallOrigin,
    NewTurnTodo,
    ToolAuditRepository,
    ToolCallKey,
    TurnScope,
    TurnTodoRepository,
)

AUDIT_NAME = "plan_edit"
"""The tool name the edits are audited under."""
LEDGER_PREFIX = "plan-edit-"
"""The ``tool_results`` id of a run's edits is this and the run's key (``ledger_id``)."""
CANCELLED_BY_USER = "Cancelled by the user"


class AddEdit(BaseModel):
    """A new pending row at the end of the plan."""

    model_config = ConfigDict(extra="forbid", strict=True)
    op: Literal["add"]
    title: str
    description: str = ""


class CancelEdit(BaseModel):
    """Cancel an open row; the reason becomes its outcome."""

    model_config = ConfigDict(extra="forbid", strict=True)
    op: Literal["cancel"]
    id: str
    reason: str = ""


class MoveEdit(BaseModel):
    """Move an open row to ``position`` (0-based) among the open rows."""

    model_config = ConfigDict(extra="forbid", strict=True)
    op: Literal["move"]
    id: str
    position: int = Field(ge=0)


PlanEdit = Annotated[AddEdit | CancelEdit | MoveEdit, Field(discriminator="op")]
_EDITS = TypeAdapter(list[PlanEdit])


@dataclass(eq=False)
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


def parse_edits(value: Any, max_edits: int) -> list[AddEdit | CancelEdit | MoveEdit]:
    """``planEdits`` as edits (``ToolFailure`` ``VALIDATION_ERROR``: not a list, empty, more than
    ``max_edits``, or an edit of the wrong shape or type). The count is checked before any edit
    is parsed, so an oversized batch costs nothing but its length."""
    if not isinstance(value, list):
        raise ToolFailure(
            ErrorCode.VALIDATION_ERROR,
            f"planEdits must be a list of edits, not {type(value).__name__}.",
            'Send a list such as [{"op": "add", "title": "Buy eggs"}].',
        )
    if len(value) > max_edits:
        raise ToolFailure(
            ErrorCode.VALIDATION_ERROR,
            f"planEdits has {len(value)} edits; a run may send at most {max_edits}.",
            f"Send the edits in runs of at most {max_edits}.",
            limit=max_edits,
        )
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


def _open_draft(by_id: dict[str, _Draft], todo_id: str, index: int) -> _Draft:
    found = by_id.get(todo_id)
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


class _OpenOrder:
    """The open drafts in order, with their statuses in a parallel list, so each edit's work
    is a few list operations that run in C (find by identity, delete, insert, ``index``): on
    main every move rebuilt the plan and rescanned it in Python, and 10,000 moves over 10,000
    rows held the server's event loop for over a minute."""

    def __init__(self, drafts: Sequence[_Draft]) -> None:
        self.drafts = list(drafts)
        self.statuses = [draft.status for draft in drafts]

    def append(self, draft: _Draft) -> None:
        self.drafts.append(draft)
        self.statuses.append(draft.status)

    def remove(self, draft: _Draft) -> None:
        at = self.drafts.index(draft)  # identity: _Draft compares by identity
        del self.drafts[at]
        del self.statuses[at]

    def insert(self, position: int, draft: _Draft) -> None:
        self.drafts.insert(position, draft)
        self.statuses.insert(position, draft.status)

    def in_progress_after_pending(self) -> _Draft | None:
        """The first row in progress that comes after a pending row, if any."""
        try:
            first_pending = self.statuses.index("pending")
            return self.drafts[self.statuses.index("in_progress", first_pending)]
        except ValueError:
            return None


def _new_row(index: int, edit: AddEdit, limits: PlanLimits) -> _Draft:
    """The draft of an ``add`` edit, its title and description checked as create_todo's."""
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
    return _Draft(None, item.title, item.context)


def _move(index: int, edit: MoveEdit, draft: _Draft, order: _OpenOrder) -> None:
    """Move ``draft`` to the edit's position among the open rows, or refuse the edit."""
    if edit.position >= len(order.drafts):
        raise _edit_failure(
            index,
            ErrorCode.VALIDATION_ERROR,
            f"position {edit.position} is past the end of the {len(order.drafts)} open rows.",
            f"Use a position from 0 to {len(order.drafts) - 1}.",
        )
    order.remove(draft)
    order.insert(edit.position, draft)
    draft.stage = None
    candidate = order.in_progress_after_pending()
    if candidate is not None:
        raise _edit_failure(
            index,
            ErrorCode.VALIDATION_ERROR,
            f"moving row '{draft.title}' to {edit.position} puts a pending row before "
            f"the row in progress, '{candidate.title}': that would make a second row in "
            "progress.",
            "Keep the rows in progress first among the open rows; cancel a row instead "
            "of moving work ahead of it.",
        )


def plan_after_edits(
    rows: Sequence[TurnTodo], edits: Sequence[AddEdit | CancelEdit | MoveEdit], limits: PlanLimits
) -> list[_Draft]:
    """The open rows in their new order, new ones included, and the cancelled ones, as the
    edits leave them; ``ToolFailure`` names the first bad edit (index from 0). Refused first,
    before any edit is tried: a plan that would pass ``limits.max_plan_rows``."""
    adds = sum(isinstance(edit, AddEdit) for edit in edits)
    check_plan_size(len(rows), adds, limits, "planEdits")
    order = _OpenOrder(
        [
            _Draft(row, row.title, row.context, row.status, row.priority)
            for row in rows
            if row.status in OPEN_TODO_STATUSES
        ]
    )
    by_id = {draft.row.id: draft for draft in order.drafts if draft.row is not None}
    cancelled: list[_Draft] = []
    for index, edit in enumerate(edits):
        if isinstance(edit, AddEdit):
            order.append(_new_row(index, edit, limits))
            continue
        draft = _open_draft(by_id, edit.id.strip(), index)
        if isinstance(edit, CancelEdit):
            reason = edit.reason.strip()
            draft.status = "cancelled"
            draft.outcome = f"{CANCELLED_BY_USER}: {reason}" if reason else f"{CANCELLED_BY_USER}."
            order.remove(draft)
            cancelled.append(draft)
            continue
        _move(index, edit, draft, order)
    return [*order.drafts, *cancelled]


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
    audit: ToolAuditRepository,
    origin: CallOrigin,
    edits: Sequence[Any],
    failure: ToolFailure | None,
) -> None:
    """One ``tool_audit`` row per edit: all of them on success, else the one that failed (in
    the caller's transaction, so the audit commits with the edits and the run's ledger row)."""
    failed_at = failure.extra.get("edit") if failure is not None else None
    for index, edit in enumerate(edits):
        if failure is not None and failed_at not in (None, index):
            continue
        call = CallOrigin(
            origin.user_id, origin.conversation_id, origin.turn_id, f"{origin.tool_call_id}:{index}"
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


def ledger_id(run_key: str) -> str:
    """The ``tool_results`` id under which a run's edits are recorded (the same for every
    attempt of the run), and the prefix of its audit rows' call ids."""
    return f"{LEDGER_PREFIX}{run_key}" if run_key else f"{LEDGER_PREFIX}{uuid.uuid4()}"


def _outcome(result: dict[str, Any]) -> int:
    """The applied count of a recorded result, or its failure raised again."""
    if result.get("status") == "applied":
        return int(result.get("applied") or 0)
    envelope = {key: value for key, value in result.items() if key != "status"}
    code = ErrorCode(envelope.pop("error"))
    raise ToolFailure(code, envelope.pop("message"), envelope.pop("suggestion"), **envelope)


async def _recorded(database: Database, scope: TurnScope, call_id: str) -> dict[str, Any] | None:
    """What this run's edits did, if an earlier attempt of the run recorded it."""
    found = await recorded_results(database, scope.conversation_id, [call_id])
    record = found.get(call_id)
    return json.loads(record.content) if record is not None else None


async def _write(
    database: Database,
    scope: TurnScope,
    raw_edits: Any,
    limits: PlanLimits,
    origin: CallOrigin,
) -> dict[str, Any]:
    """Apply the edits, audit them and record the run's result, all in one transaction; a
    failing batch writes its audit row and its result alone. Returns the result as recorded."""
    audited = raw_edits if isinstance(raw_edits, list) else [raw_edits]
    key = ToolCallKey(scope.conversation_id, scope.turn_id, origin.tool_call_id, AUDIT_NAME)
    try:
        async with database.session() as session:
            applied = await _edit_rows(TurnTodoRepository(session), scope, raw_edits, limits)
            result: dict[str, Any] = {"status": "applied", "applied": applied}
            await _audit(ToolAuditRepository(session), origin, audited, None)
            await record_result(session, key, json.dumps(result))
        return result
    except ToolFailure as failure:
        result = {"status": "error", **failure.envelope()}
        async with database.session() as session:
            await _audit(ToolAuditRepository(session), origin, audited, failure)
            await record_result(session, key, json.dumps(result))
        return result


async def _edit_rows(
    repository: TurnTodoRepository, scope: TurnScope, raw_edits: Any, limits: PlanLimits
) -> int:
    """Write the edits to the turn's rows (``ToolFailure``: a bad edit, nothing written);
    the number of edits."""
    edits = parse_edits(raw_edits, limits.max_plan_edits)
    if not scope.turn_id:
        raise ToolFailure(
            ErrorCode.NOT_FOUND,
            "This thread has no turn whose plan could be edited.",
            "Send a message first; planEdits edit the plan of the thread's current turn.",
        )
    rows = await repository.find_by_turn(scope)
    drafts = plan_after_edits(rows, edits, limits)
    open_drafts = [d for d in drafts if d.status in OPEN_TODO_STATUSES]
    closed_priorities = [r.priority for r in rows if r.status not in OPEN_TODO_STATUSES]
    base = max(closed_priorities, default=-1) + 1
    now = utc_now_iso()
    for draft in drafts:
        if draft.status == "cancelled" and draft.row is not None and draft.outcome:
            await repository.close_if_open(
                draft.row.id,
                status="cancelled",
                outcome=draft.outcome,
                completed_at=now,
                cancelled_by="user",
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
    return len(edits)


async def apply_plan_edits(
    database: Database,
    scope: TurnScope,
    raw_edits: Any,
    limits: PlanLimits,
    *,
    user_id: str,
    start_next: bool,
    run_key: str = "",
) -> EditResult:
    """Apply ``raw_edits`` (the input's ``planEdits``) to the turn's rows in one transaction,
    audited; ``ToolFailure`` (nothing changed) names the first bad edit. ``start_next``: the
    turn is still running (paused), so a cancelled row in progress hands over to the next.

    ``run_key`` names the run (``agent.turn.lineage.RunIdentity``: the server's run id, the
    same for every attempt of a run a LangGraph Server re-picks after its worker died; else the
    LangGraph task's id). Its result is recorded in ``tool_results`` in the edits' own
    transaction, so another attempt of the same run gets that result back and changes and
    audits nothing; a run of its own (a new request, even with the same edits) applies them.
    Without a key the result is recorded under an id of its own, which nothing replays."""
    call_id = ledger_id(run_key)
    origin = CallOrigin(user_id, scope.conversation_id, scope.turn_id, call_id)
    try:
        result = await _recorded(database, scope, call_id) if run_key else None
        if result is None:
            try:
                result = await _write(database, scope, raw_edits, limits, origin)
            except (CallAlreadyRecorded, IntegrityError):
                # Another attempt of this run recorded its edits first; this one rolled back.
                result = await _recorded(database, scope, call_id)
                if result is None:
                    raise
    except (SQLAlchemyError, OSError) as error:
        raise database_failure(error) from error
    applied = _outcome(result)
    plan = TurnPlan(database, scope)
    if start_next:
        await plan.start_next()  # idempotent: a replay whose first attempt stopped before it
    after, _ = await plan.rows()
    return EditResult(applied=applied, rows=after)
