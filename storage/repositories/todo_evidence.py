"""Data access for ``todo_evidence``: the tool calls made while each plan row was in progress."""

from __future__ import annotations

from sqlalchemy import Boolean, Text, bindparam, exists, insert, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.sql.dml import ReturningInsert

from storage.models import TodoEvidence, TurnTodo
from storage.repositories.turn_todos import TurnScope


def _record_for_rows_in_progress() -> ReturningInsert[tuple[str]]:
    """One statement: a row of evidence for every row of the turn in progress now, unless this
    call is recorded for it already (a call run again after a crash). Reading the rows in the
    statement that writes makes "in progress" the database's answer at the moment the call
    returned, for a stage (several rows) as for one row."""
    recorded = exists().where(
        TodoEvidence.conversationId == bindparam("conversation"),
        TodoEvidence.toolCallId == bindparam("call"),
        TodoEvidence.todoId == TurnTodo.id,
    )
    rows = select(
        bindparam("conversation", type_=Text),
        bindparam("call", type_=Text),
        TurnTodo.id,
        bindparam("turn", type_=Text),
        bindparam("tool", type_=Text),
        bindparam("arguments", type_=Text),
        bindparam("result", type_=Text),
        bindparam("is_error", type_=Boolean),
        bindparam("at", type_=Text),
    ).where(
        TurnTodo.conversationId == bindparam("conversation"),
        TurnTodo.turnId == bindparam("turn"),
        TurnTodo.status == "in_progress",
        ~recorded,
    )
    columns = [
        "conversationId",
        "toolCallId",
        "todoId",
        "turnId",
        "toolName",
        "arguments",
        "result",
        "isError",
        "createdAt",
    ]
    return insert(TodoEvidence).from_select(columns, rows).returning(TodoEvidence.todoId)


# Built once: the statement runs after every domain tool call of a planned turn.
_RECORD_FOR_ROWS_IN_PROGRESS = _record_for_rows_in_progress()


class TodoEvidenceRepository:
    """Record a call against the rows in progress; read a row's evidence, or a turn's."""

    def __init__(self, session: AsyncSession) -> None:
        self._session = session

    async def record_for_rows_in_progress(
        self,
        scope: TurnScope,
        *,
        call_id: str,
        tool: str,
        arguments: str,
        result: str,
        is_error: bool,
        at: str,
    ) -> list[str]:
        """Record one call as evidence of every row of the turn in progress; returns the ids of
        the rows it was recorded for (none when it was recorded already)."""
        # Core on the session's connection: the ORM would take the parameters for a bulk
        # insert of objects, and nothing reads these rows back as objects.
        connection = await self._session.connection()
        found = await connection.execute(
            _RECORD_FOR_ROWS_IN_PROGRESS,
            {
                "conversation": scope.conversation_id,
                "turn": scope.turn_id,
                "call": call_id,
                "tool": tool,
                "arguments": arguments,
                "result": result,
                "is_error": is_error,
                "at": at,
            },
        )
        return [str(todo_id) for todo_id in found.scalars()]

    async def for_todo(self, conversation_id: str, todo_id: str) -> list[TodoEvidence]:
        """The calls made while the row was in progress, in the order they returned. Scoped by
        conversation: a row id alone never reaches another conversation's evidence."""
        statement = (
            select(TodoEvidence)
            .where(
                TodoEvidence.conversationId == conversation_id,
                TodoEvidence.todoId == todo_id,
            )
            .order_by(TodoEvidence.createdAt, TodoEvidence.toolCallId)
        )
        return list(await self._session.scalars(statement))

    async def for_turn(self, scope: TurnScope) -> list[TodoEvidence]:
        """Every row's evidence in one turn, in the order the calls returned."""
        statement = (
            select(TodoEvidence)
            .where(
                TodoEvidence.conversationId == scope.conversation_id,
                TodoEvidence.turnId == scope.turn_id,
            )
            .order_by(TodoEvidence.createdAt, TodoEvidence.toolCallId)
        )
        return list(await self._session.scalars(statement))
