"""Plan progress as custom stream events.

Every row change (planned, started, completed, cancelled) is written to LangGraph's custom stream,
so a client streaming ``custom`` (the SDK, Studio, ``turnplan run``) sees the plan move. Events are
emitted only after the change is committed, so a client never shows a state the database lacks.

Delegation adds two kinds that change no row: ``delegated`` (a worker took the item) and
``returned`` (the worker is done, or failed: ``error`` says why). They carry the same fields, with
the row's status as it stands, plus ``agentType`` and ``error``, so a client that knows the todo
events can show them without a second schema.

Events written by the supervisor's tools carry ``usage``: the turn's running totals (LLM calls,
prompt and completion tokens, whether estimated: ``agent.turn.usage``) when the round began.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Literal

from agent.turn.usage import TurnUsage
from storage.models import TurnTodo

TodoEventKind = Literal["planned", "started", "completed", "cancelled"]
DelegationEventKind = Literal["delegated", "returned"]
EVENT_TYPE = "turnplan.todo"


STATUS_AFTER: dict[TodoEventKind, str] = {
    "planned": "pending",
    "started": "in_progress",
    "completed": "completed",
    "cancelled": "cancelled",
}


def todo_event(kind: TodoEventKind, row: TurnTodo) -> dict[str, Any]:
    """The payload of one row change; ``status`` is the row's status right after that change
    (a row planned and started in one call yields ``pending`` then ``in_progress``)."""
    return {
        "type": EVENT_TYPE,
        "event": kind,
        "id": row.id,
        "title": row.title,
        "status": STATUS_AFTER[kind],
        "outcome": row.outcome,
        "priority": row.priority,
        "conversationId": row.conversationId,
        "turnId": row.turnId,
    }


def emit_todo_events(
    writer: Callable[[Any], None] | None, kind: TodoEventKind, rows: Iterable[TurnTodo]
) -> None:
    """Write one event per row; a run that is not streaming has a no-op writer (or none)."""
    if writer is None:
        return
    for row in rows:
        writer(todo_event(kind, row))


def delegation_event(
    kind: DelegationEventKind, row: TurnTodo, agent_type: str, error: str | None = None
) -> dict[str, Any]:
    """The payload of a hand-over to a worker (``delegated``) or back from it (``returned``)."""
    return {
        "type": EVENT_TYPE,
        "event": kind,
        "id": row.id,
        "title": row.title,
        "status": row.status,
        "outcome": row.outcome,
        "priority": row.priority,
        "conversationId": row.conversationId,
        "turnId": row.turnId,
        "agentType": agent_type,
        "error": error,
    }


def emit_delegation_event(
    writer: Callable[[Any], None] | None,
    kind: DelegationEventKind,
    row: TurnTodo,
    agent_type: str,
    error: str | None = None,
) -> None:
    """Write one delegation event; a run that is not streaming has a no-op writer (or none)."""
    if writer is not None:
        writer(delegation_event(kind, row, agent_type, error))


def usage_payload(usage: TurnUsage) -> dict[str, Any]:
    """The turn's running totals as events carry them."""
    return {
        "llmCalls": usage.llm_calls,
        "promptTokens": usage.prompt_tokens,
        "completionTokens": usage.completion_tokens,
        "estimated": usage.estimated,
    }


def with_running_usage(writer: Callable[[Any], None], usage: TurnUsage) -> Callable[[Any], None]:
    """A writer that adds the turn's running totals (``usage``: the turn's LLM calls and tokens
    when the tool round began) to every plan event it writes, and passes anything else on as
    it is. The supervisor's tools step gives its tools this writer, so the todo tools and
    delegation need not know about usage."""

    def write(chunk: Any) -> None:
        if isinstance(chunk, dict) and chunk.get("type") == EVENT_TYPE and "usage" not in chunk:
            chunk = {**chunk, "usage": usage_payload(usage)}
        writer(chunk)

    return write
