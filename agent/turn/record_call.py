"""The one record path: a tool call run once, its result, its ledger entry and its evidence
written together.

Both faces of turnplan call ``run_and_record_call`` for every call they run: the supervisor
graph's tools step (``agent.nodes.tools_node``, after its own replay check of the whole
message) and ``TurnPlanMiddleware``'s ``wrap_tool_call`` (``agent.middleware.tool_calls``,
through ``replay_or_run_call``). What is written, and in how many transactions:

- a free call (a caller's or an MCP tool, whose effect is not in this database) that returned:
  its result in the call ledger (``agent.turn.call_ledger``) and its evidence of the rows in
  progress (``agent.turn.evidence``), in one transaction, once it returned;
- a tool that records itself (the todo tools, the personal-task tools): its record, with the
  evidence it finds in its runtime's config, in the transaction of its change;
- a tool that raised: its ``TOOL_ERROR`` result in the ledger and as failed evidence, in one
  transaction (what it did before it raised is unknown: a resumed run must not run it again);
  ``Context.handle_tool_errors=False`` writes the failed evidence and raises again;
- a failed result (an error envelope, a ``ToolFailure`` the tool raised) or a read: its
  evidence alone, nothing to replay.

A crash between the tool's return and the write leaves neither the record nor the evidence;
a resumed run then runs the call again, as it never happened for the turn. Nothing here knows
graph nodes: the caller passes the call (``request``), how to run it (``execute``) and its
ledger id (``record_id``), and gets the result with its ``evidenceLog`` entry back.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any

from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.errors import GraphBubbleUp, is_invalid_resume
from langgraph.prebuilt import ToolRuntime
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from agent.context import ContextDefaults, run_settings
from agent.errors import (
    OPERATOR_FAULTS,
    ToolFailure,
    error_code_of,
    raised_failure,
    tool_error_content,
)
from agent.tool_names import TODO_TOOL_NAMES
from agent.turn.call_ledger import (
    CallAlreadyRecorded,
    RecordBatch,
    output_text,
    record_result,
    recorded_results,
    replayable,
    result_record,
)
from agent.turn.evidence import (
    CALL_EVIDENCE,
    EvidenceEntry,
    PendingEvidence,
    arguments_json,
    record_call,
    written_entry,
)
from storage import Database
from storage.models import utc_now_iso
from storage.repositories import TodoEvidenceRepository, ToolCallKey, TurnScope, record_in

logger = logging.getLogger("agent.tools")

ToolResult = ToolMessage | Command[Any]
"""What a tool call returns, as ``ToolNode``'s wrappers are typed; at run time a tool may also
return a list of them, which ``ToolNode`` takes too (``_failed``, ``replayable``)."""
Execute = Callable[[ToolCallRequest], Awaitable[ToolResult]]
"""What runs the tool of a call: a ``ToolNode`` wrapper's handler."""


@dataclass(frozen=True)
class RecordedRun:
    """What a call run through the record path returned (``result``), with its entry for the
    state's ``evidenceLog`` (None: no row in progress, a plan tool's call, or a replay)."""

    result: ToolResult
    evidence: EvidenceEntry | None = None


def call_scope(request: ToolCallRequest) -> TurnScope:
    """The conversation and turn of a call, from the state it runs in."""
    state = request.state
    values = state if isinstance(state, dict) else vars(state)
    return TurnScope(values.get("conversationId", ""), values.get("turnId", ""))


def _state_todos(request: ToolCallRequest) -> Any:
    state = request.state
    values = state if isinstance(state, dict) else vars(state)
    return values.get("todos")


def _error_message(request: ToolCallRequest, failure: ToolFailure) -> ToolMessage:
    return ToolMessage(
        content=tool_error_content(failure),
        tool_call_id=request.tool_call.get("id") or "",
        name=request.tool_call.get("name", "?"),
        status="error",
    )


