"""Exactly-once tool calls: a state-changing call records its result with its effect.

LangGraph resumes an interrupted run by running the whole interrupted node again (a process
killed in the tools step, a cancelled run). Tool calls that had already committed would act
twice. So every built-in tool that changes something writes its result to ``tool_results`` in the
same transaction as the change, and the tools node looks a call up before running it:

- recorded: the change happened; the recorded result is returned and nothing runs again;
- not recorded: the change did not happen (it rolled back with its record), so running it is
  safe. Two runs racing on one call both try to record it; the primary key lets one commit and
  rolls the other's change back (``CallAlreadyRecorded``), and that one returns the record.

A call left without a result in the thread (an orphan) is answered from the record too, so the
model is told what happened, not ``NOT_RUN``.

``record_result`` is the one way a result is recorded against its call's row, on every path: with
the change in its transaction (todo tools and stage closes, personal-task tools in the
supervisor and in workers), or right after the call for a tool whose effect is elsewhere.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import BaseMessage, ToolMessage
from langgraph.types import Command
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncSession

from agent.errors import database_failure, error_code_of
from agent.turn.evidence import PendingEvidence
from agent.turn.identity import message_text
from storage import Database
from storage.repositories import (
    ToolCallKey,
    ToolResultRepository,
    TurnScope,
    record_alone,
    record_in,
    record_with_evidence,
)
from storage.repositories.tool_results import RecordedCall


class CallAlreadyRecorded(Exception):
    """Another run of the same tool call recorded its result first; this run's change was
    rolled back with its record."""


@dataclass(frozen=True)
class RecordedResult:
    """What a recorded call returned: its message content and the rest of its ``Command``'s
    state update (None: the call returned a message)."""

    tool_name: str
    content: str
    state_update: dict[str, Any] | None = None

    def as_tool_result(self, tool_call_id: str) -> ToolMessage | Command[Any]:
        """The result as the tools node returns it, exactly as the first run did: an error
        envelope (a tool that raised, ``TOOL_ERROR``) with ``status="error"`` again, and a
        ``Command``'s state update with its message."""
        status = "error" if error_code_of(self.content) is not None else "success"
        message = ToolMessage(
            content=self.content, tool_call_id=tool_call_id, name=self.tool_name, status=status
        )
        if self.state_update:
            return Command(update={"messages": [message], **self.state_update})
        return message


ToolOutput = str | ToolMessage | Command[Any]
"""What a tool call returned, as recorded: its text, its message, or its ``Command`` (whose first
message is the result and whose other state update keys are replayed with it)."""


def output_text(output: ToolOutput | list[Any]) -> str:
    """The text a call returned: its message's, its ``Command``'s first message's, or that of
    the first item of a list of them that has one."""
    if isinstance(output, list):
        return next((text for item in output if (text := output_text(item))), "")
    if isinstance(output, Command):
        update = output.update if isinstance(output.update, dict) else {}
        messages = update.get("messages") or []
        first = messages[0] if messages else ""
        if isinstance(first, ToolMessage):
            return message_text(first)
        return str(first.content) if isinstance(first, BaseMessage) else str(first)
    if isinstance(output, ToolMessage):
        return message_text(output)
    return str(output)


def replayable(output: ToolOutput | list[Any]) -> bool:
    """Whether a call's result can be recorded and given back as it was on a replay: a message,
    or a ``Command`` that only updates state (no ``goto``, ``graph`` or ``resume``) with the
    call's one ``ToolMessage`` and values JSON can hold. Any other ``Command`` is not recorded
    (README, Limits): replaying half of it would say less than the call did; nor is a list of
    results (``ToolNode`` lets a tool return one)."""
    if isinstance(output, str | ToolMessage):
        return True
    if not isinstance(output, Command):
        return False
    if output.goto or output.graph is not None or output.resume is not None:
        return False
    update = output.update
    if not isinstance(update, dict):
        return False
    messages = update.get("messages")
    if not (isinstance(messages, list) and len(messages) == 1):
        return False
    if not isinstance(messages[0], ToolMessage):
        return False
    try:
        json.dumps(_rest_of(update))
    except (TypeError, ValueError):
        return False
    return True


