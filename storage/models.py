"""ORM tables.

``turn_todos`` mirrors the DDL of seed 004 column for column (camelCase names, TEXT timestamps,
the CHECK on ``status`` and both named indexes), so tools written against that design read the
same rows. Timestamps are ISO-8601 UTC strings, as the seed stores them.

``conversations`` records who each conversation belongs to: the user who started it.

``turns`` holds one row per turn that has started: the message that opened it and, for a fork
(a Studio fork or replay from an older checkpoint), the turn its rows were copied from.

``turn_steps`` holds one row per graph step of a turn: which LangGraph task (and, on a LangGraph
Server, which run) claimed it. A step is claimed by inserting its row, so two runs from the same
checkpoint cannot both take it, and a run that lost its newest checkpoints (a crash under
``durability="async"``) finds the steps it already took under its own task or run.

``model_answers`` records each model answer that asked for tool calls, by its place in the turn,
before any of those calls runs: a run that resumes from a checkpoint older than the answer gets
the same answer (the same call ids) instead of asking again, so the tool ledger keeps every
action exactly-once.

``tool_results`` records the result of every tool call that changed something, in the same
transaction as the change, so a call replayed after a crash returns its result instead of acting
twice.

``turn_row_usage`` holds the LLM calls and tokens charged to each plan row (issue 29).
``todo_dependencies`` holds the ``blockedBy`` edges between rows of one turn's plan (issue 30):
a row waits until every row it names there is closed. A table of its own, so ``turn_todos``
keeps seed 004's DDL; ``create_all`` adds it to databases that already exist.
``todo_continuations`` links a row left open by an earlier turn to its copy in the turn that
continued the plan (``agent.turn.continuation``); every row read carries both ends of its links
(``continuedFrom``, ``continuedIn``) without a query of its own.
``todo_evidence`` holds, for each plan row, the tool calls made while it was in progress.
``todo_cancellations`` says who cancelled each cancelled row (``cancelledBy``: the user, the
agent, or the system), written by the code path that cancels, in its transaction: a turn whose
only cancellations are the user's choice still ends ``answered``, one the agent gave up on
does not (``agent.turn.outcome.turn_end_status``). A table of its own, read with every row like
the continuation links, so ``turn_todos`` keeps seed 004's DDL and ``create_all`` adds it to
databases that already exist.

``tasks`` holds the users' personal tasks (seeds 002/003) and ``tool_audit`` one row per call of a
personal-task tool. Their columns are snake_case because their seeds name them that way.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import (
    Boolean,
    CheckConstraint,
    Column,
    Index,
    Integer,
    MetaData,
    Table,
    Text,
    false,
    inspect,
    select,
    text,
)
from sqlalchemy.orm import (
    DeclarativeBase,
    LoaderCallableStatus,
    Mapped,
    column_property,
    foreign,
    mapped_column,
    relationship,
)

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_N_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

TODO_STATUSES = ("pending", "in_progress", "completed", "cancelled")
CANCELLED_BY = ("user", "agent", "system")
"""Who cancelled a row (``todo_cancellations.cancelledBy``): ``user``, the user's own choice
(a rejected plan, a ``planEdits`` cancel); ``agent``, the model or the harness acting for it,
because the item failed or could not be done; ``system``, the graph itself, for a reason that
is neither (a row continued in a later turn)."""
OPEN_TODO_STATUSES = ("pending", "in_progress")
CLOSED_TODO_STATUSES = ("completed", "cancelled")

AUDIT_STATUSES = ("success", "error")

SEED_FIELDS = (
    "id",
    "title",
    "context",
    "completionCriteria",
    "agentType",
    "status",
    "priority",
    "outcome",
    "createdAt",
    "startedAt",
    "completedAt",
)
"""The columns of a ``turn_todos`` row in seed 004's ``list_todo`` items, in their order."""


