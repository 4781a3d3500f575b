"""Data access for ``turn_steps`` and ``model_answers``: the steps a turn's runs took, and the
model answers they acted on.

A step is claimed by inserting its row (``INSERT ... ON CONFLICT DO NOTHING``): the first run to
reach a step takes it, every other run learns who did. Steps are consecutive (each is claimed
from the one before), so a turn's step is its highest row, and the row of any earlier step says
which task and run took it: what tells a run that resumes its own turn from an older checkpoint
(a crash under ``durability="async"``, a server retry) from a fork started there.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import Insert, func, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncSession

from storage.engine import Database
from storage.models import ModelAnswer, TurnStep, utc_now_iso
from storage.repositories.turn_todos import TurnScope


def _insert_new(table: type[TurnStep] | type[ModelAnswer], dialect: str) -> Insert:
    """An INSERT that does nothing when the row's key is taken (both dialects say it alike)."""
    if dialect == "postgresql":
        return postgresql.insert(table).on_conflict_do_nothing()
    return sqlite.insert(table).on_conflict_do_nothing()


_CLAIMS = {name: _insert_new(TurnStep, name) for name in ("sqlite", "postgresql")}
_ANSWERS = {name: _insert_new(ModelAnswer, name) for name in ("sqlite", "postgresql")}


def _claim_row(scope: TurnScope, step: int, task_id: str, run_id: str) -> dict[str, Any]:
    return {
        "conversationId": scope.conversation_id,
        "turnId": scope.turn_id,
        "step": step,
        "taskId": task_id,
        "runId": run_id,
        "claimedAt": utc_now_iso(),
    }


async def claim_step_alone(
    database: Database, scope: TurnScope, *, step: int, task_id: str, run_id: str
) -> bool:
    """Claim ``step`` as a transaction of its own (``Database.write_alone``): true when this run
    took it, false when some run already had."""
    statement = _CLAIMS["sqlite" if database.is_sqlite else "postgresql"]
    return bool(await database.write_alone(statement, _claim_row(scope, step, task_id, run_id)))


class TurnStepRepository:
    """Claim a turn's steps and read who claimed them."""

    def __init__(self, session: AsyncSession) -> None:
        self._session = session

    async def claim(self, scope: TurnScope, *, step: int, task_id: str, run_id: str) -> bool:
        """Take ``step`` for this task and run; false when it was taken already."""
        connection = await self._session.connection()
        result = await connection.execute(
            _CLAIMS[connection.dialect.name], _claim_row(scope, step, task_id, run_id)
        )
        return bool(result.rowcount)

    async def claimer(self, scope: TurnScope, step: int) -> TurnStep | None:
        """Who took ``step`` of the turn, if anyone did."""
        return await self._session.get(TurnStep, (scope.conversation_id, scope.turn_id, step))

    async def last(self, scope: TurnScope) -> TurnStep | None:
        """The row of the turn's highest claimed step."""
        latest = await self.latest(scope)
        return None if latest is None else await self.claimer(scope, latest)

    async def latest(self, scope: TurnScope) -> int | None:
        """The turn's step: its highest claimed one (None before any)."""
        statement = select(func.max(TurnStep.step)).where(
            TurnStep.conversationId == scope.conversation_id, TurnStep.turnId == scope.turn_id
        )
        value = (await (await self._session.connection()).execute(statement)).scalar()
        return None if value is None else int(value)

    async def turn_of_run(self, conversation_id: str, run_id: str) -> str | None:
        """The turn of this conversation a server run last took a step of (None outside a
        server, or for a run that took none)."""
        if not run_id:
            return None
        statement = (
            select(TurnStep.turnId)
            .where(TurnStep.conversationId == conversation_id, TurnStep.runId == run_id)
            .order_by(TurnStep.claimedAt.desc(), TurnStep.step.desc())
            .limit(1)
        )
        return (await (await self._session.connection()).execute(statement)).scalar()


class ModelAnswerRepository:
    """Record model answers by their place in the turn, and find them again."""

    def __init__(self, session: AsyncSession) -> None:
        self._session = session

    async def find(self, scope: TurnScope, call_index: int) -> ModelAnswer | None:
        return await self._session.get(
            ModelAnswer, (scope.conversation_id, scope.turn_id, call_index)
        )


def _answer_row(
    scope: TurnScope, call_index: int, history_length: int, message: str
) -> Mapping[str, Any]:
    return {
        "conversationId": scope.conversation_id,
        "turnId": scope.turn_id,
        "callIndex": call_index,
        "historyLength": history_length,
        "message": message,
        "createdAt": utc_now_iso(),
    }


async def claim_step_with_answer(
    database: Database,
    scope: TurnScope,
    *,
    step: int,
    task_id: str,
    run_id: str,
    call_index: int,
    history_length: int,
    message: str,
) -> tuple[bool, bool]:
    """Claim ``step`` and record the answer of the model call made for it, as one transaction
    (``Database.write_chain``): whether this run took the step, and whether the answer was
    recorded. A step some run already had records nothing; a place of the turn that holds an
    answer already keeps it (the caller takes that one)."""
    dialect = "sqlite" if database.is_sqlite else "postgresql"
    claim = _claim_row(scope, step, task_id, run_id)
    answer = _answer_row(scope, call_index, history_length, message)
    changed = await database.write_chain([(_CLAIMS[dialect], claim), (_ANSWERS[dialect], answer)])
    return bool(changed[0]), len(changed) > 1 and bool(changed[1])


async def record_answer_alone(
    database: Database, scope: TurnScope, *, call_index: int, history_length: int, message: str
) -> bool:
    """Record an answer as a transaction of its own; false when that place of the turn already
    holds one (another run of the same step answered first: the caller takes that one)."""
    statement = _ANSWERS["sqlite" if database.is_sqlite else "postgresql"]
    row = _answer_row(scope, call_index, history_length, message)
    return bool(await database.write_alone(statement, row))
