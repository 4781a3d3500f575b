"""A row's evidence: the tool calls made while it was in progress (issue 29 §1).

A row is closed because the model says so; its evidence is what the harness saw happen. The
supervisor's tools node records every call but the plan tools' own against the rows in progress
when it returned, so a stage's rows share the calls made while they were worked side by side. A
call recorded in the call ledger writes its evidence with that record, in the same transaction
(``agent.turn.call_ledger.record_result``, handed the call's ``PendingEvidence``): no extra cost
per item; a failed call or a read, which has no record, writes it alone (``record_call``). A tool
that records its own result (a personal-task tool) finds its call's ``PendingEvidence`` in its
runtime's config (``carried_evidence``), where the tools node put it for that call.
``list_todo`` and the state's ``todos`` show a short summary per row (``evidence``: how many
calls, how many failed, which tools); ``todo_evidence`` returns the whole list, which completion
checks are given (``agent.calls.completion``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.exc import SQLAlchemyError

from agent.errors import database_failure
from storage import Database
from storage.models import TodoEvidence, TurnTodo, utc_now_iso
from storage.repositories import TodoEvidenceRepository, TurnScope

logger = logging.getLogger("agent.tools")

EvidenceSummary = dict[str, Any]
"""``{"calls": n, "errors": k, "tools": [names in the order first called]}``."""


def empty_summary() -> EvidenceSummary:
    """The summary of a row no call was made for."""
    return {"calls": 0, "errors": 0, "tools": []}


def summarize(entries: Sequence[TodoEvidence]) -> dict[str, EvidenceSummary]:
    """The summary of each row that has evidence, by row id."""
    summaries: dict[str, EvidenceSummary] = {}
    for entry in entries:
        summary = summaries.setdefault(entry.todoId, empty_summary())
        summary["calls"] += 1
        summary["errors"] += int(entry.isError)
        if entry.toolName not in summary["tools"]:
            summary["tools"].append(entry.toolName)
    return summaries


def summarize_evidence(evidence: Sequence[Mapping[str, Any]]) -> EvidenceSummary:
    """The summary of one row's evidence as ``todo_evidence`` returns it."""
    summary = empty_summary()
    for entry in evidence:
        summary["calls"] += 1
        summary["errors"] += int(bool(entry.get("isError")))
        if entry.get("tool") not in summary["tools"]:
            summary["tools"].append(entry.get("tool"))
    return summary


def with_evidence(
    todos: Sequence[Mapping[str, Any]], summaries: Mapping[str, EvidenceSummary]
) -> list[dict[str, Any]]:
    """The row snapshots (``TurnTodo.to_dict()``) with their ``evidence`` summaries added."""
    return [
        {**todo, "evidence": summaries.get(str(todo.get("id")), empty_summary())} for todo in todos
    ]


async def turn_summaries(database: Database, scope: TurnScope) -> dict[str, EvidenceSummary]:
    """The evidence summary of every row of the turn that has any, by row id."""
    return summarize(await turn_evidence(database, scope))


async def turn_evidence(database: Database, scope: TurnScope) -> list[TodoEvidence]:
    """Every call recorded against a row of the turn, in the order the calls returned."""
    try:
        async with database.session(readonly=True) as session:
            return await TodoEvidenceRepository(session).for_turn(scope)
    except (SQLAlchemyError, OSError) as error:
        raise database_failure(error, "evidence") from error


async def todo_evidence(
    database: Database, conversation_id: str, todo_id: str
) -> list[dict[str, Any]]:
    """A row's whole evidence: each call as ``{"tool", "args", "result", "isError", "at"}``, in
    the order the calls returned (``result`` holds the error envelope of a failed call)."""
    try:
        async with database.session(readonly=True) as session:
            entries = await TodoEvidenceRepository(session).for_todo(conversation_id, todo_id)
    except (SQLAlchemyError, OSError) as error:
        raise database_failure(error, "evidence") from error
    return [entry.to_dict() for entry in entries]


EvidenceEntry = dict[str, Any]
"""One recorded call in the state's ``evidenceLog``: ``{"todoIds", "tool", "isError"}``."""


def arguments_json(arguments: Mapping[str, Any]) -> str:
    """The call's arguments as evidence keeps them."""
    return json.dumps(dict(arguments), ensure_ascii=False, sort_keys=True, default=str)


@dataclass
class PendingEvidence:
    """A running call's evidence, for ``record_result`` to write with the call's record (in the
    transaction of the call's change, or of its record): ``written`` once it was, with the ids
    of the rows it was written for when the write returned them."""

    call_id: str
    arguments: str
    written: bool = False
    todo_ids: list[str] | None = None


