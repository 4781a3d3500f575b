"""Data access for ``todo_dependencies``: the ``blockedBy`` edges of a turn's plan (issue 30).

Edges join rows of one turn; a row's edges are written in the transaction that creates it and
deleted with it, so no reader sees a row whose blockers are missing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from sqlalchemy import delete, insert, select
from sqlalchemy.ext.asyncio import AsyncSession

from storage.models import todo_dependencies
from storage.repositories.turn_todos import TurnScope


class TodoDependencyRepository:
    """Write and read the ``blockedBy`` edges between rows of one turn."""

    def __init__(self, session: AsyncSession) -> None:
        self._session = session

    async def add(self, scope: TurnScope, edges: Sequence[tuple[str, str]]) -> None:
        """Record that each ``(todo_id, blocked_by_id)`` row waits for the other."""
        if not edges:
            return
        await self._session.execute(
            insert(todo_dependencies),
            [
                {
                    "todoId": todo_id,
                    "blockedById": blocker_id,
                    "conversationId": scope.conversation_id,
                    "turnId": scope.turn_id,
                }
                for todo_id, blocker_id in edges
            ],
        )

    async def delete_for(self, todo_ids: Iterable[str]) -> None:
        """Delete the edges of rows that are being deleted (a replaced plan's open rows), both
        the ones they wait on and the ones that wait on them."""
        ids = list(todo_ids)
        if not ids:
            return
        await self._session.execute(
            delete(todo_dependencies).where(
                todo_dependencies.c.todoId.in_(ids) | todo_dependencies.c.blockedById.in_(ids)
            )
        )

    async def find_by_turn(self, scope: TurnScope) -> list[tuple[str, str]]:
        """The turn's edges as ``(todo_id, blocked_by_id)`` pairs."""
        statement = select(todo_dependencies.c.todoId, todo_dependencies.c.blockedById).where(
            todo_dependencies.c.conversationId == scope.conversation_id,
            todo_dependencies.c.turnId == scope.turn_id,
        )
        return [
            (todo_id, blocker_id) for todo_id, blocker_id in await self._session.execute(statement)
        ]


async def copy_dependencies(
    session: AsyncSession, scope: TurnScope, old_to_new: Mapping[str, str]
) -> int:
    """Copy the edges among the rows ``old_to_new`` names onto their copies in ``scope`` (a
    plan continued in a new turn): an edge is copied when both of its rows were copied; an edge
    to a row left behind (closed, so no longer blocking) is dropped. Returns how many were
    copied. The caller owns the transaction, as with every repository."""
    if not old_to_new:
        return 0
    statement = select(todo_dependencies.c.todoId, todo_dependencies.c.blockedById).where(
        todo_dependencies.c.todoId.in_(list(old_to_new))
    )
    edges = [
        (old_to_new[todo_id], old_to_new[blocker_id])
        for todo_id, blocker_id in await session.execute(statement)
        if blocker_id in old_to_new
    ]
    await TodoDependencyRepository(session).add(scope, edges)
    return len(edges)