def utc_now_iso(offset_microseconds: int = 0) -> str:
    """Now (plus an optional offset), as the ISO-8601 UTC text every timestamp column stores."""
    moment = datetime.now(UTC) + timedelta(microseconds=offset_microseconds)
    return moment.isoformat(timespec="microseconds").replace("+00:00", "Z")


class Base(DeclarativeBase):
    """Declarative base whose constraints get predictable names (needed for migrations)."""

    metadata = MetaData(naming_convention=NAMING_CONVENTION)


todo_dependencies = Table(
    "todo_dependencies",
    Base.metadata,
    Column("todoId", Text, primary_key=True),
    Column("blockedById", Text, primary_key=True),
    Column("conversationId", Text, nullable=False),
    Column("turnId", Text, nullable=False),
    Index("idx_todo_dependencies_turn", "conversationId", "turnId"),
)
"""One edge per row and blocker: ``todoId`` waits for ``blockedById`` (a row of the same turn).
No foreign keys: SQLite does not enforce them by default and PostgreSQL would refuse the delete
of a replaced plan's open rows; the repository deletes a row's edges with it."""


def _loaded_value(row: object, name: str) -> Any:
    """Attribute ``name`` of ``row`` as loaded with it (or set by the write that made it), None
    when it was not: never a query (SQLAlchemy's public ``AttributeState.loaded_value``)."""
    value = inspect(row).attrs[name].loaded_value
    return None if value is LoaderCallableStatus.NO_VALUE else value


class TurnTodo(Base):
    """One item of the plan of one user turn. Rows are never deleted: status is the lifecycle."""

    __tablename__ = "turn_todos"
    __table_args__ = (
        CheckConstraint(
            "status IN ('pending', 'in_progress', 'completed', 'cancelled')", name="status"
        ),
        Index("idx_turn_todos_turn", "turnId", "status"),
        Index("idx_turn_todos_conversation", "conversationId", "turnId"),
    )

    # Seed 004 declares `id TEXT PRIMARY KEY` without NOT NULL; keep the DDL identical.
    id: Mapped[str] = mapped_column(Text, primary_key=True, nullable=True)
    conversationId: Mapped[str] = mapped_column(Text, nullable=False)
    turnId: Mapped[str] = mapped_column(Text, nullable=False)
    title: Mapped[str] = mapped_column(Text, nullable=False)
    context: Mapped[str] = mapped_column(Text, nullable=False, server_default=text("''"))
    completionCriteria: Mapped[str] = mapped_column(Text, nullable=False, server_default=text("''"))
    agentType: Mapped[str | None] = mapped_column(Text, nullable=True)
    status: Mapped[str] = mapped_column(Text, nullable=False, server_default=text("'pending'"))
    priority: Mapped[int] = mapped_column(Integer, nullable=False, server_default=text("0"))
    outcome: Mapped[str | None] = mapped_column(Text, nullable=True)
    createdAt: Mapped[str] = mapped_column(Text, nullable=False)
    startedAt: Mapped[str | None] = mapped_column(Text, nullable=True)
    completedAt: Mapped[str | None] = mapped_column(Text, nullable=True)

    blockers: Mapped[list[TurnTodo]] = relationship(
        secondary=todo_dependencies,
        primaryjoin=lambda: TurnTodo.id == foreign(todo_dependencies.c.todoId),
        secondaryjoin=lambda: TurnTodo.id == foreign(todo_dependencies.c.blockedById),
        order_by=lambda: (TurnTodo.priority, TurnTodo.createdAt, TurnTodo.id),
        viewonly=True,
        lazy="raise",
    )
    """The rows this one waits for (``blockedBy``, issue 30). Loaded with the turn's rows by
    ``TurnTodoRepository.find_by_turn`` (``lazy="raise"``: never a hidden query in async code)."""

    def loaded_blockers(self) -> list[TurnTodo] | None:
        """``blockers`` when they were loaded with the row, else None (never a query)."""
        blockers = _loaded_value(self, "blockers")
        return None if blockers is None else list(blockers)

    def canceller(self) -> str | None:
        """Who cancelled the row (``CANCELLED_BY``) as loaded with it or marked by the write
        that cancelled it; None when not known (never a query)."""
        value = _loaded_value(self, "cancelledBy")
        return value if isinstance(value, str) else None

    def to_dict(self) -> dict[str, object]:
        """The row in seed 004's output shape (``list_todo`` items), plus ``blockedBy`` (the
        ids it waits for), ``ready`` (every one of them closed) and, when some were cancelled,
        ``blockersCancelled``, so the model decides whether the row still makes sense."""
        snapshot = self._seed_dict()
        blockers = self.loaded_blockers()
        if blockers is not None:
            snapshot["blockedBy"] = [blocker.id for blocker in blockers]
            snapshot["ready"] = all(b.status in CLOSED_TODO_STATUSES for b in blockers)
            cancelled = [blocker.id for blocker in blockers if blocker.status == "cancelled"]
            if cancelled:
                snapshot["blockersCancelled"] = cancelled
        return snapshot

    def _seed_dict(self) -> dict[str, object]:
        snapshot: dict[str, object] = {name: getattr(self, name) for name in SEED_FIELDS}
        # Loaded with the row (``todo_continuations``); a row made in this session and not
        # read since has no link, and reading the attribute would go to the database.
        snapshot["continuedFrom"] = _loaded_value(self, "continuedFrom")
        snapshot["continuedIn"] = _loaded_value(self, "continuedIn")
        if snapshot["status"] == "cancelled":
            snapshot["cancelledBy"] = self.canceller()
        return snapshot


