"""Data access for ``turn_todos`` (seed 004's ``TurnTodoRepository``), async.

Every read is scoped by conversation *and* turn: a ``turnId`` comes from a message's metadata,
which a client controls, so the turn id alone must never be enough to reach another
conversation's rows.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    Insert,
    Text,
    Update,
    and_,
    bindparam,
    delete,
    exists,
    func,
    insert,
    or_,
    select,
    update,
)
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased, selectinload

from storage.models import (
    CANCELLED_BY,
    OPEN_TODO_STATUSES,
    TODO_STATUSES,
    TodoCancellation,
    TurnTodo,
    todo_dependencies,
    utc_now_iso,
)


@dataclass(frozen=True)
class TurnScope:
    """The conversation and turn a row belongs to; both come from the runtime, never the model."""

    conversation_id: str
    turn_id: str


@dataclass(frozen=True)
class NewTurnTodo:
    """The fields a caller chooses when creating a row; id, status and timestamps are ours."""

    title: str
    context: str = ""
    completion_criteria: str = ""
    agent_type: str | None = None
    priority: int = 0


UPDATABLE_FIELDS = frozenset(
    {
        "title",
        "context",
        "completionCriteria",
        "agentType",
        "status",
        "priority",
        "outcome",
        "startedAt",
        "completedAt",
    }
)


def _open_blocker_of(row: type[TurnTodo] | Any) -> Any:
    """True where ``row`` waits for a row that is still open (issue 30's ``blockedBy``)."""
    blocker = aliased(TurnTodo)
    return exists().where(
        todo_dependencies.c.todoId == row.id,
        blocker.id == todo_dependencies.c.blockedById,
        blocker.status.in_(OPEN_TODO_STATUSES),
    )


def _close_if_open(*, completing: bool) -> Update:
    values: dict[str, Any] = {
        "status": bindparam("new_status"),
        "outcome": bindparam("new_outcome"),
        "completedAt": bindparam("at"),
    }
    conditions = [TurnTodo.id == bindparam("todo_id"), TurnTodo.status.in_(OPEN_TODO_STATUSES)]
    if completing:
        values["startedAt"] = func.coalesce(TurnTodo.startedAt, bindparam("at"))
        # A row is never completed while a row it waits for is open (issue 30's BLOCKED).
        conditions.append(~_open_blocker_of(TurnTodo))
    return (
        update(TurnTodo)
        .where(*conditions)
        .values(**values)
        .execution_options(synchronize_session=False)
    )


def _record_cancellation() -> Insert:
    """Who cancelled the row, with the row's own conversation and turn, in one statement."""
    row = select(
        TurnTodo.id,
        TurnTodo.conversationId,
        TurnTodo.turnId,
        bindparam("by", type_=Text),
        bindparam("at", type_=Text),
    ).where(TurnTodo.id == bindparam("todo_id"))
    columns = ["todoId", "conversationId", "turnId", "cancelledBy", "createdAt"]
    return insert(TodoCancellation).from_select(columns, row)


def _start_stage_if_idle() -> Update:
    other = aliased(TurnTodo)
    has_blockers = exists().where(todo_dependencies.c.todoId == other.id)
    blocked = exists().where(
        and_(
            other.conversationId == bindparam("conversation"),
            other.turnId == bindparam("turn"),
            or_(
                # A row started by its dependencies (not by its stage) holds no stage back.
                and_(
                    other.status == "in_progress",
                    other.priority != bindparam("stage"),
                    ~has_blockers,
                ),
                and_(other.status == "pending", other.priority < bindparam("stage")),
            ),
        )
    )
    return (
        update(TurnTodo)
        .where(
            TurnTodo.conversationId == bindparam("conversation"),
            TurnTodo.turnId == bindparam("turn"),
            TurnTodo.priority == bindparam("stage"),
            TurnTodo.status == "pending",
            ~_open_blocker_of(TurnTodo),
            ~blocked,
        )
        .values(status="in_progress", startedAt=bindparam("at"))
        .execution_options(synchronize_session=False)
    )


def _start_ready() -> Update:
    return (
        update(TurnTodo)
        .where(
            TurnTodo.id.in_(bindparam("ids", expanding=True)),
            TurnTodo.status == "pending",
            ~_open_blocker_of(TurnTodo),
        )
        .values(status="in_progress", startedAt=bindparam("at"))
        .execution_options(synchronize_session=False)
    )


# The lifecycle's statements, built once: SQLAlchemy then skips building them and computing
# their cache keys on every call (about a millisecond for the stage start, once per plan item).
_CLOSE_IF_OPEN = _close_if_open(completing=False)
_COMPLETE_IF_OPEN = _close_if_open(completing=True)
_START_STAGE_IF_IDLE = _start_stage_if_idle()
_START_READY = _start_ready()
_RECORD_CANCELLATION = _record_cancellation()


class TurnTodoRepository:
    """Create, read and update the rows of one turn's plan."""

    def __init__(self, session: AsyncSession) -> None:
        self._session = session

    async def create(self, scope: TurnScope, todo: NewTurnTodo) -> TurnTodo:
        """Insert one pending row."""
        (row,) = await self.create_batch(scope, [todo])
        return row

    async def create_batch(self, scope: TurnScope, todos: Sequence[NewTurnTodo]) -> list[TurnTodo]:
        """Insert pending rows in one flush. Their ``createdAt`` values rise by a microsecond in
        list order, so items that share a ``priority`` keep the order they were given in."""
        rows = [
            TurnTodo(
                id=str(uuid.uuid4()),
                conversationId=scope.conversation_id,
                turnId=scope.turn_id,
                title=todo.title,
                context=todo.context,
                completionCriteria=todo.completion_criteria,
                agentType=todo.agent_type,
                status="pending",
                priority=todo.priority,
                outcome=None,
                createdAt=utc_now_iso(offset_microseconds=index),
                startedAt=None,
                completedAt=None,
            )
            for index, todo in enumerate(todos)
        ]
        self._session.add_all(rows)
        await self._session.flush()
        return rows

    async def find_by_turn(
        self, scope: TurnScope, status: str | Iterable[str] | None = None
    ) -> list[TurnTodo]:
        """The turn's rows, by ``priority`` then ``createdAt``; ``status`` filters by one status or
        several, ``None`` returns every row."""
        statement = select(TurnTodo).where(
            TurnTodo.conversationId == scope.conversation_id, TurnTodo.turnId == scope.turn_id
        )
        if status is not None:
            statuses = [status] if isinstance(status, str) else list(status)
            statement = statement.where(TurnTodo.status.in_(statuses))
        statement = statement.order_by(TurnTodo.priority, TurnTodo.createdAt, TurnTodo.id)
        # Rows already loaded are refreshed: statements that bypass the ORM (closing, starting a
        # stage) may have changed them in this session.
        statement = statement.options(selectinload(TurnTodo.blockers))
        result = await self._session.scalars(statement.execution_options(populate_existing=True))
        return list(result)

    async def find_by_id(self, todo_id: str, scope: TurnScope | None = None) -> TurnTodo | None:
        """One row by id; with a scope, a row of another turn or conversation is not found."""
        row = await self._session.get(TurnTodo, todo_id, options=[selectinload(TurnTodo.blockers)])
        if row is None or scope is None:
            return row
        if row.conversationId != scope.conversation_id or row.turnId != scope.turn_id:
            return None
        return row

    async def update(self, todo_id: str, **updates: Any) -> TurnTodo | None:
        """Change the named fields of one row; unknown field names are a programming error."""
        unknown = set(updates) - UPDATABLE_FIELDS
        if unknown:
            raise ValueError(f"turn_todos has no updatable field(s): {sorted(unknown)}")
        row = await self._session.get(TurnTodo, todo_id)
        if row is None:
            return None
        for name, value in updates.items():
            setattr(row, name, value)
        await self._session.flush()
        return row

    async def close_if_open(
        self,
        todo_id: str,
        *,
        status: str,
        outcome: str,
        completed_at: str,
        refresh: bool = True,
        cancelled_by: str | None = None,
    ) -> bool:
        """Close a row only if it is still open, in one statement, so two concurrent closes
        cannot both succeed. A row completed without ever starting gets ``startedAt`` too.
        ``refresh=False`` leaves a loaded row as it was (the caller brings it in line).

        A cancel must say who cancelled (``cancelled_by``, one of ``CANCELLED_BY``): it is
        recorded with the close, in the same transaction, so a turn can tell the user's choice
        from a failure without reading the outcome's words."""
        if status == "cancelled" and cancelled_by not in CANCELLED_BY:
            raise ValueError(
                f"cancelling a row needs cancelled_by in {CANCELLED_BY}, got {cancelled_by!r}"
            )
        statement = _COMPLETE_IF_OPEN if status == "completed" else _CLOSE_IF_OPEN
        result = await self._execute_core(
            statement,
            {"todo_id": todo_id, "new_status": status, "new_outcome": outcome, "at": completed_at},
        )
        closed = bool(getattr(result, "rowcount", 0))
        if closed and status == "cancelled":
            await self._execute_core(
                _RECORD_CANCELLATION, {"todo_id": todo_id, "by": cancelled_by, "at": completed_at}
            )
        if refresh:
            await self.reload(todo_id)
        return closed

    async def start_stage_if_idle(self, scope: TurnScope, priority: int, *, started_at: str) -> int:
        """Start the pending rows at ``priority`` (one stage) only if no row of an earlier stage
        is open and no row of another stage is in progress, in one statement, so the rule holds
        even with concurrent writers. Returns how many rows it started."""
        result = await self._execute_core(
            _START_STAGE_IF_IDLE,
            {
                "conversation": scope.conversation_id,
                "turn": scope.turn_id,
                "stage": priority,
                "at": started_at,
            },
        )
        return int(getattr(result, "rowcount", 0) or 0)

    async def start_ready(self, todo_ids: Sequence[str], *, started_at: str) -> int:
        """Start the rows of ``todo_ids`` that are pending and whose blockers are all closed, in
        one statement, so a row never starts while a blocker is open even with concurrent
        writers. Returns how many rows it started."""
        if not todo_ids:
            return 0
        result = await self._execute_core(_START_READY, {"ids": list(todo_ids), "at": started_at})
        return int(getattr(result, "rowcount", 0) or 0)

    async def delete_open(self, scope: TurnScope) -> int:
        """Delete the turn's pending and in-progress rows (a plan replaced before any of it was
        worked); closed rows stay, and so does every ``blockedBy`` edge but those of the
        deleted rows."""
        open_ids = select(TurnTodo.id).where(
            TurnTodo.conversationId == scope.conversation_id,
            TurnTodo.turnId == scope.turn_id,
            TurnTodo.status.in_(OPEN_TODO_STATUSES),
        )
        await self._session.execute(
            delete(todo_dependencies)
            .where(
                todo_dependencies.c.todoId.in_(open_ids)
                | todo_dependencies.c.blockedById.in_(open_ids)
            )
            .execution_options(synchronize_session=False)
        )
        statement = (
            delete(TurnTodo)
            .where(
                TurnTodo.conversationId == scope.conversation_id,
                TurnTodo.turnId == scope.turn_id,
                TurnTodo.status.in_(OPEN_TODO_STATUSES),
            )
            .execution_options(synchronize_session=False)
        )
        result = await self._session.execute(statement)
        return int(getattr(result, "rowcount", 0) or 0)

    async def _execute_core(self, statement: Update | Insert, parameters: dict[str, Any]) -> Any:
        """A conditional UPDATE on the session's connection, as Core: it changes rows no
        loaded object is synced from (the caller reloads or marks them), and the ORM's bulk
        path costs more than the statement (two run per plan item)."""
        connection = await self._session.connection()
        return await connection.execute(statement, parameters)

    async def reload(self, todo_id: str) -> TurnTodo | None:
        """One row as the database has it now, bringing a row loaded in this session in line
        with statements that bypassed the ORM."""
        return await self._session.get(
            TurnTodo, todo_id, populate_existing=True, options=[selectinload(TurnTodo.blockers)]
        )

    async def count_by_status(self, scope: TurnScope) -> dict[str, int]:
        """How many rows of the turn are in each status (every status present, zero included)."""
        statement = (
            select(TurnTodo.status, func.count())
            .where(
                TurnTodo.conversationId == scope.conversation_id,
                TurnTodo.turnId == scope.turn_id,
            )
            .group_by(TurnTodo.status)
        )
        counts = dict.fromkeys(TODO_STATUSES, 0)
        for status, count in await self._session.execute(statement):
            counts[status] = count
        return counts

    async def max_priority(self, scope: TurnScope) -> int | None:
        """The largest priority in the turn, so appended items go after every existing one."""
        statement = select(func.max(TurnTodo.priority)).where(
            TurnTodo.conversationId == scope.conversation_id, TurnTodo.turnId == scope.turn_id
        )
        value = await self._session.scalar(statement)
        return None if value is None else int(value)
