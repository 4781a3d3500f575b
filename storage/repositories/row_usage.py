"""Data access for ``turn_row_usage``: the LLM usage charged to each plan row.

The graph keeps the running figures in its state (checkpointed); when a turn ends it writes the
figures of every row calls were charged to, as absolute values in one statement (``INSERT ... ON
CONFLICT DO UPDATE``), so an end written twice (a resumed run) leaves the same rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Insert, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncSession

from storage.engine import Database
from storage.models import TurnRowUsage, utc_now_iso
from storage.repositories.turn_todos import TurnScope

_UPDATED = ("turnId", "llmCalls", "promptTokens", "completionTokens", "estimated", "updatedAt")


def _upsert(dialect: str, rows: Sequence[Mapping[str, Any]]) -> Insert:
    """One INSERT of every row's figures that replaces the figures a row has already (both
    dialects say it alike): one statement, one transaction, however many rows."""
    module = postgresql if dialect == "postgresql" else sqlite
    # On the table, not the mapped class: the ORM's bulk path would coerce every value of
    # every row again (about 150 calls per row at the end of each turn).
    statement = module.insert(TurnRowUsage.__table__).values(list(rows))
    upsert: Insert = statement.on_conflict_do_update(
        index_elements=["conversationId", "todoId"],
        set_={name: statement.excluded[name] for name in _UPDATED},
    )
    return upsert


async def save_row_usage_alone(
    database: Database,
    scope: TurnScope,
    usage: Mapping[str, Mapping[str, int]],
    *,
    estimated: bool,
) -> None:
    """Write the figures of the rows in ``usage`` (``{todoId: {"llmCalls", "promptTokens",
    "completionTokens"}}``) as one statement; nothing when it is empty."""
    if not usage:
        return
    now = utc_now_iso()
    rows = [
        {
            "conversationId": scope.conversation_id,
            "todoId": todo_id,
            "turnId": scope.turn_id,
            "llmCalls": figures["llmCalls"],
            "promptTokens": figures["promptTokens"],
            "completionTokens": figures["completionTokens"],
            "estimated": estimated,
            "updatedAt": now,
        }
        for todo_id, figures in usage.items()
    ]
    statement = _upsert("sqlite" if database.is_sqlite else "postgresql", rows)
    await database.write_alone(statement, {})


class RowUsageRepository:
    """Read the usage charged to a turn's rows."""

    def __init__(self, session: AsyncSession) -> None:
        self._session = session

    async def for_turn(self, scope: TurnScope) -> dict[str, TurnRowUsage]:
        """The turn's rows that had calls charged to them, by row id."""
        statement = select(TurnRowUsage).where(
            TurnRowUsage.conversationId == scope.conversation_id,
            TurnRowUsage.turnId == scope.turn_id,
        )
        found = (await self._session.scalars(statement)).all()
        return {usage.todoId: usage for usage in found}