class TodoContinuation(Base):
    """A row an earlier turn left open (``oldRowId``, closed ``cancelled``) and its copy in the
    turn that continued the plan (``newRowId``). The primary key on the old row is what makes a
    continuation happen once: a row is copied at most one time, whatever retries."""

    __tablename__ = "todo_continuations"
    __table_args__ = (
        Index("idx_todo_continuations_new", "newRowId", unique=True),
        Index("idx_todo_continuations_turn", "conversationId", "toTurnId"),
    )

    oldRowId: Mapped[str] = mapped_column(Text, primary_key=True)
    newRowId: Mapped[str] = mapped_column(Text, nullable=False)
    conversationId: Mapped[str] = mapped_column(Text, nullable=False)
    fromTurnId: Mapped[str] = mapped_column(Text, nullable=False)
    toTurnId: Mapped[str] = mapped_column(Text, nullable=False)
    createdAt: Mapped[str] = mapped_column(Text, nullable=False)


class TodoCancellation(Base):
    """Who cancelled one row (``CANCELLED_BY``), recorded in the transaction that cancelled it.

    Why a column of its own rather than words in ``outcome``: the outcome is free text (the
    model's, or the user's reason), and whether a turn answered everything it was asked must
    not depend on parsing it."""

    __tablename__ = "todo_cancellations"
    __table_args__ = (
        CheckConstraint("\"cancelledBy\" IN ('user', 'agent', 'system')", name="cancelled_by"),
        Index("idx_todo_cancellations_turn", "conversationId", "turnId"),
    )

    todoId: Mapped[str] = mapped_column(Text, primary_key=True)
    conversationId: Mapped[str] = mapped_column(Text, nullable=False)
    turnId: Mapped[str] = mapped_column(Text, nullable=False)
    cancelledBy: Mapped[str] = mapped_column(Text, nullable=False)
    createdAt: Mapped[str] = mapped_column(Text, nullable=False)


TurnTodo.cancelledBy = column_property(
    select(TodoCancellation.cancelledBy)
    .where(TodoCancellation.todoId == TurnTodo.id)
    .correlate_except(TodoCancellation)
    .scalar_subquery()
)
"""Who cancelled the row (``CANCELLED_BY``), None for a row not cancelled, or cancelled before
this was recorded (counted as not the user's choice)."""


