"""Data access for ``todo_continuations``: rows an earlier turn left open, and the links between
them and their copies in the turn that continued them (``agent.turn.continuation``)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from storage.models import (
    OPEN_TODO_STATUSES,
    TodoContinuation,
    Turn,
    TurnBranch,
    TurnTodo,
    utc_now_iso,
)
from storage.repositories.turn_todos import TurnScope


@dataclass(frozen=True)
class Sibling:
    """A turn begun on the same checkpoint as another, and whether a turn follows it (its
    branch went on: it was not rolled back)."""

    turn_id: str
    followed: bool


class TodoContinuationRepository:
    """Find what earlier turns left open, and link a row to its copy."""

    def __init__(self, session: AsyncSession) -> None:
        self._session = session

    async def open_elsewhere(self, scope: TurnScope) -> list[TurnTodo]:
        """The pending and in-progress rows of the conversation's other turns on ``scope``'s
        branch of the thread (``TurnBranch``: another branch's rows are left alone), turn by
        turn (the turn whose first row is oldest first), each in its plan order."""
        rows = await self.open_in_other_turns(scope)
        elsewhere = await self.other_branches(scope)
        rows = [row for row in rows if row.turnId not in elsewhere]
        first_of: dict[str, str] = {}
        for row in rows:
            first_of[row.turnId] = min(first_of.get(row.turnId, row.createdAt), row.createdAt)
        return sorted(
            rows,
            key=lambda row: (first_of[row.turnId], row.turnId, row.priority, row.createdAt, row.id),
        )

    async def open_in_other_turns(self, scope: TurnScope) -> list[TurnTodo]:
        """The pending and in-progress rows of the conversation's other turns, on any branch of
        the thread (a rolled-back run's turn is on none: its checkpoints are gone)."""
        statement = (
            select(TurnTodo)
            .where(
                TurnTodo.conversationId == scope.conversation_id,
                TurnTodo.turnId != scope.turn_id,
                TurnTodo.status.in_(OPEN_TODO_STATUSES),
            )
            .execution_options(populate_existing=True)
        )
        return list(await self._session.scalars(statement))

    async def other_branches(self, scope: TurnScope) -> set[str]:
        """The conversation's turns recorded on a branch that ``scope``'s turn does not follow.
        Empty when the turn itself has no record (it began before branches were recorded)."""
        statement = select(TurnBranch.turnId, TurnBranch.previousTurnId).where(
            TurnBranch.conversationId == scope.conversation_id
        )
        previous = {turn: before for turn, before in await self._session.execute(statement)}
        if scope.turn_id not in previous:
            return set()
        followed: set[str] = set()
        turn = previous[scope.turn_id]
        while turn is not None and turn not in followed:
            followed.add(turn)
            turn = previous.get(turn)  # None past the first turn, or a turn with no record
        return set(previous) - followed - {scope.turn_id}

    async def siblings(self, scope: TurnScope) -> list[Sibling]:
        """The conversation's other turns that followed the same turn as ``scope``'s: turns
        begun on the same checkpoint before it (rolled back, or forked in Studio), oldest
        first, each saying whether a turn follows it. Empty when the turn has no record."""
        statement = select(TurnBranch.turnId, TurnBranch.previousTurnId).where(
            TurnBranch.conversationId == scope.conversation_id
        )
        previous = {turn: before for turn, before in await self._session.execute(statement)}
        if scope.turn_id not in previous:
            return []
        parent = previous[scope.turn_id]
        followed = set(previous.values())
        named = [turn for turn, before in previous.items() if before == parent]
        started = select(Turn.turnId, Turn.createdAt).where(
            Turn.conversationId == scope.conversation_id, Turn.turnId.in_(named)
        )
        begun = {turn: at for turn, at in await self._session.execute(started)}
        return [
            Sibling(turn, turn in followed)
            for turn in sorted(named, key=lambda turn: (begun.get(turn, ""), turn))
            if turn != scope.turn_id
        ]

    async def link(self, old: TurnTodo, new: TurnTodo) -> None:
        """Record that ``new`` continues ``old``; a second link of the same old row fails on
        the primary key (the caller's transaction rolls back)."""
        self._session.add(
            TodoContinuation(
                oldRowId=old.id,
                newRowId=new.id,
                conversationId=old.conversationId,
                fromTurnId=old.turnId,
                toTurnId=new.turnId,
                createdAt=utc_now_iso(),
            )
        )
        await self._session.flush()