def _handles_errors(
    request: ToolCallRequest, error: Exception, defaults: ContextDefaults | None
) -> bool:
    """Whether the tool's exception goes back to the model: the run's
    ``Context.handle_tool_errors`` (``agent.context.run_settings``), never for a resume value an
    interrupt refused, which the model cannot fix (the interrupt must be answered again, as
    ``ToolNode`` does)."""
    if is_invalid_resume(error):
        return False
    context = request.runtime.context if request.runtime is not None else None
    return run_settings(context, defaults).handle_tool_errors


def _carrying(request: ToolCallRequest, pending: PendingEvidence | None) -> ToolCallRequest:
    """The request whose runtime config carries the call's evidence (``CALL_EVIDENCE``), for a
    tool that records its own result with it (``agent.tools.audited``)."""
    runtime: ToolRuntime[Any, Any] | None = request.runtime
    if pending is None or runtime is None:
        return request
    config = runtime.config
    configurable = {**(config.get("configurable") or {}), CALL_EVIDENCE: pending}
    carried: RunnableConfig = {**config, "configurable": configurable}
    return replace(request, runtime=replace(runtime, config=carried))


async def _record_raised(
    database: Database, key: ToolCallKey, message: ToolMessage, pending: PendingEvidence | None
) -> EvidenceEntry | None:
    """A raised call's error result in the ledger and, when the call is evidence, as failed
    evidence of the rows in progress, in one transaction. Another run's record kept; a store
    that fails is logged: the model still hears of the error."""
    if not (key.conversation_id and key.turn_id and key.tool_call_id):
        return None
    record = result_record(key, message)
    scope = TurnScope(key.conversation_id, key.turn_id)
    try:
        async with database.session() as session:
            await record_in(session, record, None)
            if pending is None:
                return None
            todo_ids = await TodoEvidenceRepository(session).record_for_rows_in_progress(
                scope,
                call_id=key.tool_call_id,
                tool=key.tool_name,
                arguments=pending.arguments,
                result=record[1],
                is_error=True,
                at=utc_now_iso(),
            )
    except IntegrityError:  # another run of the call recorded it first
        return None
    except (SQLAlchemyError, OSError):
        logger.warning("the error of tool %s was not recorded", key.tool_name, exc_info=True)
        return None
    pending.written = True
    return {"todoIds": todo_ids, "tool": key.tool_name, "isError": True} if todo_ids else None


async def _tool_raised(
    database: Database,
    request: ToolCallRequest,
    key: ToolCallKey,
    error: Exception,
    pending: PendingEvidence | None,
    defaults: ContextDefaults | None,
) -> RecordedRun:
    """What a call whose tool raised returns: logged with the turn (an operator's concern),
    then its ``TOOL_ERROR`` result, recorded (``_record_raised``), or, when the run does not
    handle tool errors, the exception again, written first as the row's failed evidence."""
    logger.warning(
        "tool %s raised (conversation %s, turn %s)",
        key.tool_name,
        key.conversation_id,
        key.turn_id,
        exc_info=error,
    )
    if not _handles_errors(request, error, defaults):
        if pending is not None:
            scope = TurnScope(key.conversation_id, key.turn_id)
            arguments = request.tool_call.get("args") or {}
            failed = f"{type(error).__name__}: {error}"
            await record_call(
                database, scope, key.tool_call_id, key.tool_name, arguments, failed, is_error=True
            )
        raise error
    message = _error_message(request, raised_failure(key.tool_name, error))
    return RecordedRun(message, await _record_raised(database, key, message, pending))


async def _evidence_entry(
    database: Database,
    request: ToolCallRequest,
    key: ToolCallKey,
    result: ToolResult,
    pending: PendingEvidence | None,
    failed: bool,
) -> EvidenceEntry | None:
    """The call's ``evidenceLog`` entry: written with its record already (``record_result``),
    else written now on its own (a failure, a read); None for a call that is no evidence."""
    if pending is None:
        return None
    if pending.written and not failed:
        return written_entry(pending, key.tool_name, _state_todos(request))
    scope = TurnScope(key.conversation_id, key.turn_id)
    arguments = request.tool_call.get("args") or {}
    text = output_text(result)
    return await record_call(
        database, scope, key.tool_call_id, key.tool_name, arguments, text, is_error=failed
    )


