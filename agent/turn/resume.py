"""A run that sends its turn's message again is the same turn resumed.

A LangGraph Server retries a run whose worker died by starting it over from its input, on the
newest checkpoint the thread saved: with the default ``durability="async"`` that checkpoint can
be older than the turn's rows. The ``plan`` node then sees:

- the turn's own message again (a client that gives its messages ids), on a state whose turn is
  still running: the turn goes on from where the checkpoint left it, catching up with the steps
  it already took (``agent.turn.lineage``);
- a copy of the message with a new id (a client that sends none: the server's input is applied
  again and LangGraph gives the copy a fresh id): the run's own turn, found by the server's run
  id in the steps it took. On a checkpoint inside that turn the copy is dropped and the turn goes
  on; on an older one the copy opens the turn again under its first id, and catches up.

The same holds for a Python caller who sends the same message again after a crash.
"""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableConfig
from sqlalchemy.exc import SQLAlchemyError

from agent.context import Context
from agent.errors import database_failure
from agent.state import SupervisorState
from agent.turn.identity import conversation_id_of
from agent.turn.lineage import RunIdentity
from storage import Database
from storage.repositories import TurnRepository, TurnScope, TurnStepRepository


async def resumed_turn_update(database: Database, state: SupervisorState) -> dict[str, Any]:
    """The ``plan`` update that lets the state's running turn go on: the routing after ``plan``
    takes it to the step it was at (its calls, else ``drain``), and the steps the turn took past
    this checkpoint are caught up with."""
    scope = TurnScope(state.conversationId, state.turnId)
    try:
        async with database.session(readonly=True) as session:
            latest = await TurnRepository(session).step_of(scope)
    except (SQLAlchemyError, OSError) as error:
        raise database_failure(error, "turn") from error
    return {"catchUpTo": latest if latest is not None and latest > state.turnStep else 0}


async def resumed_turn_of_run(
    database: Database,
    state: SupervisorState,
    identity: RunIdentity,
    context: Context,
    config: RunnableConfig,
) -> str | None:
    """The turn this LangGraph Server run already took steps of in this conversation: its input
    is being applied again (a retry); None outside a server or on a run's first attempt."""
    if not identity.run_id:
        return None
    conversation = conversation_id_of(context.conversation_id, config, state.conversationId)
    try:
        async with database.session(readonly=True) as session:
            return await TurnStepRepository(session).turn_of_run(conversation, identity.run_id)
    except (SQLAlchemyError, OSError) as error:
        raise database_failure(error, "turn") from error