# Both ends of a row's continuation, read with the row (two indexed lookups); not columns of
# ``turn_todos``, whose DDL stays seed 004's.
TurnTodo.continuedFrom = column_property(
    select(TodoContinuation.oldRowId)
    .where(TodoContinuation.newRowId == TurnTodo.id)
    .correlate_except(TodoContinuation)
    .scalar_subquery()
)
TurnTodo.continuedIn = column_property(
    select(TodoContinuation.newRowId)
    .where(TodoContinuation.oldRowId == TurnTodo.id)
    .correlate_except(TodoContinuation)
    .scalar_subquery()
)


class Conversation(Base):
    """A conversation and its owner; another user naming it is refused."""

    __tablename__ = "conversations"

    conversationId: Mapped[str] = mapped_column(Text, primary_key=True)
    ownerUserId: Mapped[str] = mapped_column(Text, nullable=False)
    createdAt: Mapped[str] = mapped_column(Text, nullable=False)


class Turn(Base):
    """One user turn: the message that opened it and, for a fork, the turn it was copied from.

    ``step`` and ``taskId`` say where the turn started and which LangGraph task started it (1
    for a turn, the step a fork branched at for a fork); the steps taken since are rows of
    ``turn_steps``. A node that runs from a state whose step is behind the turn's is working from
    an older checkpoint: its own run resumed (the step's row names its task or run), or a fork.
    """

    __tablename__ = "turns"

    conversationId: Mapped[str] = mapped_column(Text, primary_key=True)
    turnId: Mapped[str] = mapped_column(Text, primary_key=True)
    messageId: Mapped[str] = mapped_column(Text, nullable=False, server_default=text("''"))
    step: Mapped[int] = mapped_column(Integer, nullable=False, server_default=text("0"))
    taskId: Mapped[str] = mapped_column(Text, nullable=False, server_default=text("''"))
    forkedFrom: Mapped[str | None] = mapped_column(Text, nullable=True)
    createdAt: Mapped[str] = mapped_column(Text, nullable=False)
    updatedAt: Mapped[str] = mapped_column(Text, nullable=False)


class TurnBranch(Base):
    """The turn before a turn on its thread's branch (``previousTurnId``; None for the first).

    Why: a thread forked in Studio (from a checkpoint inside a turn, or by editing an earlier
    message) has branches whose turns all belong to one conversation. Continuing a plan must
    copy the open rows of this branch's earlier turns only: another branch's rows are work the
    user did not ask for here, or the same work copied by a fork, and copying them would do it
    twice. A fork of a turn follows what that turn followed. A turn recorded before this table
    existed has no row and counts as on every branch.
    """

    __tablename__ = "turn_branches"

    conversationId: Mapped[str] = mapped_column(Text, primary_key=True)
    turnId: Mapped[str] = mapped_column(Text, primary_key=True)
    previousTurnId: Mapped[str | None] = mapped_column(Text, nullable=True)


class TurnStep(Base):
    """One claimed graph step of a turn: the step count only grows, one row per step.

    ``taskId`` is the LangGraph task that ran the step's node (the same when a node runs again
    from the same checkpoint), ``runId`` the LangGraph Server run (kept across the server's
    retries of a run; empty outside a server).
    """

    __tablename__ = "turn_steps"

    conversationId: Mapped[str] = mapped_column(Text, primary_key=True)
    turnId: Mapped[str] = mapped_column(Text, primary_key=True)
    step: Mapped[int] = mapped_column(Integer, primary_key=True)
    taskId: Mapped[str] = mapped_column(Text, nullable=False)
    runId: Mapped[str] = mapped_column(Text, nullable=False, server_default=text("''"))
    claimedAt: Mapped[str] = mapped_column(Text, nullable=False)