def _failed(result: Any) -> bool:
    """Whether the call's result is an error: its message's status, that of a message of its
    ``Command``, or of any item of a list of them (a tool may return one, as ``ToolNode``
    allows)."""
    if isinstance(result, list):
        return any(_failed(item) for item in result)
    if isinstance(result, Command):
        update = result.update if isinstance(result.update, dict) else {}
        messages = update.get("messages") or []
        return any(isinstance(m, ToolMessage) and m.status == "error" for m in messages)
    return isinstance(result, ToolMessage) and result.status == "error"


def _log_operator_fault(key: ToolCallKey, result: ToolResult) -> None:
    """A failure that is not the model's doing (``OPERATOR_FAULTS``), logged with the turn."""
    if not (isinstance(result, ToolMessage) and result.status == "error"):
        return
    code = error_code_of(result.content)
    if code in OPERATOR_FAULTS:
        logger.warning(
            "tool %s failed with %s (conversation %s, turn %s): %s",
            key.tool_name,
            code,
            key.conversation_id,
            key.turn_id,
            result.content,
        )


async def run_and_record_call(
    database: Database,
    request: ToolCallRequest,
    execute: Execute,
    *,
    record_id: str,
    records_itself: bool = False,
    batch: RecordBatch | None = None,
    defaults: ContextDefaults | None = None,
) -> RecordedRun:
    """Run one tool call and record it exactly once (see the module docstring).

    ``request``: the call as ``ToolNode`` hands it to a wrapper (its state names the
    conversation and turn, ``conversationId``/``turnId``); ``execute``: what runs the tool;
    ``record_id``: the call's id in the ledger (``agent.turn.identity.call_record_id`` of the
    issuing message's id and the call id); ``records_itself``: the tool writes its record in
    the transaction of its change; ``batch``: the writer the free calls of one message share
    (``agent.turn.call_ledger.RecordBatch``; None: one of the call's own); ``defaults``: the
    settings a run's context overrides (``handle_tool_errors``). A call another run recorded
    first returns that record; a ``ToolFailure`` the tool raised is its error result."""
    scope = call_scope(request)
    name = request.tool_call.get("name", "?")
    key = ToolCallKey(scope.conversation_id, scope.turn_id, record_id, name)
    arguments = request.tool_call.get("args") or {}
    is_evidence = name not in TODO_TOOL_NAMES
    pending = PendingEvidence(record_id, arguments_json(arguments)) if is_evidence else None
    try:
        result = await execute(_carrying(request, pending))
    except (GraphBubbleUp, asyncio.CancelledError):
        raise
    except CallAlreadyRecorded:
        recorded = await recorded_results(database, scope.conversation_id, [record_id])
        return RecordedRun(recorded[record_id].as_tool_result(request.tool_call.get("id") or ""))
    except ToolFailure as failure:  # as ``ToolNode(handle_tool_errors=...)`` answers one
        result = _error_message(request, failure)
    except Exception as error:
        return await _tool_raised(database, request, key, error, pending, defaults)
    failed = _failed(result)
    if not failed and not records_itself and not isinstance(result, list) and replayable(result):
        await record_result(batch or RecordBatch(database), key, result, pending)
    entry = await _evidence_entry(database, request, key, result, pending, failed)
    _log_operator_fault(key, result)
    return RecordedRun(result, entry)


async def replay_or_run_call(
    database: Database,
    request: ToolCallRequest,
    execute: Execute,
    *,
    record_id: str,
    records_itself: bool = False,
    defaults: ContextDefaults | None = None,
) -> RecordedRun:
    """Exactly once for a caller that has not looked the call up (``TurnPlanMiddleware``): the
    recorded result of this call when a run recorded it already (nothing runs again), else
    ``run_and_record_call`` (same arguments)."""
    scope = call_scope(request)
    if scope.conversation_id and record_id:
        recorded = await recorded_results(database, scope.conversation_id, [record_id])
        if record_id in recorded:
            call_id = request.tool_call.get("id") or ""
            return RecordedRun(recorded[record_id].as_tool_result(call_id))
    return await run_and_record_call(
        database,
        request,
        execute,
        record_id=record_id,
        records_itself=records_itself,
        defaults=defaults,
    )