def _rest_of(update: dict[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in update.items() if name != "messages"}


def result_record(key: ToolCallKey, output: ToolOutput) -> RecordedCall:
    """The ``tool_results`` row of a call's result: its message text and, for a ``Command``,
    the rest of its state update as JSON (``replayable`` says which can be recorded)."""
    rest: dict[str, Any] = {}
    if isinstance(output, Command) and isinstance(output.update, dict):
        rest = _rest_of(output.update)
    return key, output_text(output), json.dumps(rest) if rest else None


async def record_result(
    ledger: AsyncSession | RecordBatch,
    key: ToolCallKey,
    output: ToolOutput,
    evidence: PendingEvidence | None = None,
) -> None:
    """Record a tool call's result against its row in ``tool_results``: the one way every path
    records one (the todo tools and stage closes, ``agent.turn.plan_rows``; the personal-task
    tools of the supervisor and of its workers, ``agent.tools.audited``; any other tool, after
    it returned, ``agent.nodes.tools_node``). A call without an id (a tool run outside a tool
    call: tests, scripts) records nothing: nothing can replay it.

    ``ledger`` is where the record goes:

    - the session of the transaction that makes the call's change: the record commits with the
      change or not at all, and a second run of the same call fails on the primary key, which
      rolls its change back (``CallAlreadyRecorded``);
    - the ``RecordBatch`` of the running message, for a tool whose effect is not in this
      database (an MCP or caller tool): recorded right after it returned, in its own
      transaction; a record already there (another run of the call) is kept.

    ``evidence``: the call's evidence of the rows in progress (``agent.turn.evidence``; None: the
    call is none, a plan tool's, or it was written already), written with the record in the same
    transaction, so recording a call that changed something costs nothing more; ``written`` (and
    the rows it went to) is set on it once it is.
    """
    if not key.tool_call_id:
        return
    record = result_record(key, output)
    pending = evidence if evidence is not None and not evidence.written else None
    arguments = pending.arguments if pending is not None else None
    if isinstance(ledger, RecordBatch):
        await ledger.record(record, arguments)
        if pending is not None and key.conversation_id and key.turn_id:
            pending.written = True  # for the rows in progress (ids: the tools node's state)
        return
    try:
        todo_ids = await record_in(ledger, record, arguments)
    except IntegrityError as error:
        raise CallAlreadyRecorded(key.tool_call_id) from error
    if pending is not None:  # committed with the change, or the call fails and says so
        pending.written, pending.todo_ids = True, todo_ids


PendingRecord = tuple[RecordedCall, str | None, "asyncio.Future[None]"]
"""A record, its evidence's arguments (None: no evidence), and the future its call awaits."""


@dataclass
class RecordBatch:
    """Where the free calls of one message, which run side by side, record their results after
    they returned (``record_result``): each call still returns only once its record has
    committed, but calls that finish while a record is being written are written together in
    the next transaction (one per wave instead of one per call: a stage's message holds one
    call per row, and SQLite has one writer at a time)."""

    database: Database
    _pending: list[PendingRecord] = field(default_factory=list)
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def record(self, record: RecordedCall, arguments: str | None = None) -> None:
        """Write the record (``result_record``), with its call's evidence when ``arguments``
        (its JSON) is given; returns once it is committed (or was already there). A call
        outside a conversation records nothing."""
        if not record[0].conversation_id:
            return
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pending.append((record, arguments, done))
        async with self._lock:
            if not done.done():
                batch, self._pending = self._pending, []
                try:
                    await _record_batch(self.database, batch)
                except BaseException:
                    # This call's write failed or was cancelled: the others waiting behind the
                    # lock write their own records, as they would have alone.
                    self._pending[:0] = [item for item in batch if item[2] is not done]
                    raise
        await done


async def _record_batch(database: Database, batch: list[PendingRecord]) -> None:
    """Write a batch of records and resolve their futures: with evidence, all in one transaction
    (``record_with_evidence``); without, in one statement, each record a transaction of its own
    (``record_alone``). A record already there (another run of one of the calls) sends each
    back alone."""
    records = [record for record, _, _ in batch]
    arguments = [call_arguments for _, call_arguments, _ in batch]
    try:
        if any(call_arguments is not None for call_arguments in arguments):
            await record_with_evidence(database, records, arguments)
        else:
            await record_alone(database, records)
    except IntegrityError:
        for record, call_arguments, _ in batch:
            await _record_alone(database, record, call_arguments)
    except (SQLAlchemyError, OSError) as error:
        raise database_failure(error, "tool call record") from error
    for _, _, done in batch:
        if not done.done():
            done.set_result(None)


async def _record_alone(database: Database, record: RecordedCall, arguments: str | None) -> None:
    """One record (and its evidence) in a transaction of its own; one already there is kept,
    and the evidence written with it."""
    try:
        async with database.session() as session:
            await record_in(session, record, arguments)
    except IntegrityError:
        return
    except (SQLAlchemyError, OSError) as error:
        raise database_failure(error, "tool call record") from error


async def recorded_results(
    database: Database, conversation_id: str, tool_call_ids: Iterable[str]
) -> dict[str, RecordedResult]:
    """The recorded results of these calls in this conversation, by tool call id."""
    try:
        async with database.session(readonly=True) as session:
            return await recorded_results_in(session, conversation_id, tool_call_ids)
    except (SQLAlchemyError, OSError) as error:
        raise database_failure(error, "tool call record") from error


async def recorded_results_in(
    session: AsyncSession, conversation_id: str, tool_call_ids: Iterable[str]
) -> dict[str, RecordedResult]:
    """``recorded_results`` inside the caller's transaction."""
    found = await ToolResultRepository(session).find(conversation_id, tool_call_ids)
    return {row.toolCallId: _recorded(row.toolName, row.content, row.stateUpdate) for row in found}


async def turn_results_in(session: AsyncSession, scope: TurnScope) -> list[tuple[str, str]]:
    """Every recorded call of the turn as (tool name, result), in the caller's transaction:
    what stays done when a newer run stops the turn (``agent.turn.superseded``)."""
    rows = await ToolResultRepository(session).of_turn(scope)
    return [(row.toolName, row.content) for row in rows]


def _recorded(tool_name: str, content: str, state_update: str | None) -> RecordedResult:
    update = json.loads(state_update) if state_update else None
    return RecordedResult(
        tool_name=tool_name,
        content=content,
        state_update=update if isinstance(update, dict) and update else None,
    )
