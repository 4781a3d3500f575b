"""The read a supervisor tool call makes before it runs: one transaction per AI message.

Two checks guard every call (see ``agent.nodes.tools_node``): the run must not come from an older
checkpoint than the turn has reached (``agent.turn.lineage``), and a call whose result is
recorded already happened (``agent.turn.call_ledger``). Both are reads of the same moment, so one
read transaction answers both, and it answers them for every call of the message at once: a
call's transactions are most of the framework's cost per plan item, and a stage's message holds
one call per row.

Reading once per message instead of once per call changes what each call can see only for
calls the same run makes in between, and those never record a result another call of the
message is looking for, except a call id the model repeats within one message: that one is
read again, on its own, when it runs.

A message the model step of this same run has just written needs no read at all: that step
claimed the turn's step in the database right before its model call, so the turn was at this
step, and nothing can have recorded a result for calls that did not exist until the model
answered. The model step says so in the state, under ``freshMessage`` (``fresh_message``), a
channel LangGraph never checkpoints, holding that very message object; the tools step that runs
its calls takes it once and clears it. A tools step run again (after a crash, a cancel, an
interrupt, or from a checkpoint in Studio) starts a new run from a checkpoint, finds nothing
there, and reads.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage
from sqlalchemy.exc import SQLAlchemyError

from agent.errors import database_failure
from agent.turn.call_ledger import RecordedResult, recorded_results_in
from agent.turn.lineage import RunIdentity, check_current
from storage import Database
from storage.repositories import TurnScope

FRESH_MESSAGE = "freshMessage"
"""The state key of the message a model step of this run just wrote (never checkpointed)."""


@dataclass(frozen=True, eq=False)
class FreshMessage:
    """``message`` was just written by the model step that had claimed ``step`` of ``scope``."""

    message: AIMessage
    scope: TurnScope
    step: int


NOT_FRESH: dict[str, Any] = {FRESH_MESSAGE: None}
"""The update of a step after which no message is fresh (the tools step, once it has run)."""


def fresh_message(message: AIMessage, scope: TurnScope, step: int | None) -> dict[str, Any]:
    """The state update of a model step that just wrote ``message`` at ``step`` it claimed in
    this run (None: it claimed none): the tools step that runs its calls next may skip the
    gate's read (module docstring)."""
    if step is None or not message.tool_calls:
        return NOT_FRESH
    return {FRESH_MESSAGE: FreshMessage(message, scope, step)}


def is_fresh(state: object, message: AIMessage, scope: TurnScope, step: int) -> bool:
    """Whether ``message`` is, as this very object, what the model step that claimed ``step`` of
    ``scope`` in this run just wrote."""
    fresh = (
        state.get(FRESH_MESSAGE) if isinstance(state, dict) else getattr(state, FRESH_MESSAGE, None)
    )
    return (
        isinstance(fresh, FreshMessage)
        and fresh.message is message
        and (fresh.scope, fresh.step) == (scope, step)
    )


async def recorded_if_current(
    database: Database,
    scope: TurnScope,
    step: int,
    record_ids: Sequence[str],
    catch_up_to: int = 0,
    identity: RunIdentity | None = None,
) -> dict[str, RecordedResult]:
    """The recorded results among these calls, by record id (a call that has not run is
    absent); ``NOT_RUN`` (a ``ToolFailure``) when the run started from an older checkpoint of
    the turn."""
    try:
        async with database.session(readonly=True) as session:
            await check_current(session, scope, step, catch_up_to, identity)
            return await recorded_results_in(session, scope.conversation_id, record_ids)
    except (SQLAlchemyError, OSError) as error:
        raise database_failure(error, "tool call record") from error


@dataclass
class MessageGate:
    """The gate of the calls of one AI message in one run of the tools step: the first call to
    ask reads for all of them; the others wait for that read and use it."""

    database: Database
    scope: TurnScope
    step: int
    record_ids: frozenset[str]
    """The record ids of the message's calls (``agent.turn.identity.call_record_id``)."""
    fresh: bool = False
    """The message was just written by this run's model step (``is_fresh``): nothing to read."""
    catch_up_to: int = 0
    """The state's ``catchUpTo``: the run is catching up with its own steps, not a fork."""
    identity: RunIdentity | None = None
    """The running run's identity: a turn ahead of the step by this run's own steps is no
    fork (``agent.turn.lineage.check_current``)."""
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    _recorded: dict[str, RecordedResult] | None = None
    _asked: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        if self.fresh:
            self._recorded = {}

    async def recorded(self, record_id: str) -> RecordedResult | None:
        """The call's recorded result, or None when it has not run; ``NOT_RUN`` when the run
        started from an older checkpoint of the turn. A failed read is not kept: the next call
        reads again."""
        if record_id in self._asked or record_id not in self.record_ids:
            # A repeated call id (the earlier call may have recorded since), or a call of
            # another message: read for it alone, now.
            alone = await recorded_if_current(
                self.database, self.scope, self.step, [record_id], self.catch_up_to, self.identity
            )
            return alone.get(record_id)
        self._asked.add(record_id)
        async with self._lock:
            if self._recorded is None:
                self._recorded = await recorded_if_current(
                    self.database,
                    self.scope,
                    self.step,
                    sorted(self.record_ids),
                    self.catch_up_to,
                    self.identity,
                )
        return self._recorded.get(record_id)