class ModelAnswer(Base):
    """A model answer with tool calls, recorded before its calls run, by its place in the turn.

    ``historyLength`` is how many messages the call was shown: a resumed run replays the answer
    only at the same point of the same history. ``message`` is the answer as LangChain's message
    dict (``messages_to_dict``), JSON.
    """

    __tablename__ = "model_answers"

    conversationId: Mapped[str] = mapped_column(Text, primary_key=True)
    turnId: Mapped[str] = mapped_column(Text, primary_key=True)
    callIndex: Mapped[int] = mapped_column(Integer, primary_key=True)
    historyLength: Mapped[int] = mapped_column(Integer, nullable=False)
    message: Mapped[str] = mapped_column(Text, nullable=False)
    createdAt: Mapped[str] = mapped_column(Text, nullable=False)


class ToolResult(Base):
    """The result of one state-changing tool call, keyed by its tool call id.

    Written in the transaction that made the change: if the row exists, the change happened and
    this is what the model was (or would have been) told. ``stateUpdate`` holds the graph state
    the call added besides its message (``modifiedTasks``), as JSON.
    """

    __tablename__ = "tool_results"
    __table_args__ = (Index("idx_tool_results_turn", "conversationId", "turnId"),)

    conversationId: Mapped[str] = mapped_column(Text, primary_key=True)
    toolCallId: Mapped[str] = mapped_column(Text, primary_key=True)
    turnId: Mapped[str] = mapped_column(Text, nullable=False)
    toolName: Mapped[str] = mapped_column(Text, nullable=False)
    content: Mapped[str] = mapped_column(Text, nullable=False)
    stateUpdate: Mapped[str | None] = mapped_column(Text, nullable=True)
    createdAt: Mapped[str] = mapped_column(Text, nullable=False)


class AskedQuestion(Base):
    """An ``ask_user`` question that was put to the user: the run paused on it.

    A new chat message is taken as the answer only to a question recorded here. An ``ask_user``
    call left without a result by a run that stopped before asking (a crash, a cancelled run) was
    never shown, so the user's next message starts a new turn instead of answering it.
    """

    __tablename__ = "asked_questions"

    conversationId: Mapped[str] = mapped_column(Text, primary_key=True)
    toolCallId: Mapped[str] = mapped_column(Text, primary_key=True)
    turnId: Mapped[str] = mapped_column(Text, nullable=False)
    askedAt: Mapped[str] = mapped_column(Text, nullable=False)


class Task(Base):
    """One personal task of one user.

    Deleting sets ``deleted_at`` instead of removing the row (seed 003's soft delete), so an
    accidental delete can be investigated and the audit trail keeps pointing at a real row. Every
    read of the repository filters deleted rows out.
    """

    __tablename__ = "tasks"
    __table_args__ = (Index("idx_tasks_user", "user_id", "deleted_at", "created_at"),)

    id: Mapped[str] = mapped_column(Text, primary_key=True)
    user_id: Mapped[str] = mapped_column(Text, nullable=False)
    title: Mapped[str] = mapped_column(Text, nullable=False)
    description: Mapped[str] = mapped_column(Text, nullable=False, server_default=text("''"))
    completed: Mapped[bool] = mapped_column(Boolean, nullable=False, server_default=false())
    created_at: Mapped[str] = mapped_column(Text, nullable=False)
    updated_at: Mapped[str] = mapped_column(Text, nullable=False)
    deleted_at: Mapped[str | None] = mapped_column(Text, nullable=True)

    def to_dict(self) -> dict[str, object]:
        """The task as the tools show it (seed 002's ``list_tasks`` item, plus ``updated_at``)."""
        return {
            "id": self.id,
            "title": self.title,
            "description": self.description,
            "completed": self.completed,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
        }


