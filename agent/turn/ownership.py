"""A tool call, and a step of a turn, act only on a conversation their user owns.

The turn's first step claims the conversation for the acting user and refuses another user's
(``agent.turn.lineage``). Later steps read the conversation from graph state, though, and the
state of a paused turn can be edited by its thread's owner (``update_state`` on their own
thread, Studio's state editor) to name someone else's conversation before the turn resumes: the
task list of that conversation (seed 000) or its plan rows would then be read (shown to the
model, so to the user) and changed. So every tool call, and every step that reads the turn's
rows from the state's ids (``plan``, ``execute``, ``drain``, the middleware's hooks), checks the
owner again, against the same acting user (``agent.auth.acting_user``).

With no database read when the state names the run's own thread: the turn's first step
derived the conversation from that thread and claimed it for this user (or refused the turn),
and a run's thread is its own (the server's auth filters threads by owner). A conversation
named otherwise (an explicit ``conversation_id``) is read once per process and user: an owner,
once claimed, never changes, so a verdict that it is this user's is kept (``_OWNED``).
"""

from __future__ import annotations

from langchain_core.runnables import RunnableConfig
from sqlalchemy.exc import SQLAlchemyError

from agent.errors import ErrorCode, ToolFailure, database_failure
from storage import Database
from storage.ids import canonical_id
from storage.repositories import ConversationRepository

CALL_REFUSED = "this call was not run and nothing changed"
TURN_REFUSED = "this turn stopped here, and nothing of that conversation was read or changed"
"""What a refused call, or a refused step of a turn, says it did."""
OWNED_KEPT = 4_096
"""How many verdicts "this conversation is this user's" a process keeps (then starts over)."""
_OWNED: set[tuple[str, str, str]] = set()
"""``(database URL, conversation, user)`` found owned by that user: never read again."""


async def refuse_another_users_conversation(
    database: Database,
    conversation_id: str,
    user_id: str,
    config: RunnableConfig | None,
    *,
    refused: str = CALL_REFUSED,
) -> None:
    """Raise ``ToolFailure`` (``NOT_RUN``) when ``conversation_id`` belongs to a user other
    than ``user_id``; an unclaimed conversation (a Python caller's tools outside a turn) has
    nobody else to protect. ``config``: the run's, for its thread; ``refused``: what the
    message says was not done (a call's, or a turn's step: ``TURN_REFUSED``)."""
    thread_id = ((config or {}).get("configurable") or {}).get("thread_id")
    if not conversation_id or (
        thread_id and canonical_id(str(thread_id)) == canonical_id(conversation_id)
    ):
        return
    key = (database.url, canonical_id(conversation_id), user_id)
    if key in _OWNED:
        return
    try:
        async with database.session(readonly=True) as session:
            owner = await ConversationRepository(session).owner_of(conversation_id)
    except (SQLAlchemyError, OSError) as error:
        raise database_failure(error, "conversation") from error
    if owner is not None and owner != user_id:
        raise ToolFailure(
            ErrorCode.NOT_RUN,
            f"The conversation '{conversation_id}' belongs to another user; {refused}.",
            "Start a new conversation (another thread) for this work.",
        )
    if owner == user_id:
        if len(_OWNED) >= OWNED_KEPT:
            _OWNED.clear()
        _OWNED.add(key)
