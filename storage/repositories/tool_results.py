"""Data access for ``tool_results``: what each state-changing tool call returned."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from sqlalchemy import insert, select
from sqlalchemy.ext.asyncio import AsyncSession

from storage.models import ToolResult, utc_now_iso


@dataclass(frozen=True)
class ToolCallKey:
    """One tool call of one turn; the id is the model's, unique within a conversation."""

    conversation_id: str
    turn_id: str
    tool_call_id: str
    tool_name: str


_INSERT_RESULT = insert(ToolResult)


class ToolResultRepository:
    """Record results and look them up by tool call id, within one conversation."""

    def __init__(self, session: AsyncSession) -> None:
        self._session = session

    async def record(self, key: ToolCallKey, content: str, state_update: str | None) -> None:
        """Insert the call's result; a second record of the same call fails on the primary key,
        which rolls back the second run's change with it."""
        await self.record_many([(key, content, state_update)])

    async def record_many(self, results: Sequence[tuple[ToolCallKey, str, str | None]]) -> None:
        """Insert several calls' results (key, content, state update) in one statement; any of
        them recorded already fails it on the primary key."""
        now = utc_now_iso()
        rows = [
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
        # A Core INSERT on the session's connection: nothing reads these rows back as objects,
        # and the ORM's unit of work costs more than the statement (two records per plan item).
        connection = await self._session.connection()
        await connection.execute(_INSERT_RESULT, rows)

    async def find(self, conversation_id: str, tool_call_ids: Iterable[str]) -> list[ToolResult]:
        ids = [call_id for call_id in tool_call_ids if call_id]
        if not ids:
            return []
        statement = select(ToolResult).where(
            ToolResult.conversationId == conversation_id, ToolResult.toolCallId.in_(ids)
        )
        return list(await self._session.scalars(statement))