class ToolAuditEntry(Base):
    """One call of a personal-task tool, successful or not.

    ``arguments`` is the JSON the model sent (injected values such as the runtime excluded), so a
    forged ``user_id`` shows up here even though the tool ignored it. The integer key keeps the
    order calls were recorded in.
    """

    __tablename__ = "tool_audit"
    __table_args__ = (
        CheckConstraint("status IN ('success', 'error')", name="status"),
        Index("idx_tool_audit_user", "user_id", "id"),
        Index("idx_tool_audit_turn", "conversation_id", "turn_id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    tool_name: Mapped[str] = mapped_column(Text, nullable=False)
    arguments: Mapped[str] = mapped_column(Text, nullable=False)
    status: Mapped[str] = mapped_column(Text, nullable=False)
    error_code: Mapped[str | None] = mapped_column(Text, nullable=True)
    user_id: Mapped[str] = mapped_column(Text, nullable=False)
    conversation_id: Mapped[str] = mapped_column(Text, nullable=False)
    turn_id: Mapped[str] = mapped_column(Text, nullable=False)
    tool_call_id: Mapped[str] = mapped_column(Text, nullable=False)
    created_at: Mapped[str] = mapped_column(Text, nullable=False)


class TurnRowUsage(Base):
    """LLM usage charged to one plan row (issue 29 §5): the calls made while it was in progress,
    and its share of their tokens (a stage in progress together shares each call evenly).

    A table of our own, so ``turn_todos`` keeps seed 004's DDL. Written when the turn ends, from the
    figures the graph state kept (absolute values, so writing them twice changes nothing);
    ``estimated`` when any of those calls' usage came from characters, not from the server.
    """

    __tablename__ = "turn_row_usage"
    __table_args__ = (Index("idx_turn_row_usage_turn", "conversationId", "turnId"),)

    conversationId: Mapped[str] = mapped_column(Text, primary_key=True)
    todoId: Mapped[str] = mapped_column(Text, primary_key=True)
    turnId: Mapped[str] = mapped_column(Text, nullable=False)
    llmCalls: Mapped[int] = mapped_column(Integer, nullable=False, server_default=text("0"))
    promptTokens: Mapped[int] = mapped_column(Integer, nullable=False, server_default=text("0"))
    completionTokens: Mapped[int] = mapped_column(Integer, nullable=False, server_default=text("0"))
    estimated: Mapped[bool] = mapped_column(Boolean, nullable=False, server_default=false())
    updatedAt: Mapped[str] = mapped_column(Text, nullable=False)

    def to_dict(self) -> dict[str, object]:
        """The row's usage in the shape of ``values.todos[i].usage``, plus ``estimated``."""
        return {
            "llmCalls": self.llmCalls,
            "promptTokens": self.promptTokens,
            "completionTokens": self.completionTokens,
            "estimated": self.estimated,
        }


class TodoEvidence(Base):
    """One tool call made while a plan row was in progress: the row's evidence (issue 29).

    A call made while several rows were in progress (a stage) is evidence for each of them, one
    row here per plan row. ``toolCallId`` is the call's ledger id (``tool_results``), so a call
    run again after a crash is recorded once. ``arguments`` is the JSON the model sent;
    ``result`` the text the call returned, or its error envelope when ``isError``.
    """

    __tablename__ = "todo_evidence"
    __table_args__ = (
        Index("idx_todo_evidence_todo", "conversationId", "todoId"),
        Index("idx_todo_evidence_turn", "conversationId", "turnId"),
    )

    conversationId: Mapped[str] = mapped_column(Text, primary_key=True)
    toolCallId: Mapped[str] = mapped_column(Text, primary_key=True)
    todoId: Mapped[str] = mapped_column(Text, primary_key=True)
    turnId: Mapped[str] = mapped_column(Text, nullable=False)
    toolName: Mapped[str] = mapped_column(Text, nullable=False)
    arguments: Mapped[str] = mapped_column(Text, nullable=False)
    result: Mapped[str] = mapped_column(Text, nullable=False)
    isError: Mapped[bool] = mapped_column(Boolean, nullable=False, server_default=false())
    createdAt: Mapped[str] = mapped_column(Text, nullable=False)

    def to_dict(self) -> dict[str, object]:
        """The call as completion checks and the evidence query show it."""
        try:
            arguments = json.loads(self.arguments)
        except ValueError:
            arguments = self.arguments
        return {
            "tool": self.toolName,
            "args": arguments,
            "result": self.result,
            "isError": self.isError,
            "at": self.createdAt,
        }
