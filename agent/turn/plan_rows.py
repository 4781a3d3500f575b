"""The plan of one turn: the rules of its rows, shared by the todo tools and the graph's nodes.

Each method is one transaction, so a call either lands whole or not at all. The lifecycle lives
here, in code, not in the prompt: items are validated as a batch before anything is written; only
``start_next`` starts rows (stamping ``startedAt``); a closed row cannot be closed again; a row of
another turn is not found.

Stages: rows that share a ``priority`` (items given the same ``order``) form a stage, and the
whole stage is started at once, so independent items are worked side by side. Rows in progress
always belong to one stage, the first that has open rows; the next stage starts only when every
row of the current one is closed. Items with distinct orders are stages of one: one at a time.

Dependencies (issue 30): an item may name the items it waits for (``blockedBy``). A row never
starts, and is never completed, while one of them is open; once the last one closes, every row it
freed starts at once, whatever its stage, so the branches of a dependency graph run side by side.
A row with blockers started that way holds no stage back; rows without ``blockedBy`` keep the
stage rules above. A cancelled blocker counts as closed. The checks of ``blockedBy`` live in
``agent.turn.blockers``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field
from pydantic.json_schema import SkipJsonSchema
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm.attributes import set_committed_value

from agent.context import Context
from agent.errors import ErrorCode, ToolFailure, database_failure
from agent.turn.blockers import ensure_unblocked, is_ready, record_blockers, resolve_blockers
from agent.turn.call_ledger import record_result
from agent.turn.evidence import summarize_evidence, todo_evidence
from storage import Database
from storage.models import OPEN_TODO_STATUSES, TurnTodo, utc_now_iso
from storage.repositories import NewTurnTodo, ToolCallKey, TurnScope, TurnTodoRepository

CloseStatus = Literal["completed", "cancelled"]


def _without_class_description(schema: dict[str, Any]) -> None:
    """No class description: the schema is sent with every LLM call, and the tool's own
    description says what an item is. Null choices and empty defaults are left out for every
    tool alike, where tools are bound (``agent.calls.tool_schemas``)."""
    schema.pop("description", None)


class TodoItemInput(BaseModel):
    """One item of ``create_todo`` as the model sends it (seed 004's field names). The schema
    is sent with every LLM call, so it says only what a model needs (no class description, no
    ``null`` choices or empty defaults for omitted fields)."""

    model_config = ConfigDict(json_schema_extra=_without_class_description)

    title: str
    context: str = Field(default="", description="Names, values, results it needs.")
    completionCriteria: str = Field(default="", description="How to tell it is done.")
    agentType: str | SkipJsonSchema[None] = Field(
        default=None, description="Specialist to hand it to, if any."
    )
    order: int | SkipJsonSchema[None] = Field(
        default=None, description="1-indexed; steps run together share it."
    )
    blockedBy: list[int | str] | SkipJsonSchema[None] = Field(
        default=None,
        description="0-based indexes (or ids) of steps it waits for.",
    )


@dataclass(frozen=True)
class PlanLimits:
    """Validation limits; settings with seed-friendly defaults (see ``agent.context.Context``)."""

    max_title_length: int = 200
    max_text_length: int = 2000
    max_batch_items: int = 50
    max_plan_rows: int = 100
    """Rows of one turn, closed ones included: each is shown with every LLM call."""
    max_plan_edits: int = 50
    """Operations in one run's ``planEdits`` (``agent.turn.plan_edits``)."""


def plan_limits(context: Context) -> PlanLimits:
    """The plan limits a run's settings set."""
    return PlanLimits(
        max_title_length=context.max_title_length,
        max_text_length=context.max_text_length,
        max_batch_items=context.max_batch_items,
        max_plan_rows=context.max_plan_rows,
        max_plan_edits=context.max_plan_edits,
    )


def check_plan_size(existing: int, added: int, limits: PlanLimits, what: str) -> None:
    """Refuse a change that would leave the turn's plan with more than ``max_plan_rows`` rows
    (``VALIDATION_ERROR``, raised before anything is written). Every row is sent with each of
    the turn's LLM calls and returned with every state read, so the cap bounds both."""
    if existing + added > limits.max_plan_rows:
        raise ToolFailure(
            ErrorCode.VALIDATION_ERROR,
            f"{what} would make the plan {existing + added} rows long ({existing} now, "
            f"{added} more); a plan holds at most {limits.max_plan_rows} rows.",
            "Merge related steps into fewer items, or finish this plan first.",
            limit=limits.max_plan_rows,
        )


@dataclass
class PlanCounts:
    """Rows of the turn by status."""

    pending: int = 0
    in_progress: int = 0
    completed: int = 0
    cancelled: int = 0

    @property
    def total(self) -> int:
        return self.pending + self.in_progress + self.completed + self.cancelled

    @property
    def remaining(self) -> int:
        return self.pending + self.in_progress

    def summary(self) -> dict[str, int]:
        """Seed 004's ``summary`` object."""
        return {
            "total": self.total,
            "pending": self.pending,
            "inProgress": self.in_progress,
            "completed": self.completed,
            "cancelled": self.cancelled,
        }


@dataclass
class PlanChange:
    """What one operation did, so callers can report it and emit progress events."""

    planned: list[TurnTodo] = field(default_factory=list)
    started: list[TurnTodo] = field(default_factory=list)
    """Rows this operation started (a whole stage, when it began one)."""
    closed: TurnTodo | None = None
    in_progress: list[TurnTodo] = field(default_factory=list)
    """Every row in progress afterwards: the open rows of the current stage."""
    counts: PlanCounts = field(default_factory=PlanCounts)
    rows: list[TurnTodo] = field(default_factory=list)
    """Every row of the turn as the operation's transaction left them, in plan order: what
    the next reader of this run may take instead of reading (``agent.turn.rows_handoff``)."""

    @property
    def current(self) -> TurnTodo | None:
        """The first row in progress (the only one, unless the current stage has several)."""
        return self.in_progress[0] if self.in_progress else None


class CompletionJudge(Protocol):
    """What decides whether a row may close as completed (``agent.calls.completion``): given
    the row in ``list_todo``'s shape (``outcome`` the one being recorded) and its evidence
    (``agent.turn.evidence.todo_evidence``), None accepts, a reason refuses. It raises
    ``ToolFailure`` when it cannot judge (a check that raised: an operator fault)."""

    def applies(self, row: TurnTodo) -> bool:
        """Whether any check judges this row (no evidence is read for a row none judges)."""
        ...

    async def __call__(self, row: dict[str, Any], evidence: list[dict[str, Any]]) -> str | None: ...


@dataclass(frozen=True)
class Receipt:
    """How a tool call records its result with the change (see ``agent.turn.call_ledger``):
    ``render`` turns the change into the tool's result, inside the change's transaction."""

    key: ToolCallKey
    render: Callable[[PlanChange], str]


def count_rows(rows: Sequence[TurnTodo]) -> PlanCounts:
    """Counts by status of a turn's rows (all of them: a turn has at most a few hundred)."""
    counts = PlanCounts()
    for row in rows:
        if row.status == "pending":
            counts.pending += 1
        elif row.status == "in_progress":
            counts.in_progress += 1
        elif row.status == "completed":
            counts.completed += 1
        elif row.status == "cancelled":
            counts.cancelled += 1
    return counts


def validate_items(items: Sequence[TodoItemInput], limits: PlanLimits) -> list[TodoItemInput]:
    """Check a whole batch before writing any of it; the first problem names the item and fix."""
    if not items:
        raise ToolFailure(
            ErrorCode.VALIDATION_ERROR,
            "create_todo needs at least one item.",
            "Pass every step of the plan in `items`, or answer directly if no plan is needed.",
        )
    if len(items) > limits.max_batch_items:
        raise ToolFailure(
            ErrorCode.VALIDATION_ERROR,
            f"A plan may have at most {limits.max_batch_items} items per call; got {len(items)}.",
            "Merge related steps into fewer items.",
        )
    cleaned: list[TodoItemInput] = []
    for index, item in enumerate(items, start=1):
        title = item.title.strip()
        if not title:
            raise ToolFailure(
                ErrorCode.VALIDATION_ERROR,
                f"Item {index} has an empty title.",
                "Give every item a short title that names the step.",
            )
        if len(title) > limits.max_title_length:
            raise ToolFailure(
                ErrorCode.VALIDATION_ERROR,
                f"Item {index} has a title of {len(title)} characters; "
                f"the limit is {limits.max_title_length}.",
                "Shorten the title and move details into `context`.",
            )
        for name in ("context", "completionCriteria"):
            value: str = getattr(item, name)
            if len(value) > limits.max_text_length:
                raise ToolFailure(
                    ErrorCode.VALIDATION_ERROR,
                    f"Item {index} has a `{name}` of {len(value)} characters; "
                    f"the limit is {limits.max_text_length}.",
                    f"Shorten `{name}` to its essentials.",
                )
        if item.order is not None and item.order < 1:
            raise ToolFailure(
                ErrorCode.VALIDATION_ERROR,
                f"Item {index} has order {item.order}; order is 1-indexed.",
                "Use 1 for the first step, or omit `order` to keep list order.",
            )
        agent_type = (item.agentType or "").strip() or None
        cleaned.append(item.model_copy(update={"title": title, "agentType": agent_type}))
    return cleaned


def _check_todo_id(todo_id: str) -> str:
    candidate = todo_id.strip()
    try:
        uuid.UUID(candidate)
    except ValueError:
        raise ToolFailure(
            ErrorCode.INVALID_ID,
            f"'{todo_id}' is not a todo id; todo ids are UUIDs.",
            "Use the `id` returned by create_todo, complete_todo or list_todo.",
        ) from None
    return candidate


class TurnPlan:
    """The rows of one turn, behind the lifecycle rules."""

    def __init__(self, database: Database, scope: TurnScope) -> None:
        self._database = database
        self.scope = scope

    async def add_items(
        self,
        items: Sequence[TodoItemInput],
        limits: PlanLimits,
        receipt: Receipt | None = None,
        *,
        known_rows: list[TurnTodo] | None = None,
    ) -> PlanChange:
        """Create the items as pending rows and start the first one if none is in progress.
        ``known_rows``: the turn's rows as they are now, handed over by the step before in
        this run (``agent.turn.rows_handoff``), used instead of reading them."""
        return await self._add(items, limits, receipt, replace_open=False, known_rows=known_rows)

    async def replace_open_items(
        self, items: Sequence[TodoItemInput], limits: PlanLimits
    ) -> PlanChange:
        """Replace the open rows with ``items`` in one transaction (an edit of a plan nobody
        has worked yet); an invalid batch changes nothing."""
        return await self._add(items, limits, None, replace_open=True)

    async def cancel_open(self, outcome: str) -> list[TurnTodo]:
        """Cancel every open row with ``outcome`` (a plan the user rejected: the user's choice,
        recorded as such, so the turn is not counted as having failed at them)."""
        try:
            async with self._database.session() as session:
                repository = TurnTodoRepository(session)
                rows = await repository.find_by_turn(self.scope)
                cancelled = []
                for row in rows:
                    if row.status in OPEN_TODO_STATUSES and await repository.close_if_open(
                        row.id,
                        status="cancelled",
                        outcome=outcome,
                        completed_at=utc_now_iso(),
                        cancelled_by="user",
                    ):
                        cancelled.append(row)
        except (SQLAlchemyError, OSError) as error:
            raise database_failure(error) from error
        return cancelled

    async def _add(
        self,
        items: Sequence[TodoItemInput],
        limits: PlanLimits,
        receipt: Receipt | None,
        *,
        replace_open: bool,
        known_rows: list[TurnTodo] | None = None,
    ) -> PlanChange:
        cleaned = validate_items(items, limits)
        try:
            async with self._database.session() as session:
                repository = TurnTodoRepository(session)
                if replace_open:
                    await repository.delete_open(self.scope)
                if known_rows is None and any(
                    isinstance(ref, str) and not ref.strip().isdigit()
                    for item in cleaned
                    for ref in item.blockedBy or ()
                ):
                    known_rows = await repository.find_by_turn(self.scope)
                if known_rows is None:
                    existing = sum((await repository.count_by_status(self.scope)).values())
                    highest = await repository.max_priority(self.scope)
                else:
                    existing = len(known_rows)
                    highest = max((row.priority for row in known_rows), default=None)
                check_plan_size(existing, len(cleaned), limits, "create_todo")
                next_priority = 0 if highest is None else highest + 1
                explicit = [item.order - 1 for item in cleaned if item.order is not None]
                next_priority = max([next_priority, *(p + 1 for p in explicit)])
                new_rows: list[NewTurnTodo] = []
                for item in cleaned:
                    if item.order is not None:
                        priority = item.order - 1
                    else:
                        priority = next_priority
                        next_priority += 1
                    new_rows.append(
                        NewTurnTodo(
                            title=item.title,
                            context=item.context,
                            completion_criteria=item.completionCriteria,
                            agent_type=item.agentType,
                            priority=priority,
                        )
                    )
                blockers = resolve_blockers(
                    cleaned, [row.priority for row in new_rows], known_rows or []
                )
                planned = await repository.create_batch(self.scope, new_rows)
                await record_blockers(session, self.scope, planned, blockers)
                rows = None if known_rows is None else in_plan_order([*known_rows, *planned])
                change = await self._start_next(repository, rows)
                change.planned = planned
                if receipt is not None:
                    await record_result(session, receipt.key, receipt.render(change))
        except (SQLAlchemyError, OSError) as error:
            raise database_failure(error) from error
        return change

    async def start_next(self) -> PlanChange:
        """Make sure the first stage with open rows is in progress."""
        try:
            async with self._database.session() as session:
                return await self._start_next(TurnTodoRepository(session))
        except (SQLAlchemyError, OSError) as error:
            raise database_failure(error) from error

    async def start_next_in(self, repository: TurnTodoRepository) -> PlanChange:
        """``start_next`` inside the caller's transaction: a change of several rows (a
        continued plan, ``agent.turn.continuation``) starts its first stage with them."""
        return await self._start_next(repository)

    async def close(
        self,
        todo_id: str,
        outcome: str,
        status: CloseStatus,
        receipt: Receipt | None = None,
        *,
        known_rows: list[TurnTodo] | None = None,
        judge: CompletionJudge | None = None,
        outcome_limit: int | None = None,
    ) -> PlanChange:
        """Record a row's outcome as completed or cancelled, then start the next row: the one
        close of a row, whichever path asks for it (the model's ``complete_todo``, a stage's
        closes, the compact profile's deterministic closes, a delegated row's close).

        ``known_rows``: the turn's rows as they are now, handed over by the step before in this
        run (``agent.turn.rows_handoff``), used instead of reading them; the writes stay
        conditional, so a row closed or started meanwhile is still caught. ``judge``: the
        completion checks a completed row must pass first (a cancelled row closes unjudged:
        saying it was not done is never a false claim); a refusal is ``COMPLETION_REFUSED`` and
        the row stays open. ``outcome_limit``: the most characters the outcome may have (the
        ``complete_todo`` tool's ``MAX_OUTCOME_LENGTH``; a worker's report is not capped)."""
        todo_id = _check_todo_id(todo_id)
        outcome = _check_outcome(outcome, outcome_limit)
        if judge is not None and status == "completed":
            # Judged before the write transaction opens: a check may take seconds (a verifier
            # model), and SQLite has one writer at a time.
            await self._judge(judge, todo_id, outcome, known_rows)
        try:
            async with self._database.session() as session:
                repository = TurnTodoRepository(session)
                rows, row = await self._rows_with(repository, todo_id, known_rows)
                await _close_row(repository, row, status, outcome)
                change = await self._start_next(repository, rows)
                change.closed = row
                if receipt is not None:
                    await record_result(session, receipt.key, receipt.render(change))
        except (SQLAlchemyError, OSError) as error:
            raise database_failure(error) from error
        return change

    async def _rows_with(
        self, repository: TurnTodoRepository, todo_id: str, known_rows: list[TurnTodo] | None
    ) -> tuple[list[TurnTodo], TurnTodo]:
        """The turn's rows (``known_rows`` if they hold the row, else read) and the row with
        ``todo_id`` among them; ``NOT_FOUND`` when this turn has none."""
        if known_rows is not None and (row := _row_with_id(known_rows, todo_id)) is not None:
            return known_rows, row
        rows = await repository.find_by_turn(self.scope)
        row = _row_with_id(rows, todo_id)
        if row is None:
            raise ToolFailure(
                ErrorCode.NOT_FOUND,
                f"No todo with id '{todo_id}' in this turn's plan.",
                "Use an id from this turn's plan (see the plan view or list_todo).",
            )
        return rows, row

    async def _judge(
        self,
        judge: CompletionJudge,
        todo_id: str,
        outcome: str,
        known_rows: list[TurnTodo] | None,
    ) -> None:
        """Raise ``COMPLETION_REFUSED`` when the judge refuses the open row ``todo_id``; a row
        that is not found or not open is left to ``close`` to report."""
        row = _row_with_id(known_rows, todo_id)
        if row is None:
            try:
                row = await self.find(todo_id)
            except ToolFailure:
                return
        if row.status not in OPEN_TODO_STATUSES or not judge.applies(row):
            return
        evidence = await todo_evidence(self._database, self.scope.conversation_id, row.id)
        shown = {**row.to_dict(), "outcome": outcome}
        shown["evidence"] = summarize_evidence(evidence)
        reason = await judge(shown, evidence)
        if reason:
            raise ToolFailure(
                ErrorCode.COMPLETION_REFUSED,
                f"Todo '{row.title}' was not closed: {reason}",
                "Do the missing work with the tools, then call complete_todo again; or cancel "
                "the item (status 'cancelled') and say why it could not be done.",
                todoId=row.id,
                reason=reason,
            )

    async def find(self, todo_id: str) -> TurnTodo:
        """One row of this turn by id (INVALID_ID for a malformed id, NOT_FOUND for a row that
        does not exist or belongs to another turn)."""
        todo_id = _check_todo_id(todo_id)
        try:
            async with self._database.session(readonly=True) as session:
                row = await TurnTodoRepository(session).find_by_id(todo_id, self.scope)
        except (SQLAlchemyError, OSError) as error:
            raise database_failure(error) from error
        if row is None:
            raise ToolFailure(
                ErrorCode.NOT_FOUND,
                f"No todo with id '{todo_id}' in this turn's plan.",
                "Use an id from this turn's plan (see the plan view or list_todo).",
            )
        return row

    async def rows(
        self, statuses: Sequence[str] | None = None
    ) -> tuple[list[TurnTodo], PlanCounts]:
        """The turn's rows (all, or those in ``statuses``) and its counts."""
        try:
            async with self._database.session(readonly=True) as session:
                repository = TurnTodoRepository(session)
                all_rows = await repository.find_by_turn(self.scope)
        except (SQLAlchemyError, OSError) as error:
            raise database_failure(error) from error
        wanted = None if statuses is None else set(statuses)
        rows = [row for row in all_rows if wanted is None or row.status in wanted]
        return rows, count_rows(all_rows)

    async def _start_next(
        self, repository: TurnTodoRepository, rows: list[TurnTodo] | None = None
    ) -> PlanChange:
        """Start the ready rows of the first stage with open rows, unless a row of another
        stage is in progress, and every row with blockers whose blockers are all closed.
        ``rows``: the turn's rows as this transaction left them (else they are read). Returns
        the rows started now, those in progress afterwards, and every row and the counts
        afterwards. The statements re-check every rule, so a concurrent writer is caught."""
        if rows is None:
            rows = await repository.find_by_turn(self.scope)
        open_rows = [row for row in rows if row.status in OPEN_TODO_STATUSES]
        if not open_rows:
            return PlanChange(counts=count_rows(rows), rows=rows)
        stage = open_rows[0].priority
        # A row started by its blockers closing, not by its stage, holds no stage back.
        holding = any(
            row.status == "in_progress" and row.priority != stage and not row.loaded_blockers()
            for row in open_rows
        )
        waiting = [
            row
            for row in open_rows
            if row.priority == stage and row.status == "pending" and is_ready(row)
        ]
        started_at = utc_now_iso()
        started: list[TurnTodo] = []
        raced = False
        if waiting and not holding:
            count = await repository.start_stage_if_idle(self.scope, stage, started_at=started_at)
            raced = count != len(waiting)
            if not raced:
                started.extend(waiting)
                for row in waiting:
                    _mark(row, status="in_progress", startedAt=started_at)
        freed = [
            row
            for row in open_rows
            if row.status == "pending" and row.loaded_blockers() and is_ready(row)
        ]
        if freed and not raced:
            count = await repository.start_ready([row.id for row in freed], started_at=started_at)
            raced = count != len(freed)
            if not raced:
                started.extend(freed)
                for row in freed:
                    _mark(row, status="in_progress", startedAt=started_at)
        if raced:
            # Another writer changed rows of this turn in between: report what it did.
            rows = await repository.find_by_turn(self.scope)
            candidates = {row.id for row in (*waiting, *freed)}
            started = [
                row
                for row in rows
                if row.id in candidates
                and row.status == "in_progress"
                and row.startedAt == started_at
            ]
        in_progress = [row for row in rows if row.status == "in_progress"]
        started_ids = {row.id for row in started}
        return PlanChange(
            started=[row for row in rows if row.id in started_ids],
            in_progress=in_progress,
            counts=count_rows(rows),
            rows=rows,
        )


def in_plan_order(rows: Sequence[TurnTodo]) -> list[TurnTodo]:
    """``rows`` in the order ``TurnTodoRepository.find_by_turn`` reads them: by priority, then
    creation time, then id."""
    return sorted(rows, key=lambda row: (row.priority, row.createdAt, row.id))


def _check_outcome(outcome: str, limit: int | None = None) -> str:
    """``outcome`` stripped; a row never closes without saying what was done or why not, nor
    with more than ``limit`` characters (it is shown with every later LLM call of the turn)."""
    outcome = outcome.strip()
    if not outcome:
        raise ToolFailure(
            ErrorCode.VALIDATION_ERROR,
            "`outcome` is empty.",
            "Say what was done, or why the item is cancelled, in `outcome`.",
        )
    if limit is not None and len(outcome) > limit:
        raise ToolFailure(
            ErrorCode.VALIDATION_ERROR,
            f"`outcome` has {len(outcome)} characters; the limit is {limit}.",
            "Say what was done, or why not, in a few sentences.",
        )
    return outcome


async def _close_row(
    repository: TurnTodoRepository, row: TurnTodo, status: CloseStatus, outcome: str
) -> None:
    """Close ``row`` in the database if it is still open, and mark the loaded row the same;
    a row closed meanwhile (or blocked) is refused with what it is now."""
    if status == "completed":
        ensure_unblocked(row, "completed")
    completed_at = utc_now_iso()
    # Every cancel on this path is the agent's (the model's complete_todo, or the harness
    # closing an item whose action failed): not the user's choice.
    cancelled_by = "agent" if status == "cancelled" else None
    closed = await repository.close_if_open(
        row.id,
        status=status,
        outcome=outcome,
        completed_at=completed_at,
        refresh=False,
        cancelled_by=cancelled_by,
    )
    if not closed:
        now = await repository.reload(row.id) or row
        ensure_unblocked(now, "completed")  # the statement refuses a blocked row
        raise ToolFailure(
            ErrorCode.VALIDATION_ERROR,
            f"Todo '{now.title}' is already {now.status}.",
            "Move on to the next item; a closed item cannot be closed again.",
        )
    _mark(
        row,
        status=status,
        outcome=outcome,
        completedAt=completed_at,
        startedAt=row.startedAt or (completed_at if status == "completed" else None),
        cancelledBy=cancelled_by,
    )


def _row_with_id(rows: Sequence[TurnTodo] | None, todo_id: str) -> TurnTodo | None:
    return next((row for row in rows or () if row.id == todo_id), None)


def _mark(row: TurnTodo, **values: object) -> None:
    """Set what a statement just wrote on a loaded row without marking it changed (it must not
    be written again at commit)."""
    for name, value in values.items():
        set_committed_value(row, name, value)
