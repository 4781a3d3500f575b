"""Data access for ``turns`` and ``conversations``: which turns exist, which message opened
each, which turn a fork was copied from, and who owns a conversation. The steps a turn's runs
take are in ``turn_steps`` (``storage.repositories.turn_steps``)."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from storage.ids import canonical_id
from storage.models import Conversation, Turn, TurnBranch, utc_now_iso
from storage.repositories.turn_steps import TurnStepRepository
from storage.repositories.turn_todos import TurnScope


class ConversationRepository:
    """Who owns which conversation. Ids are looked up and stored in their canonical form
    (``storage.ids``), as the task files are named: a re-spelt id is the same conversation
    with the same owner, however it reached the check."""

    def __init__(self, session: AsyncSession) -> None:
        self._session = session

    async def owner_of(self, conversation_id: str) -> str | None:
        conversation = await self._session.get(Conversation, canonical_id(conversation_id))
        return None if conversation is None else conversation.ownerUserId

    async def claim(self, conversation_id: str, user_id: str) -> str:
        """The conversation's owner, making ``user_id`` the owner of a new conversation."""
        conversation_id = canonical_id(conversation_id)
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
    """Create turns (a turn's ``step`` is the step it started at: 1, or a fork's first) and
    find them."""

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

    async def record_branch(self, scope: TurnScope, previous_turn_id: str | None) -> None:
        """Record the turn before ``scope``'s on its thread's branch (``TurnBranch``)."""
        self._session.add(
            TurnBranch(
                conversationId=scope.conversation_id,
                turnId=scope.turn_id,
                previousTurnId=previous_turn_id,
            )
        )
        await self._session.flush()

    async def branch_of(self, scope: TurnScope) -> TurnBranch | None:
        """What ``record_branch`` recorded for the turn (None for a turn older than that)."""
        return await self._session.get(TurnBranch, (scope.conversation_id, scope.turn_id))

    async def find_fork(self, scope: TurnScope, *, task_id: str, step: int) -> Turn | None:
        """The fork of ``scope`` that ``task_id`` made at ``step``: the same run of a node again
        (after a pause or a crash), which must not fork twice."""
        statement = select(Turn).where(
            Turn.conversationId == scope.conversation_id,
            Turn.forkedFrom == scope.turn_id,
            Turn.taskId == task_id,
            Turn.step == step,
        )
        return (await self._session.execute(statement)).scalars().first()

    async def step_of(self, scope: TurnScope) -> int | None:
        """The turn's step (its highest claimed one), or None for a turn that never started."""
        latest = await TurnStepRepository(self._session).latest(scope)
        if latest is not None:
            return latest
        statement = select(Turn.step).where(
            Turn.conversationId == scope.conversation_id, Turn.turnId == scope.turn_id
        )
        value = (await (await self._session.connection()).execute(statement)).scalar()
        return None if value is None else int(value)
