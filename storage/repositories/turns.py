"""Data access for ``turns``: where each turn's graph has got to.

The step moves with one conditional UPDATE, so two runs that start from the same checkpoint (a
fork beside the original, or two forks) cannot both believe they continue the turn.
"""

from __future__ import annotations

from sqlalchemy import BindParameter, Update, and_, bindparam, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from storage.engine import Database
from storage.models import Conversation, Turn, utc_now_iso
from storage.repositories.turn_todos import TurnScope


def _advance_statement() -> Update:
    """The step claim's conditional UPDATE, built once: it runs twice per plan item, and
    building it costs more than running it (SQLAlchemy also keys its compiled form by a walk of
    the statement, which a statement object remembers)."""
    from_step: BindParameter[int] = bindparam("from_step")
    return (
        update(Turn)
        .where(
            Turn.conversationId == bindparam("conversation"),
            Turn.turnId == bindparam("turn"),
            or_(
                Turn.step == from_step,
                and_(Turn.step == from_step + 1, Turn.taskId == bindparam("task")),
            ),
        )
        .values(step=bindparam("to_step"), taskId=bindparam("task"), updatedAt=bindparam("at"))
    )


_ADVANCE = _advance_statement()


def _advance_parameters(scope: TurnScope, from_step: int, task_id: str) -> dict[str, object]:
    return {
        "conversation": scope.conversation_id,
        "turn": scope.turn_id,
        "from_step": from_step,
        "to_step": from_step + 1,
        "task": task_id,
        "at": utc_now_iso(),
    }


async def advance_alone(
    database: Database, scope: TurnScope, *, from_step: int, task_id: str
) -> bool:
    """``TurnRepository.advance`` as a transaction of its own (``Database.write_alone``): the
    whole of a plain step claim whose rows are already known."""
    return bool(
        await database.write_alone(_ADVANCE, _advance_parameters(scope, from_step, task_id))
    )


class ConversationRepository:
    """Who owns which conversation."""

    def __init__(self, session: AsyncSession) -> None:
        self._session = session

    async def owner_of(self, conversation_id: str) -> str | None:
        conversation = await self._session.get(Conversation, conversation_id)
        return None if conversation is None else conversation.ownerUserId

    async def claim(self, conversation_id: str, user_id: str) -> str:
        """The conversation's owner, making ``user_id`` the owner of a new conversation."""
        owner = await self.owner_of(conversation_id)
        if owner is not None:
            return owner
        self._session.add(
            Conversation(
                conversationId=conversation_id, ownerUserId=user_id, createdAt=utc_now_iso()
            )
        )
        await self._session.flush()
        return user_id


class TurnRepository:
    """Create turns and move their step forward."""

    def __init__(self, session: AsyncSession) -> None:
        self._session = session

    async def find(self, scope: TurnScope) -> Turn | None:
        return await self._session.get(Turn, (scope.conversation_id, scope.turn_id))

    async def create(
        self,
        scope: TurnScope,
        *,
        message_id: str,
        step: int,
        task_id: str,
        forked_from: str | None = None,
    ) -> Turn:
        now = utc_now_iso()
        turn = Turn(
            conversationId=scope.conversation_id,
            turnId=scope.turn_id,
            messageId=message_id,
            step=step,
            taskId=task_id,
            forkedFrom=forked_from,
            createdAt=now,
            updatedAt=now,
        )
        self._session.add(turn)
        await self._session.flush()
        return turn

    async def advance(self, scope: TurnScope, *, from_step: int, task_id: str) -> bool:
        """Move the turn from ``from_step`` to the next step for ``task_id``; also true when the
        same task already did so (it is running again after a crash or a cancel). False when the
        turn is elsewhere: the caller runs from an older checkpoint."""
        # A Core statement on the session's connection: no loaded ``Turn`` needs syncing, and
        # this runs twice per plan item, where the ORM's bulk-update path costs a third more.
        connection = await self._session.connection()
        result = await connection.execute(_ADVANCE, _advance_parameters(scope, from_step, task_id))
        return bool(result.rowcount)

    async def find_fork(self, scope: TurnScope, *, task_id: str, step: int) -> Turn | None:
        """The fork of ``scope`` that ``task_id`` made at ``step`` and that has not moved on: the
        same run of a node again (after a pause or a crash), which must not fork twice."""
        statement = select(Turn).where(
            Turn.conversationId == scope.conversation_id,
            Turn.forkedFrom == scope.turn_id,
            Turn.taskId == task_id,
            Turn.step == step,
        )
        return (await self._session.execute(statement)).scalars().first()

    async def step_of(self, scope: TurnScope) -> int | None:
        """The turn's step, or None for a turn that never started."""
        statement = select(Turn.step).where(
            Turn.conversationId == scope.conversation_id, Turn.turnId == scope.turn_id
        )
        value = (await (await self._session.connection()).execute(statement)).scalar()
        return None if value is None else int(value)
