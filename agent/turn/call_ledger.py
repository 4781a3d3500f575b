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
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import ToolMessage
from langgraph.types import Command
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncSession

from agent.errors import database_failure
from storage import Database
from storage.repositories import ToolCallKey, ToolResultRepository, record_alone


class CallAlreadyRecorded(Exception):
    """Another run of the same tool call recorded its result first; this run's change was
    rolled back with its record."""


@dataclass(frozen=True)
class RecordedResult:
    """What a recorded call returned: its message content and its extra state update."""

    tool_name: str
    content: str
    modified_tasks: list[dict[str, Any]] | None = None

    def as_tool_result(self, tool_call_id: str) -> ToolMessage | Command[Any]:
        """The result as the tools node returns it, exactly as the first run did."""
        message = ToolMessage(content=self.content, tool_call_id=tool_call_id, name=self.tool_name)
        if self.modified_tasks:
            return Command(update={"messages": [message], "modifiedTasks": self.modified_tasks})
        return message


async def record_result(
    session: AsyncSession,
    key: ToolCallKey,
    content: str,
    modified_tasks: list[dict[str, Any]] | None = None,
) -> None:
    """Record a call's result inside the caller's transaction (the one making the change)."""
    if not key.tool_call_id:
        return  # called outside a tool call (tests, scripts): nothing can replay it
    state_update = json.dumps({"modifiedTasks": modified_tasks}) if modified_tasks else None
    try:
        await ToolResultRepository(session).record(key, content, state_update)
    except IntegrityError as error:
        raise CallAlreadyRecorded(key.tool_call_id) from error


async def record_after_call(database: Database, key: ToolCallKey, content: str) -> None:
    """Record the result of a tool that keeps no record itself (an MCP or caller tool), right
    after it returned: not atomic with its effect, but a tools step re-run after a pause or a
    crash that came later replays it instead of calling again."""
    if not key.tool_call_id or not key.conversation_id:
        return
    try:
        async with database.session() as session:
            await record_result(session, key, content)
    except CallAlreadyRecorded:
        return
    except (SQLAlchemyError, OSError) as error:
        raise database_failure(error, "tool call record") from error


PendingRecord = tuple[ToolCallKey, str, "asyncio.Future[None]"]


@dataclass
class RecordBatch:
    """``record_after_call`` for the free calls of one message, which run side by side: each
    call still returns only once its record has committed, but calls that finish while a record
    is being written are written together in the next transaction (one per wave instead of one
    per call: a stage's message holds one call per row, and SQLite has one writer at a time)."""

    database: Database
    _pending: list[PendingRecord] = field(default_factory=list)
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def record(self, key: ToolCallKey, content: str) -> None:
        """Record the call's result; returns once it is committed (or was already recorded)."""
        if not key.tool_call_id or not key.conversation_id:
            return
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pending.append((key, content, done))
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
    """Write a batch of records in one statement (each record a transaction of its own) and
    resolve their futures; a record already there (another run of one of the calls) sends each
    back alone, as ``record_after_call``."""
    try:
        await record_alone(database, [(key, content, None) for key, content, _ in batch])
    except IntegrityError:
        for key, content, _ in batch:
            await record_after_call(database, key, content)
    except (SQLAlchemyError, OSError) as error:
        raise database_failure(error, "tool call record") from error
    for _, _, done in batch:
        if not done.done():
            done.set_result(None)


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


def _recorded(tool_name: str, content: str, state_update: str | None) -> RecordedResult:
    modified = None
    if state_update:
        value = json.loads(state_update).get("modifiedTasks")
        modified = value if isinstance(value, list) else None
    return RecordedResult(tool_name=tool_name, content=content, modified_tasks=modified)
