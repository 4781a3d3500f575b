"""Data access for ``asked_questions``: the ``ask_user`` questions the user was shown."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession

from storage.models import AskedQuestion, utc_now_iso
from storage.repositories.tool_results import ToolCallKey


class AskedQuestionRepository:
    """Note that a question was asked, and look it up, by tool call, within one conversation."""

    def __init__(self, session: AsyncSession) -> None:
        self._session = session

    async def mark_asked(self, key: ToolCallKey) -> None:
        """Record the question once; asking it again (the run resumed with the answer runs the
        tool again) changes nothing."""
        if await self._session.get(AskedQuestion, (key.conversation_id, key.tool_call_id)):
            return
        self._session.add(
            AskedQuestion(
                conversationId=key.conversation_id,
                toolCallId=key.tool_call_id,
                turnId=key.turn_id,
                askedAt=utc_now_iso(),
            )
        )
        await self._session.flush()

    async def was_asked(self, conversation_id: str, tool_call_id: str) -> bool:
        found = await self._session.get(AskedQuestion, (conversation_id, tool_call_id))
        return found is not None
