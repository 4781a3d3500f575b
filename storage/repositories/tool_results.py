"""Data access for ``tool_results``: what each state-changing tool call returned (with the
call's evidence, ``todo_evidence``, written in the same transaction)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from sqlalchemy import insert, select
from sqlalchemy.ext.asyncio import AsyncSession

from storage.engine import Database
from storage.models import ToolResult, utc_now_iso
from storage.repositories.todo_evidence import TodoEvidenceRepository
from storage.repositories.turn_todos import TurnScope


@dataclass(frozen=True)
class ToolCallKey:
    """One tool call of one turn; the id is the model's, unique within a conversation."""

    conversation_id: str
    turn_id: str
    tool_call_id: str
    tool_name: str


_INSERT_RESULT = insert(ToolResult)

RecordedCall = tuple[ToolCallKey, str, str | None]
"""A call's key, its result's content and its extra state update (JSON), as recorded."""


def result_rows(results: Sequence[RecordedCall]) -> list[dict[str, str | None]]:
    """The ``tool_results`` rows of these records, as the insert takes them."""
    now = utc_now_iso()
    return [
        {
            "conversationId": key.conversation_id,
            "toolCallId": key.tool_call_id,
            "turnId": key.turn_id,
            "toolName": key.tool_name,
            "content": content,
            "stateUpdate": state_update,
            "createdAt": now,
        }
        for key, content, state_update in results
    ]


async def record_alone(database: Database, results: Sequence[RecordedCall]) -> None:
    """Record calls whose effect is not in the database (a caller's or an MCP tool's), each
    record a transaction of its own (``Database.write_alone``): nothing else has to commit with
    it. A call recorded already fails on the primary key; the records before it stay."""
    await database.write_alone(_INSERT_RESULT, result_rows(results))


class ToolResultRepository:
    """Record results and look them up by tool call id, within one conversation."""

    def __init__(self, session: AsyncSession) -> None:
        self._session = session

    async def record(self, key: ToolCallKey, content: str, state_update: str | None) -> None:
        """Insert the call's result; a second record of the same call fails on the primary key,
        which rolls back the second run's change with it."""
        # A Core INSERT on the session's connection: nothing reads the row back as an object,
        # and the ORM's unit of work costs more than the statement.
        connection = await self._session.connection()
        await connection.execute(_INSERT_RESULT, result_rows([(key, content, state_update)]))

    async def of_turn(self, scope: TurnScope) -> list[ToolResult]:
        """The turn's recorded calls, in the order they were recorded."""
        statement = (
            select(ToolResult)
            .where(
                ToolResult.conversationId == scope.conversation_id,
                ToolResult.turnId == scope.turn_id,
            )
            .order_by(ToolResult.createdAt, ToolResult.toolCallId)
        )
        return list(await self._session.scalars(statement))

    async def find(self, conversation_id: str, tool_call_ids: Iterable[str]) -> list[ToolResult]:
        ids = [call_id for call_id in tool_call_ids if call_id]
        if not ids:
            return []
        statement = select(ToolResult).where(
            ToolResult.conversationId == conversation_id, ToolResult.toolCallId.in_(ids)
        )
        return list(await self._session.scalars(statement))


async def record_with_evidence(
    database: Database, results: Sequence[RecordedCall], arguments: Sequence[str | None]
) -> None:
    """Record calls whose effect is not in the database, each with its evidence (``arguments``,
    the call's JSON, or None for none), all in one transaction: a record never commits without
    its evidence. A call recorded already fails on the primary key and rolls back the whole
    batch, evidence included (the caller then records each call alone)."""
    async with database.session() as session:
        for record, call_arguments in zip(results, arguments, strict=True):
            await record_in(session, record, call_arguments)


async def record_in(
    session: AsyncSession, record: RecordedCall, arguments: str | None
) -> list[str]:
    """Record one call in the caller's transaction, with its evidence unless ``arguments`` is
    None; the ids of the rows it is evidence for."""
    key, content, state_update = record
    await ToolResultRepository(session).record(key, content, state_update)
    if arguments is None:
        return []
    return await TodoEvidenceRepository(session).record_for_rows_in_progress(
        TurnScope(key.conversation_id, key.turn_id),
        call_id=key.tool_call_id,
        tool=key.tool_name,
        arguments=arguments,
        result=content,
        is_error=False,
        at=utc_now_iso(),
    )
