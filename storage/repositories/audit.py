"""Data access for ``tool_audit``: the record of every personal-task tool call."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from storage.models import AUDIT_STATUSES, ToolAuditEntry, utc_now_iso


@dataclass(frozen=True)
class CallOrigin:
    """Who made a tool call and where: all of it comes from the run, none from the model."""

    user_id: str
    conversation_id: str
    turn_id: str
    tool_call_id: str


class ToolAuditRepository:
    """Append audit rows and read them back."""

    def __init__(self, session: AsyncSession) -> None:
        self._session = session

    async def record(
        self,
        origin: CallOrigin,
        tool_name: str,
        arguments: Mapping[str, Any],
        *,
        status: str,
        error_code: str | None = None,
    ) -> ToolAuditEntry:
        """Append one row; ``arguments`` is stored as JSON (non-JSON values as their text)."""
        if status not in AUDIT_STATUSES:
            raise ValueError(f"audit status must be one of {AUDIT_STATUSES}, not {status!r}")
        entry = ToolAuditEntry(
            tool_name=tool_name,
            arguments=json.dumps(dict(arguments), ensure_ascii=False, sort_keys=True, default=str),
            status=status,
            error_code=error_code,
            user_id=origin.user_id,
            conversation_id=origin.conversation_id,
            turn_id=origin.turn_id,
            tool_call_id=origin.tool_call_id,
            created_at=utc_now_iso(),
        )
        self._session.add(entry)
        await self._session.flush()
        return entry

    async def for_user(self, user_id: str) -> list[ToolAuditEntry]:
        """The user's audit rows in the order they were recorded."""
        statement = (
            select(ToolAuditEntry)
            .where(ToolAuditEntry.user_id == user_id)
            .order_by(ToolAuditEntry.id)
        )
        return list(await self._session.scalars(statement))

    async def for_turn(self, conversation_id: str, turn_id: str) -> list[ToolAuditEntry]:
        """The rows of one turn in the order they were recorded."""
        statement = (
            select(ToolAuditEntry)
            .where(
                ToolAuditEntry.conversation_id == conversation_id,
                ToolAuditEntry.turn_id == turn_id,
            )
            .order_by(ToolAuditEntry.id)
        )
        return list(await self._session.scalars(statement))