CALL_EVIDENCE = "turnplan_call_evidence"
"""The ``configurable`` key of a tool call's runtime config under which the tools node hands the
call's ``PendingEvidence`` to a tool that records its own result."""


def carried_evidence(config: Mapping[str, Any] | None, call_id: str) -> PendingEvidence | None:
    """The evidence a tool call's runtime config carries for the call ``call_id`` (its record
    id), if not written yet; None outside the supervisor's tools node or for a call that is no
    evidence (a plan tool's)."""
    pending = ((config or {}).get("configurable") or {}).get(CALL_EVIDENCE)
    if not isinstance(pending, PendingEvidence) or pending.written or pending.call_id != call_id:
        return None
    return pending


def rows_in_progress(todos: Sequence[Mapping[str, Any]] | None) -> list[str]:
    """The ids of the rows in progress in a snapshot (the state's ``todos``)."""
    return [str(todo.get("id")) for todo in todos or () if todo.get("status") == "in_progress"]


def written_entry(
    pending: PendingEvidence, tool: str, todos: Sequence[Mapping[str, Any]] | None
) -> EvidenceEntry | None:
    """The ``evidenceLog`` entry of evidence written with the call's record: for the rows the
    write returned, else (a free call's record, one statement that returns nothing) the rows
    in progress in the state's snapshot, which the write went by too."""
    todo_ids = pending.todo_ids if pending.todo_ids is not None else rows_in_progress(todos)
    if not todo_ids:
        return None
    return {"todoIds": todo_ids, "tool": tool, "isError": False}


async def record_call(
    database: Database,
    scope: TurnScope,
    call_id: str,
    tool: str,
    arguments: Mapping[str, Any],
    result: str,
    *,
    is_error: bool,
) -> EvidenceEntry | None:
    """Record a call that returned as evidence of the rows in progress, in a transaction of its
    own (a call with no record to write it with: a failure, a read); the entry for the
    state's ``evidenceLog``, or None when no row was in progress (or the call was recorded
    already). A store that fails here is logged, not raised: the call has happened, and its
    result must reach the model."""
    if not (scope.conversation_id and scope.turn_id and call_id):
        return None
    try:
        async with database.session() as session:
            todo_ids = await TodoEvidenceRepository(session).record_for_rows_in_progress(
                scope,
                call_id=call_id,
                tool=tool,
                arguments=arguments_json(arguments),
                result=result,
                is_error=is_error,
                at=utc_now_iso(),
            )
    except (SQLAlchemyError, OSError):
        logger.warning(
            "evidence of tool %s not recorded (conversation %s, turn %s)",
            tool,
            scope.conversation_id,
            scope.turn_id,
            exc_info=True,
        )
        return None
    if not todo_ids:
        return None
    return {"todoIds": todo_ids, "tool": tool, "isError": is_error}


def fold(
    previous: Sequence[Mapping[str, Any]] | None, entries: Sequence[EvidenceEntry] | None
) -> dict[str, EvidenceSummary]:
    """The summaries of the snapshot ``previous`` (the state's ``todos``) with the calls logged
    since (``entries``) added, by row id."""
    summaries: dict[str, EvidenceSummary] = {}
    for todo in previous or ():
        carried = todo.get("evidence")
        if isinstance(carried, Mapping):
            summaries[str(todo.get("id"))] = {
                "calls": int(carried.get("calls") or 0),
                "errors": int(carried.get("errors") or 0),
                "tools": list(carried.get("tools") or []),
            }
    for entry in entries or ():
        for todo_id in entry.get("todoIds") or ():
            summary = summaries.setdefault(str(todo_id), empty_summary())
            summary["calls"] += 1
            summary["errors"] += int(bool(entry.get("isError")))
            if entry.get("tool") not in summary["tools"]:
                summary["tools"].append(entry.get("tool"))
    return summaries


def folded_snapshot(
    rows: Sequence[TurnTodo],
    previous: Sequence[Mapping[str, Any]] | None,
    entries: Sequence[EvidenceEntry] | None,
) -> list[dict[str, Any]]:
    """The state's ``todos`` for these rows, their summaries folded from the snapshot before
    and the log since (no read); the caller empties ``evidenceLog`` in the same update."""
    return with_evidence([row.to_dict() for row in rows], fold(previous, entries))


async def snapshot(
    database: Database, scope: TurnScope, rows: Sequence[TurnTodo]
) -> list[dict[str, Any]]:
    """The state's ``todos`` for these rows: each in ``list_todo``'s shape with its evidence
    summary (no read when there are no rows)."""
    if not rows:
        return []
    summaries = await turn_summaries(database, scope)
    return with_evidence([row.to_dict() for row in rows], summaries)
