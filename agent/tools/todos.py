"""The turn-todo tools of seed 004: ``create_todo``, ``list_todo``, ``complete_todo``.

The database is bound by closure (it is process-wide); the conversation and turn come from graph
state through the injected ``ToolRuntime``, so they are absent from the schema the model sees and
anything the model sends for them is ignored. Outputs use seed 004's camelCase field names.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Literal

from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool, tool
from langgraph.types import Command

from agent.calls.completion import CompletionCheck, RowJudge
from agent.errors import ToolFailure, tool_error_content
from agent.tool_names import TODO_TOOL_NAMES
from agent.tools.runtime import (
    ToolRuntimeT,
    call_key,
    resolve_annotations,
    run_context,
    state_value,
    turn_scope,
)
from agent.turn.evidence import snapshot
from agent.turn.plan_rows import (
    PlanChange,
    PlanLimits,
    Receipt,
    TodoItemInput,
    TurnPlan,
    plan_limits,
)
from agent.turn.progress import emit_todo_events
from agent.turn.rows_handoff import step_rows
from prompts import Prompts
from storage import Database
from storage.models import OPEN_TODO_STATUSES, TODO_STATUSES, TurnTodo
from storage.repositories import TurnScope

ListFilter = Literal["pending", "in_progress", "completed", "cancelled", "all"]


def _step(row: TurnTodo | None) -> dict[str, Any] | None:
    """The part of a row the model needs to work on it."""
    if row is None:
        return None
    step = {
        "id": row.id,
        "title": row.title,
        "context": row.context,
        "completionCriteria": row.completionCriteria,
        "agentType": row.agentType,
    }
    # Empty fields are left out: the result stays in the history window of later calls.
    shown: dict[str, Any] = {name: value for name, value in step.items() if value}
    cancelled = _cancelled_blockers(row)
    if cancelled:
        shown["blockersCancelled"] = cancelled
    return shown


def _cancelled_blockers(row: TurnTodo) -> list[str]:
    """The ids of rows ``row`` waited for that were cancelled: the model decides whether the
    row still makes sense without them (issue 30)."""
    return [b.id for b in row.loaded_blockers() or () if b.status == "cancelled"]


def _dumps(payload: dict[str, Any]) -> str:
    """Compact JSON: a result is resent with every later call while it is in the window."""
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"))


def _brief(rows: list[TurnTodo]) -> list[dict[str, str]]:
    return [{"id": row.id, "title": row.title} for row in rows]


def _created(change: PlanChange) -> str:
    """``create_todo``'s result; ``stageSize`` says how many rows were started together when
    the first stage has several (``created`` already lists them, with their order)."""
    payload: dict[str, Any] = {
        "created": [
            {"id": row.id, "title": row.title, "order": row.priority + 1} for row in change.planned
        ],
        "totalPending": change.counts.remaining,
        "current": _step(change.current),
    }
    if len(change.in_progress) > 1:
        payload["stageSize"] = len(change.in_progress)
    return _dumps(payload)


def _closed(change: PlanChange) -> str:
    """``complete_todo``'s result: seed 004's fields but two, then ours.

    Left out are ``outcome``, the model's own argument echoed back (the plan view shows it, and
    real outcomes run to sentences), and ``completedAt``, which no model acts on; the row keeps
    both, and ``list_todo`` returns them. Every byte here is resent while the result is in the
    window, N times over when a stage of N rows is closed in one message. While the closed
    row's stage has open rows, ``stageOpen`` says how many (a count, not a list, for the same
    reason) and there is no ``next``; once it closes, ``next`` is the first row of the stage
    started now (``nextStage`` lists them all when there are several)."""
    closed = change.closed
    assert closed is not None  # close() always returns the row it closed
    stage_open = [row for row in change.in_progress if row.priority == closed.priority]
    # Once the stage is closed, the first row in progress is the first of the stage started now.
    following = None if stage_open else change.current
    payload: dict[str, Any] = {
        "id": closed.id,
        "title": closed.title,
        "status": closed.status,
        "remaining": change.counts.remaining,
    }
    if following is not None:
        payload["next"] = _step(following)
    if stage_open:
        payload["stageOpen"] = len(stage_open)
    if any(row.loaded_blockers() for row in change.started):
        # Rows freed by their blockers closing (issue 30): named, whatever their stage.
        payload["started"] = [_started(row) for row in change.started]
    elif len(change.started) > 1:
        payload["nextStage"] = _brief(change.started)
    return _dumps(payload)


def _started(row: TurnTodo) -> dict[str, Any]:
    """A row started now: its id and title, and the blockers of it that were cancelled."""
    brief: dict[str, Any] = {"id": row.id, "title": row.title}
    cancelled = _cancelled_blockers(row)
    if cancelled:
        brief["blockersCancelled"] = cancelled
    return brief


def _limits(runtime: ToolRuntimeT) -> PlanLimits:
    return plan_limits(run_context(runtime))


def _take_rows(runtime: ToolRuntimeT, scope: TurnScope) -> list[TurnTodo] | None:
    """The rows the step before, or the call before in this step, handed over in this run
    (``agent.turn.rows_handoff``, through the call's config). Every tool that writes rows takes
    them first, so no later call or step can take rows it has made stale."""
    carried = step_rows(runtime.config)
    if carried is None:
        return None
    step = int(state_value(runtime, "turnStep", 0) or 0)
    handed = carried.take(state_value(runtime, "todos"), scope, step)
    return None if handed is None else handed.rows


def _hand_rows(runtime: ToolRuntimeT, scope: TurnScope, change: PlanChange) -> None:
    """The rows this call's transaction left, for the next todo call or the next step."""
    carried = step_rows(runtime.config)
    if carried is not None:
        step = int(state_value(runtime, "turnStep", 0) or 0)
        carried.hand(state_value(runtime, "todos"), scope, step, change.rows)


def _with_verifier_usage(
    runtime: ToolRuntimeT,
    judge: RowJudge,
    content: str,
    status: Literal["success", "error"] = "success",
) -> Command[Any]:
    """``complete_todo``'s result with the verifier model's calls and tokens added to the
    turn's counters (``verifierCalls``, ``verifierTokens``)."""
    message = ToolMessage(
        content=content,
        tool_call_id=runtime.tool_call_id or "",
        name="complete_todo",
        status=status,
    )
    return Command(
        update={
            "messages": [message],
            "verifierCalls": judge.verifier_calls,
            "verifierTokens": judge.verifier_tokens,
        }
    )


MAX_OUTCOME_LENGTH = 10_000
"""The most characters a ``complete_todo`` outcome may have: the model's, or the compact
profile's own close (a listing's titles, up to 1,500 characters each); past it the row stays
open with ``VALIDATION_ERROR``."""


def build_todo_tools(
    database: Database,
    completion_checks: Mapping[str, CompletionCheck] | None = None,
    prompts: Prompts | None = None,
) -> list[BaseTool]:
    """The three turn-todo tools, reading and writing ``turn_todos`` in ``database``.
    ``completion_checks``: what a row must pass before ``complete_todo`` closes it as completed
    (``agent.calls.completion``); ``prompts``: the verifier model's prompt texts."""
    checks = dict(completion_checks or {})

    @tool
    async def create_todo(items: list[TodoItemInput], runtime: ToolRuntimeT) -> str:
        """Plan this turn's steps."""
        scope = turn_scope(runtime)
        known = _take_rows(runtime, scope)
        plan = TurnPlan(database, scope)
        receipt = Receipt(call_key(runtime, "create_todo"), _created)
        change = await plan.add_items(items, _limits(runtime), receipt, known_rows=known)
        _hand_rows(runtime, scope, change)
        emit_todo_events(runtime.stream_writer, "planned", change.planned)
        emit_todo_events(runtime.stream_writer, "started", change.started)
        return _created(change)

    @tool
    async def list_todo(runtime: ToolRuntimeT, status: ListFilter | None = None) -> str:
        """List the plan (default: open items); it is shown on every call."""
        plan = TurnPlan(database, turn_scope(runtime))
        if status is None:
            statuses: list[str] | None = list(OPEN_TODO_STATUSES)
        elif status == "all":
            statuses = None
        else:
            statuses = [status]
        rows, counts = await plan.rows(statuses)
        items = await snapshot(database, plan.scope, rows)
        return _dumps({"items": items, "summary": counts.summary()})

    @tool
    async def complete_todo(
        todoId: str,  # noqa: N803 - seed 004 names the argument todoId
        outcome: str,
        runtime: ToolRuntimeT,
        status: Literal["completed", "cancelled"] = "completed",
    ) -> str | Command[Any]:
        """Close a plan item: `outcome` says what was done, or why it is cancelled."""
        scope = turn_scope(runtime)
        known = _take_rows(runtime, scope)
        plan = TurnPlan(database, scope)
        receipt = Receipt(call_key(runtime, "complete_todo"), _closed)
        context = run_context(runtime)
        judge = RowJudge(checks, context, prompts) if checks or context.verifier_model else None
        try:
            change = await plan.close(
                todoId,
                outcome,
                status,
                receipt,
                known_rows=known,
                judge=judge,
                outcome_limit=MAX_OUTCOME_LENGTH,
            )
        except ToolFailure as failure:
            if judge is None or not judge.verifier_calls:
                raise
            # The refusal, with what the verifier model cost.
            return _with_verifier_usage(runtime, judge, tool_error_content(failure), status="error")
        _hand_rows(runtime, scope, change)
        assert change.closed is not None  # close() always returns the row it closed
        emit_todo_events(runtime.stream_writer, status, [change.closed])
        emit_todo_events(runtime.stream_writer, "started", change.started)
        if judge is not None and judge.verifier_calls:
            return _with_verifier_usage(runtime, judge, _closed(change))
        return _closed(change)

    tools: list[BaseTool] = [create_todo, list_todo, complete_todo]
    for todo_tool in tools:  # the docstrings' indentation would be sent on every call
        todo_tool.description = " ".join(todo_tool.description.split())
        resolve_annotations(todo_tool)
    return tools


__all__ = ["TODO_STATUSES", "TODO_TOOL_NAMES", "build_todo_tools"]
