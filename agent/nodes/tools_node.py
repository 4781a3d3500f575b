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
- Every other call runs and is recorded by the one record path both faces share
  (``agent.turn.record_call.run_and_record_call``: its result, ledger entry and evidence in one
  transaction; a tool that raises comes back as a recorded ``TOOL_ERROR``; operator faults
  logged); the free calls of one message share one batch writer, and each call's evidence
  entry goes to the state's ``evidenceLog``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, cast

from langchain_core.messages import AIMessage, ToolMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.config import get_config
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
from agent.context import ContextDefaults, run_settings
from agent.errors import ErrorCode, ToolFailure
from agent.tool_names import ASK_USER, PLAN_CHANGING_TOOLS
from agent.turn.approval import PLAN_TOOLS, awaiting_approval
from agent.turn.call_ledger import RecordBatch
from agent.turn.evidence import EvidenceEntry, folded_snapshot
from agent.turn.identity import call_record_id, issuing_message, refuse_a_reused_call_id
from agent.turn.lineage import identity_of
from agent.turn.ownership import refuse_another_users_conversation
from agent.turn.plan_card import plan_card, ui_todos
from agent.turn.plan_rows import TurnPlan
from agent.turn.progress import with_running_usage
from agent.turn.record_call import run_and_record_call
from agent.turn.rows_handoff import HANDED_ROWS, STEP_ROWS, HandedRows, StepRows, step_rows
from agent.turn.usage import turn_usage
from storage import Database
from storage.models import OPEN_TODO_STATUSES
from storage.repositories import TurnScope


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
    if isinstance(result, list):
        # A tool's list of results: ToolNode takes one at run time, though its wrappers are
        # typed for a single result.
        return cast(ToolResult, [*result, Command(update={"evidenceLog": [entry]})])
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
) -> SupervisorToolNode:
    """The ordered tools node, refusing calls made from an older point of the turn or to tools
    the run did not bind, and reporting operator faults to the log. ``defaults``: the graph's
    default settings (``build_graph(context=...)``)."""

    async def supervised(
        request: ToolCallRequest, execute: Execute, place: CallPlace
    ) -> ToolResult:
        return await _supervised(_with_settings(request, defaults), execute, place)

    async def _supervised(
        request: ToolCallRequest, execute: Execute, place: CallPlace
    ) -> ToolResult:
        scope, _ = _scope(request)
        call_id = request.tool_call.get("id") or ""
        issuer = issuing_message(request_messages(request), call_id)
        record_id = call_record_id(issuer.id if issuer else None, call_id)
        refuse_a_reused_call_id(issuer, request.tool_call)
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
        recorded = await run_and_record_call(
            database,
            request,
            execute,
            record_id=record_id,
            records_itself=records_itself,
            batch=_record_batch(database, place),
        )
        result = _with_evidence_entry(recorded.result, recorded.evidence, place)
        return await _with_plan_snapshot(database, request, issuer, result, place)

    return SupervisorToolNode(catalog.static_tools, inner=supervised, defaults=defaults)
