"""A step of the supervisor graph goes on only with a conversation its user owns.

``plan``, ``execute`` and ``drain`` read the turn's rows by the state's conversation and turn
ids. A thread's owner can edit that state (Studio's state editor, ``update_state``) to name
another user's turn and resume: each of those nodes checks first (``agent.turn.ownership``; no
read when the state names the run's own thread), and the turn ends saying the conversation is
another user's, with nothing of it read or changed.
"""

from __future__ import annotations

from langgraph.config import get_config

from agent.auth import acting_user
from agent.context import Context
from agent.turn.ownership import TURN_REFUSED, refuse_another_users_conversation
from storage import Database


async def refuse_another_users_turn(
    database: Database, conversation_id: str, context: Context | None
) -> None:
    """Raise ``ToolFailure`` (``NOT_RUN``) when the state's ``conversation_id`` belongs to a
    user other than the one this run acts for."""
    config = get_config()
    user = acting_user((context or Context()).user_id, config)
    await refuse_another_users_conversation(
        database, conversation_id, user, config, refused=TURN_REFUSED
    )
