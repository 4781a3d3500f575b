"""A tool call acts only on a conversation its user owns.

The turn's first step claims the conversation for the acting user and refuses another user's
(``agent.turn.lineage``). A tool call reads the conversation from graph state, though, and the
state of a paused turn can be edited by its thread's owner (``update_state`` on their own
thread) to name someone else's conversation before the turn resumes: the task list of that
conversation (seed 000) or its plan rows would then be read and changed. So every tool call
checks the owner again, against the same acting user (``agent.auth.acting_user``).

With no database read when the state names the run's own thread: the turn's first step
derived the conversation from that thread and claimed it for this user (or refused the turn),
and a run's thread is its own (the server's auth filters threads by owner). So only a turn on an
explicit ``conversation_id``, or a state edited to name another, costs a read per call.
"""

from __future__ import annotations

from langchain_core.runnables import RunnableConfig
from sqlalchemy.exc import SQLAlchemyError

from agent.errors import ErrorCode, ToolFailure, database_failure
from storage import Database
from storage.ids import canonical_id
from storage.repositories import ConversationRepository


async def refuse_another_users_conversation(
    database: Database, conversation_id: str, user_id: str, config: RunnableConfig | None
) -> None:
    """Raise ``ToolFailure`` (``NOT_RUN``) when ``conversation_id`` belongs to a user other
    than ``user_id``; an unclaimed conversation (a Python caller's tools outside a turn) has
    nobody else to protect. ``config``: the run's, for its thread."""
    thread_id = ((config or {}).get("configurable") or {}).get("thread_id")
    if not conversation_id or (
        thread_id and canonical_id(str(thread_id)) == canonical_id(conversation_id)
    ):
        return
    try:
        async with database.session(readonly=True) as session:
            owner = await ConversationRepository(session).owner_of(conversation_id)
    except (SQLAlchemyError, OSError) as error:
        raise database_failure(error, "conversation") from error
    if owner is not None and owner != user_id:
        raise ToolFailure(
            ErrorCode.NOT_RUN,
            f"The conversation '{conversation_id}' belongs to another user; this call was not "
            "run and nothing changed.",
            "Start a new conversation (another thread) for this work.",
        )
