"""Exactly-once model answers: an answer that asks for tool calls is recorded before they run.

The tool ledger (``agent.turn.call_ledger``) keys a call's effect on its tool call id, and the model
makes those ids up. A run that resumes from a checkpoint older than an answer (its newest
checkpoints were lost: a crash under ``durability="async"`` or ``"exit"``, a LangGraph Server's
retry of a run whose worker died) would ask the model again, get new ids, and act twice. So
each answer with tool calls is recorded by its place in the turn (the turn's n-th model call)
before any of its calls runs, and a step this run takes again (``TurnClaim.retaken``) gets the
recorded answer back: the same calls, whose results the ledger then returns.

An answer is replayed only at the same point of the same history (as many messages as the
recorded call was shown); anywhere else the model is asked. Answers without tool calls change
nothing, and are not recorded.
"""

from __future__ import annotations

import json

from langchain_core.messages import AIMessage, messages_from_dict, messages_to_dict
from sqlalchemy.exc import SQLAlchemyError

from agent.errors import database_failure
from agent.turn.lineage import DeferredClaim
from storage import Database
from storage.repositories import ModelAnswerRepository, TurnScope, record_answer_alone


async def recorded_answer(
    database: Database, scope: TurnScope, call_index: int, history_length: int
) -> AIMessage | None:
    """The answer this turn's ``call_index``-th model call got, if it was recorded at the same
    point of the history."""
    try:
        async with database.session(readonly=True) as session:
            found = await ModelAnswerRepository(session).find(scope, call_index)
    except (SQLAlchemyError, OSError) as error:
        raise database_failure(error, "model answer record") from error
    if found is None or found.historyLength != history_length:
        return None
    return _message(found.message)


async def record_answer(
    database: Database,
    scope: TurnScope,
    call_index: int,
    history_length: int,
    answer: AIMessage,
    claim: DeferredClaim | None = None,
) -> AIMessage:
    """Record ``answer`` (one with tool calls) before its calls run, and return the answer to
    act on: this one, or the one another run of the same step recorded first. ``claim``: the
    step's claim, made with the record (``DeferredClaim``); when the step was taken meanwhile
    nothing is recorded (the caller drops the answer)."""
    if not answer.tool_calls or not scope.turn_id:
        return answer
    text = json.dumps(messages_to_dict([answer]))
    if claim is not None:
        if await claim.with_answer(call_index, history_length, text) or not claim.taken:
            return answer
        return await recorded_answer(database, scope, call_index, history_length) or answer
    try:
        if await record_answer_alone(
            database,
            scope,
            call_index=call_index,
            history_length=history_length,
            message=text,
        ):
            return answer
    except (SQLAlchemyError, OSError) as error:
        raise database_failure(error, "model answer record") from error
    earlier = await recorded_answer(database, scope, call_index, history_length)
    return earlier if earlier is not None else answer


def _message(text: str) -> AIMessage | None:
    messages = messages_from_dict(json.loads(text))
    message = messages[0] if messages else None
    return message if isinstance(message, AIMessage) else None
