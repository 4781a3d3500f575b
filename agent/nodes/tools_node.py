"""``tools``: the supervisor's tool calls, in the order written, never from a stale checkpoint.

- A run started from an older checkpoint of the turn (a fork or replay) must not change the
  original turn's rows: its tool calls are answered ``NOT_RUN`` and the next ``execute`` moves the
  run to a turn of its own (see ``agent.turn.lineage``).
- A call whose result is recorded (``agent.turn.call_ledger``) already happened, in a run that was
  interrupted after it: the record is returned and nothing runs twice.
- The message's last plan change (``create_todo``/``complete_todo``), done, failed or
  replayed, leaves the plan snapshot in the state (``todos``) with its result, from the rows
  the message's plan changes left: the checkpoint after the step, the one Studio shows before
  the next model call and a fork copies, holds the plan as it now is.
- Failures that are not the model's doing (``DATABASE_ERROR``, ``WORKER_ERROR``, a tool's bug)
  are logged at warning level with the conversation and turn, so an operator sees them even
  when the model carries on and answers.
- A tool that raises (a bug, or a caller's tool that failed) does not crash the run: its
  exception comes back to the model as a ``TOOL_ERROR`` result, recorded as evidence and in
  the call ledger, so the model can retry or cancel the item saying why; interrupts, and a
  resume value an interrupt refused, pass through. ``Context.handle_tool_errors=False`` keeps
  the re-raise.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.config import get_config
from langgraph.errors import GraphBubbleUp, is_invalid_resume
from langgraph.prebuilt import ToolRuntime
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command

from agent.auth import acting_user
from agent.calls.catalog import ToolCatalog
from agent.calls.gate import NOT_FRESH, MessageGate, is_fresh
from agent.calls.ordering import (
    CallPlace,
    Execute,
    OrderedToolNode,
    ToolResult,
    request_messages,
)
from agent.context import Context, ContextDefaults, run_settings
from agent.errors import (
    OPERATOR_FAULTS,
    ErrorCode,
    ToolFailure,
    error_code_of,
    raised_failure,
    tool_error_content,
)
from agent.tool_names import ASK_USER, PLAN_CHANGING_TOOLS, TODO_TOOL_NAMES
from agent.turn.approval import PLAN_TOOLS, awaiting_approval
from agent.turn.call_ledger import (
    CallAlreadyRecorded,
    RecordBatch,
    output_text,
    record_result,
    recorded_results,
)
from agent.turn.evidence import (
    CALL_EVIDENCE,
    EvidenceEntry,
    PendingEvidence,
    arguments_json,
    folded_snapshot,
    record_call,
    written_entry,
)
from agent.turn.identity import call_record_id, issuing_message
from agent.turn.lineage import identity_of
from agent.turn.ownership import refuse_another_users_conversation
from agent.turn.plan_card import plan_card, ui_todos
from agent.turn.plan_rows import TurnPlan
from agent.turn.progress import with_running_usage
from agent.turn.rows_handoff import HANDED_ROWS, STEP_ROWS, HandedRows, StepRows, step_rows
from agent.turn.usage import turn_usage
from prompts import Prompts, use_prompts
from storage import Database
from storage.models import OPEN_TODO_STATUSES
from storage.repositories import ToolCallKey, TurnScope

logger = logging.getLogger("agent.tools")


def _scope(request: ToolCallRequest) -> tuple[TurnScope, int]:
    state = request.state
    values = state if isinstance(state, dict) else vars(state)
    scope = TurnScope(values.get("conversationId", ""), values.get("turnId", ""))
    return scope, int(values.get("turnStep", 0))


async def _run_tool(request: ToolCallRequest, catalog: ToolCatalog) -> ToolCallRequest:
    """The request with the tool this run binds under the called name; a tool the run did not
    bind (another toolset's, or none at all) is refused, naming the ones it has."""
    name = request.tool_call.get("name", "")
    context = request.runtime.context if request.runtime is not None else None
    run_tools = await catalog.for_run(run_settings(context))
    if name not in run_tools.names:
        raise ToolFailure(
            ErrorCode.VALIDATION_ERROR,
            f"There is no tool {name!r} in this run.",
            f"Call one of: {', '.join(sorted(run_tools.names))}.",
        )
    if request.tool is None:
        tool = await catalog.mcp_tool(name)
        if tool is not None:
            return request.override(tool=tool)
    return request


async def _refuse_another_users_conversation(
    database: Database, request: ToolCallRequest, scope: TurnScope
) -> None:
    """The state of a paused turn may have been edited to name another user's conversation:
    a call on it is refused (``agent.turn.ownership``)."""
    runtime = request.runtime
    if runtime is not None:
        user = acting_user(run_settings(runtime.context).user_id, runtime.config)
        await refuse_another_users_conversation(
            database, scope.conversation_id, user, runtime.config
        )


def _refuse_before_approval(request: ToolCallRequest, issuer: AIMessage | None) -> None:
    """With ``approve_plan``, nothing but the plan tools runs until the user approves the plan
    (``agent.turn.approval``)."""
    state = request.state
    values = state if isinstance(state, dict) else vars(state)
    planning = issuer is not None and any(c["name"] == "create_todo" for c in issuer.tool_calls)
    open_todos = [
        todo for todo in values.get("todos") or [] if todo.get("status") in OPEN_TODO_STATUSES
    ]
    todos = open_todos or ([None] if planning else [])
    name = request.tool_call.get("name", "")
    asked, approved = bool(values.get("approvePlan")), bool(values.get("planApproved"))
    if name not in PLAN_TOOLS and awaiting_approval(asked, approved, todos):
        raise ToolFailure(
            ErrorCode.NOT_RUN,
            f"{name} was not run: the plan has not been approved by the user. Nothing changed.",
            "The turn pauses for the user's approval after this step; once the plan is "
            "approved, make this call again.",
        )


def _one_question_per_message(request: ToolCallRequest, issuer: AIMessage | None) -> None:
    """A second ``ask_user`` in one message is refused: the answer to the first could otherwise
    be taken for the second's when the user replies with a chat message."""
    call_id = request.tool_call.get("id")
    if request.tool_call.get("name") != ASK_USER or issuer is None:
        return
    first = next((call for call in issuer.tool_calls if call["name"] == ASK_USER), None)
    if first is not None and first["id"] != call_id:
        raise ToolFailure(
            ErrorCode.NOT_RUN,
            "Only one question is asked at a time; this one was not asked.",
            "Ask it again after the user has answered the first one.",
        )


async def _with_plan_snapshot(
    database: Database,
    request: ToolCallRequest,
    issuer: AIMessage | None,
    result: ToolResult,
    place: CallPlace,
) -> ToolResult:
    """The result of the message's last plan change, whatever became of it (done, failed,
    replayed from the ledger), with the plan snapshot as the message's plan changes left the
    rows; any other result as it is. The rows are the ones the last writing call handed over
    (``agent.turn.rows_handoff.StepRows``), else read: a replay or a failure hands nothing
    over."""
    if issuer is None or not isinstance(result, ToolMessage | Command):
        return result
    changes = [
        position
        for position, call in enumerate(issuer.tool_calls)
        if call["name"] in PLAN_CHANGING_TOOLS
    ]
    # By position, not id: a model may repeat an id, and one step takes one snapshot.
    if not changes or changes[-1] != place.position:
        return result
    state = request.state
    values = state if isinstance(state, dict) else vars(state)
    scope, step = _scope(request)
    carried = step_rows(request.runtime.config if request.runtime is not None else None)
    handed = carried.take(values.get("todos"), scope, step) if carried is not None else None
    if handed is not None:
        rows = handed.rows
    else:
        try:
            rows, _ = await TurnPlan(database, scope).rows()
        except ToolFailure:  # the store is down: ``execute`` reads and brings it up to date
            return result
    # The calls of this message written before this one have returned and logged their
    # evidence here; their own updates come before this one's, which empties the log.
    logged = [*(values.get("evidenceLog") or []), *place.memo.get(EVIDENCE_MEMO, [])]
    todos = ui_todos(folded_snapshot(rows, values.get("todos"), logged))
    card = plan_card(
        scope.turn_id, todos, values.get("messages") or [], llm_calls=values.get("llmCalls", 0)
    )
    if carried is not None:  # the next step finds them under the snapshot
        carried.hand(todos, scope, step, rows, shown=True)
    snapshot = {"todos": todos, "evidenceLog": [], **card}
    if isinstance(result, Command):  # complete_todo with the verifier model's usage
        update = result.update if isinstance(result.update, dict) else {}
        return Command(update={**update, **snapshot})
    return Command(update={"messages": [result], **snapshot})


def _with_evidence_entry(
    result: ToolResult, entry: EvidenceEntry | None, place: CallPlace
) -> ToolResult:
    """The call's result with its evidence entry added to the state's ``evidenceLog`` (and to
    the message's memo, for a plan snapshot later in the same message)."""
    if entry is None:
        return result
    place.memo.setdefault(EVIDENCE_MEMO, []).append(entry)
    if isinstance(result, Command):
        update = result.update if isinstance(result.update, dict) else {}
        return Command(update={**update, "evidenceLog": [entry]})
    return Command(update={"messages": [result], "evidenceLog": [entry]})


GATE_MEMO = "supervisor_call_gate"
EVIDENCE_MEMO = "supervisor_call_evidence"
RECORDS_MEMO = "supervisor_call_records"


def _message_gate(
    database: Database,
    request: ToolCallRequest,
    issuer: AIMessage | None,
    saved: BaseCheckpointSaver[Any] | None,
    place: CallPlace,
) -> MessageGate:
    """The gate shared by the calls of the issuing message in this run of the step (one read
    for all of them, ``agent.calls.gate``); a call without an issuer gets one of its own."""
    memo = place.memo if issuer is not None else {}
    gate = memo.get(GATE_MEMO)
    if not isinstance(gate, MessageGate):
        scope, step = _scope(request)
        state = request.state
        values = state if isinstance(state, dict) else vars(state)
        catch_up_to = int(values.get("catchUpTo") or 0)
        message_id = issuer.id if issuer is not None else None
        record_ids = frozenset(
            call_record_id(message_id, call.get("id") or "")
            for call in (issuer.tool_calls if issuer is not None else [])
        )
        fresh = issuer is not None and is_fresh(request.state, issuer, scope, step)
        identity = identity_of(get_config(), saved)
        gate = memo[GATE_MEMO] = MessageGate(
            database, scope, step, record_ids, fresh, catch_up_to, identity
        )
    return gate


def _record_batch(database: Database, place: CallPlace) -> RecordBatch:
    """The writer of the free calls' records of the running message (``agent.turn.call_ledger``)."""
    memo = place.memo
    batch = memo.get(RECORDS_MEMO)
    if not isinstance(batch, RecordBatch):
        batch = memo[RECORDS_MEMO] = RecordBatch(database)
    return batch


def _with_settings(request: ToolCallRequest, defaults: ContextDefaults | None) -> ToolCallRequest:
    """The request with turnplan's settings as its runtime's context, so every tool reads them
    there (``agent.context.run_settings``; inside a user's graph the context is the parent's),
    and a stream writer that adds the turn's running usage to plan events."""
    runtime: ToolRuntime[Any, Any] | None = request.runtime
    if runtime is None:
        return request
    settings = run_settings(runtime.context, defaults)
    # Plan events carry the turn's running usage (``agent.turn.progress.with_running_usage``).
    writer = with_running_usage(runtime.stream_writer, turn_usage(request.state))
    return replace(request, runtime=replace(runtime, context=settings, stream_writer=writer))


def _handles_errors(request: ToolCallRequest, error: Exception) -> bool:
    """Whether the tool's exception goes back to the model: ``Context.handle_tool_errors`` of
    the run (the request carries turnplan's settings as its runtime's context:
    ``_with_settings``), never for a resume value an interrupt refused, which the model cannot
    fix (the interrupt must be answered again, as ``ToolNode`` does)."""
    if is_invalid_resume(error):
        return False
    settings = request.runtime.context if request.runtime is not None else None
    return settings.handle_tool_errors if isinstance(settings, Context) else True


async def _raised_result(
    database: Database,
    request: ToolCallRequest,
    record_id: str,
    error: Exception,
    pending: PendingEvidence | None,
    place: CallPlace,
) -> tuple[ToolMessage, EvidenceEntry | None]:
    """A tool's exception as its error result (``TOOL_ERROR``), so the model can retry or
    cancel the item instead of the run crashing; recorded as evidence of the rows in progress
    (``isError``: ``pending`` is the call's evidence, None for a call that is none) and in the
    call ledger, since what the tool did before it raised is unknown and a resumed run must
    not run it again. A ledger that cannot be written is logged: the model still hears of it."""
    scope, _ = _scope(request)
    name = request.tool_call.get("name", "?")
    message = ToolMessage(
        content=tool_error_content(raised_failure(name, error)),
        tool_call_id=request.tool_call.get("id") or "",
        name=name,
        status="error",
    )
    entry = None
    if pending is not None:
        arguments = request.tool_call.get("args") or {}
        text = output_text(message)
        entry = await record_call(database, scope, record_id, name, arguments, text, is_error=True)
        pending.written = True  # written above as an error: the record must not add it again
    try:
        key = ToolCallKey(scope.conversation_id, scope.turn_id, record_id, name)
        await record_result(_record_batch(database, place), key, message, pending)
    except ToolFailure:
        logger.warning("the error of tool %s was not recorded in the call ledger", name)
    return message, entry


async def _tool_raised(
    database: Database,
    request: ToolCallRequest,
    record_id: str,
    error: Exception,
    pending: PendingEvidence | None,
    place: CallPlace,
) -> ToolResult:
    """What a call whose tool raised returns: logged with the turn (an operator's concern),
    then its ``TOOL_ERROR`` result (``_raised_result``), or, when the run does not handle tool
    errors, the exception again, recorded first as the row's failed evidence."""
    scope, _ = _scope(request)
    name = request.tool_call.get("name", "?")
    logger.warning(
        "tool %s raised (conversation %s, turn %s)",
        name,
        scope.conversation_id,
        scope.turn_id,
        exc_info=error,
    )
    if not _handles_errors(request, error):
        if pending is not None:
            arguments = request.tool_call.get("args") or {}
            failed = f"{type(error).__name__}: {error}"
            await record_call(database, scope, record_id, name, arguments, failed, is_error=True)
        raise error
    raised, entry = await _raised_result(database, request, record_id, error, pending, place)
    return _with_evidence_entry(raised, entry, place)


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


async def _evidence_entry(
    database: Database,
    request: ToolCallRequest,
    record_id: str,
    result: ToolResult,
    pending: PendingEvidence | None,
    failed: bool,
) -> EvidenceEntry | None:
    """The call's ``evidenceLog`` entry: written with its record already (``record_result``),
    else written now on its own (a failure, a read); None for a call that is no evidence."""
    if pending is None:
        return None
    name = request.tool_call.get("name", "?")
    if pending.written and not failed:
        state = request.state
        values = state if isinstance(state, dict) else vars(state)
        return written_entry(pending, name, values.get("todos"))
    scope, _ = _scope(request)
    arguments = request.tool_call.get("args") or {}
    text = output_text(result)
    return await record_call(database, scope, record_id, name, arguments, text, is_error=failed)


def _log_operator_fault(request: ToolCallRequest, result: ToolResult) -> None:
    """A failure that is not the model's doing (``OPERATOR_FAULTS``), logged with the turn."""
    if not (isinstance(result, ToolMessage) and result.status == "error"):
        return
    code = error_code_of(result.content)
    if code in OPERATOR_FAULTS:
        scope, _ = _scope(request)
        logger.warning(
            "tool %s failed with %s (conversation %s, turn %s): %s",
            request.tool_call.get("name", "?"),
            code,
            scope.conversation_id,
            scope.turn_id,
            result.content,
        )


async def run_and_record_call(
    database: Database,
    request: ToolCallRequest,
    execute: Execute,
    *,
    record_id: str,
    place: CallPlace | None = None,
    records_itself: bool = False,
) -> ToolResult:
    """Run one tool call and record it exactly once: the one path from a call to its record in
    the call ledger and its evidence of the rows in progress.

    ``request``: the call as ``ToolNode`` hands it to a wrapper (its state gives the
    conversation and turn, ``conversationId``/``turnId``); ``execute``: what runs the tool (the
    wrapper's handler); ``record_id``: the call's id in the ledger
    (``agent.turn.identity.call_record_id`` of the issuing message's id and the call id);
    ``place``: the call's place among its message's calls (``agent.calls.ordering.CallPlace``:
    the calls of one message share one batch writer), None for a call on its own;
    ``records_itself``: the tool writes its record in the transaction of its change (the todo
    tools, the personal-task tools), else it is recorded here once it returned.

    A call that is evidence (any tool but the plan tools) has its evidence written with its
    record in one transaction (``agent.turn.call_ledger.record_result``, handed the
    ``PendingEvidence`` explicitly; a tool that records itself finds it in its runtime's config),
    else on its own (a failure, a read: ``agent.turn.evidence.record_call``). A call recorded
    already by another run returns that record; a tool that raises returns its ``TOOL_ERROR``
    result, recorded (``Context.handle_tool_errors=False`` re-raises). The result carries the
    call's ``evidenceLog`` entry as a state update."""
    place = place or CallPlace({}, None)
    scope, _ = _scope(request)
    name = request.tool_call.get("name", "?")
    arguments = request.tool_call.get("args") or {}
    is_evidence = name not in TODO_TOOL_NAMES
    pending = PendingEvidence(record_id, arguments_json(arguments)) if is_evidence else None
    try:
        result = await execute(_carrying(request, pending))
    except (GraphBubbleUp, asyncio.CancelledError):
        raise
    except CallAlreadyRecorded:
        recorded = await recorded_results(database, scope.conversation_id, [record_id])
        return recorded[record_id].as_tool_result(request.tool_call.get("id") or "")
    except Exception as error:
        return await _tool_raised(database, request, record_id, error, pending, place)
    failed = isinstance(result, ToolMessage) and result.status == "error"
    if isinstance(result, ToolMessage) and not failed and not records_itself:
        key = ToolCallKey(scope.conversation_id, scope.turn_id, record_id, name)
        await record_result(_record_batch(database, place), key, result, pending)
    entry = await _evidence_entry(database, request, record_id, result, pending, failed)
    _log_operator_fault(request, result)
    return _with_evidence_entry(result, entry, place)


async def replay_or_run_call(
    database: Database,
    request: ToolCallRequest,
    execute: Execute,
    *,
    record_id: str,
    records_itself: bool = False,
) -> ToolResult:
    """Exactly once for a caller outside the supervisor's tools node (a ``create_agent``
    middleware's ``wrap_tool_call``): the recorded result of this call when a run recorded it
    already (nothing runs again), else ``run_and_record_call`` (same arguments)."""
    scope, _ = _scope(request)
    if scope.conversation_id and record_id:
        recorded = await recorded_results(database, scope.conversation_id, [record_id])
        if record_id in recorded:
            return recorded[record_id].as_tool_result(request.tool_call.get("id") or "")
    return await run_and_record_call(
        database, request, execute, record_id=record_id, records_itself=records_itself
    )


class SupervisorToolNode(OrderedToolNode):
    """The ordered tools node of the supervisor: each run carries the rows the step before
    handed over (``agent.turn.rows_handoff``) from call to call, and hands on what its calls
    leave; after it, no message is fresh (``agent.calls.gate``)."""

    def begin_step(self, input: Any) -> dict[str, Any]:
        handed = (
            input.get(HANDED_ROWS) if isinstance(input, dict) else getattr(input, HANDED_ROWS, None)
        )
        return {STEP_ROWS: StepRows(handed if isinstance(handed, HandedRows) else None)}

    def end_step(self, carried: Mapping[str, Any]) -> dict[str, Any]:
        rows = carried[STEP_ROWS]
        return {**rows.update(), **NOT_FRESH} if isinstance(rows, StepRows) else dict(NOT_FRESH)


def build_supervisor_tools_node(
    catalog: ToolCatalog,
    database: Database,
    saved: BaseCheckpointSaver[Any] | None = None,
    defaults: ContextDefaults | None = None,
    prompts: Prompts | None = None,
) -> SupervisorToolNode:
    """The ordered tools node, refusing calls made from an older point of the turn or to tools
    the run did not bind, and reporting operator faults to the log. ``defaults``: the graph's
    default settings (``build_graph(context=...)``); ``prompts``: its prompt texts, active
    while a call runs (a delegation's request, a worker's prompt)."""
    graph_prompts = prompts or Prompts.at()

    async def supervised(
        request: ToolCallRequest, execute: Execute, place: CallPlace
    ) -> ToolResult:
        with use_prompts(graph_prompts):
            return await _supervised(_with_settings(request, defaults), execute, place)

    async def _supervised(
        request: ToolCallRequest, execute: Execute, place: CallPlace
    ) -> ToolResult:
        scope, _ = _scope(request)
        call_id = request.tool_call.get("id") or ""
        issuer = issuing_message(request_messages(request), call_id)
        record_id = call_record_id(issuer.id if issuer else None, call_id)
        await _refuse_another_users_conversation(database, request, scope)
        if scope.conversation_id and scope.turn_id:
            gate = _message_gate(database, request, issuer, saved, place)
            replay = await gate.recorded(record_id)
            if replay is not None:
                replayed = replay.as_tool_result(call_id)
                return await _with_plan_snapshot(database, request, issuer, replayed, place)
        _refuse_before_approval(request, issuer)
        _one_question_per_message(request, issuer)
        request = await _run_tool(request, catalog)
        records_itself = catalog.records_itself(request.tool_call.get("name", ""))
        result = await run_and_record_call(
            database,
            request,
            execute,
            record_id=record_id,
            place=place,
            records_itself=records_itself,
        )
        return await _with_plan_snapshot(database, request, issuer, result, place)

    return SupervisorToolNode(catalog.static_tools, inner=supervised, defaults=defaults)
