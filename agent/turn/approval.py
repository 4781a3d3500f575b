"""Plan approval (``Context.approve_plan``): the user sees a new plan before any of it is worked.

The ``drain`` after the ``create_todo`` step pauses the run with an interrupt whose value is
``{"type": "plan_approval", "items": [<open rows>], "action_requests": [...],
"review_configs": [...]}``: LangChain's ``HITLRequest`` (``agent.turn.review``) for one action,
``create_todo`` with ``args`` ``{"items": [<open items as create_todo takes them>]}``, beside the
keys older clients read. Until the plan is approved, the tools node refuses every call but the
plan tools and ``ask_user`` (``NOT_RUN``: nothing was done), so an action written in the same
message as ``create_todo`` waits for the approval. The resume value, LangChain's form or the
short one:

- ``{"decisions": [{"type": "approve"}]}`` or ``{"action": "approve"}``: the turn goes on;
- ``{"decisions": [{"type": "edit", "edited_action": {"name": "create_todo", "args": {"items":
  [...]}}}]}`` (``items`` may be its JSON text, as agent-chat-ui's edit form sends it) or
  ``{"action": "edit", "items": [...]}``: the open items are replaced in one transaction,
  validated as ``create_todo``'s, and the turn goes on with them;
- ``{"decisions": [{"type": "reject", "message": "..."}]}`` or ``{"action": "reject", "reason":
  "..."}``: every open item is cancelled with the reason as its outcome, the model is told, and
  it answers saying so.

Anything else pauses again with ``"error"`` added to the value, and changes nothing. A new
message while the approval is pending answers it: a plain yes (``AFFIRMATIVE``) approves,
anything else rejects with the message as the reason (the model may then propose another plan).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from langchain_core.messages import HumanMessage, RemoveMessage
from langgraph.config import get_stream_writer
from langgraph.types import interrupt
from pydantic import TypeAdapter, ValidationError

from agent.errors import ToolFailure, describe_validation_error
from agent.turn.identity import REMINDER_NAME
from agent.turn.plan_rows import PlanLimits, TodoItemInput, TurnPlan
from agent.turn.progress import emit_todo_events
from agent.turn.review import (
    DecisionType,
    hitl_request,
    is_hitl_response,
    json_arg,
    parse_hitl_response,
)
from prompts import Prompts, chosen
from storage.models import OPEN_TODO_STATUSES, TurnTodo

PLAN_TOOLS = frozenset({"create_todo", "list_todo", "ask_user"})
"""What the model may call while its plan waits for approval."""
AFFIRMATIVE = frozenset(
    {"yes", "y", "ok", "okay", "approve", "approved", "go", "go ahead", "sure", "looks good"}
)
_ITEMS = TypeAdapter(list[TodoItemInput])
PLAN_ACTION = "create_todo"
"""The action a plan approval reviews: the plan as ``create_todo`` would make it."""
PLAN_DECISIONS: tuple[DecisionType, ...] = ("approve", "edit", "reject")
NO_REASON = "no reason given"


@dataclass(frozen=True)
class Decision:
    action: Literal["approve", "edit", "reject"]
    items: list[TodoItemInput] | None = None
    reason: str = ""


def awaiting_approval(asked: bool, approved: bool, todos: Sequence[Any]) -> bool:
    """Whether the turn (started with ``approve_plan``: ``asked``) has a plan the user has not
    approved yet. The turn keeps ``approve_plan`` in its state, so a resume that does not send
    the context again still honours it."""
    return asked and not approved and bool(todos)


def _edited_items(items: Any) -> list[TodoItemInput]:
    try:
        return _ITEMS.validate_python(json_arg(items))
    except ValidationError as error:
        problem = describe_validation_error(error)
        raise ValueError(f'"edit" needs valid "items": {problem}') from None


def parse_decision(value: Any) -> Decision:
    """The resume value (LangChain's ``{"decisions": [...]}`` or the short form) as a
    decision; ``ValueError`` says what is wrong with it."""
    if is_hitl_response(value):
        review = parse_hitl_response(value, PLAN_ACTION, PLAN_DECISIONS)
        if review.type == "edit":
            return Decision("edit", items=_edited_items(review.args.get("items")))
        if review.type == "reject":
            return Decision("reject", reason=review.message or NO_REASON)
        return Decision("approve")
    action = value.get("action") if isinstance(value, dict) else None
    if action == "approve":
        return Decision("approve")
    if action == "reject":
        reason = value.get("reason")
        if not isinstance(reason, str) or not reason.strip():
            raise ValueError('"reject" needs a non-empty "reason".')
        return Decision("reject", reason=reason.strip())
    if action == "edit":
        return Decision("edit", items=_edited_items(value.get("items")))
    raise ValueError(
        'Resume with {"decisions": [{"type": "approve" | "edit" | "reject", ...}]}, or the short '
        'form {"action": "approve"}, {"action": "edit", "items": [...]} or '
        '{"action": "reject", "reason": "..."}.'
    )


def decision_from_message(text: str) -> Decision:
    """A chat message sent while the approval is pending, as a decision."""
    words = " ".join(text.lower().replace("!", " ").replace(".", " ").split())
    if words in AFFIRMATIVE:
        return Decision("approve")
    return Decision("reject", reason=text.strip() or NO_REASON)


async def apply_decision(
    plan: TurnPlan, decision: Decision, limits: PlanLimits, prompts: Prompts | None = None
) -> dict[str, Any]:
    """Carry out a decision; the state update that records it (``ToolFailure``: an invalid
    edit, nothing changed); ``prompts``: the texts the model is told it in."""
    if decision.action == "approve":
        return {"planApproved": True}
    writer = get_stream_writer()
    if decision.action == "edit":
        assert decision.items is not None
        change = await plan.replace_open_items(decision.items, limits)
        emit_todo_events(writer, "planned", change.planned)
        emit_todo_events(writer, "started", change.started)
        note = HumanMessage(content=chosen(prompts).load("plan_edited"), name=REMINDER_NAME)
        return {"planApproved": True, "messages": [note]}
    cancelled = await plan.cancel_open(f"Rejected by the user: {decision.reason}")
    emit_todo_events(writer, "cancelled", cancelled)
    note = HumanMessage(
        content=chosen(prompts).render("plan_rejected", reason=decision.reason),
        name=REMINDER_NAME,
    )
    return {"messages": [note]}


def decided_by_message(
    human: HumanMessage,
    decision: Decision,
    update: dict[str, Any],
    prompts: Prompts | None = None,
) -> dict[str, Any]:
    """``update`` for a decision the user's chat message made: the message leaves the history
    (it answered the pause; kept, a later run without a new message would take it for a new
    request), and the model is told what it decided."""
    assert human.id, "add_messages gives every message an id"
    notes = list(update.get("messages", []))
    if decision.action == "approve":
        approved = chosen(prompts).load("plan_approved")
        notes = [HumanMessage(content=approved, name=REMINDER_NAME)]
    return {**update, "messages": [RemoveMessage(id=human.id), *notes]}


def as_plan_item(row: TurnTodo, shared_stage: bool) -> dict[str, Any]:
    """An open row as ``create_todo`` takes it (only the fields it has), so an edit form
    shows, and sends back, exactly what an item is."""
    item: dict[str, Any] = {"title": row.title}
    if row.context:
        item["context"] = row.context
    if row.completionCriteria:
        item["completionCriteria"] = row.completionCriteria
    if row.agentType:
        item["agentType"] = row.agentType
    if shared_stage:
        item["order"] = row.priority + 1
    return item


def approval_request(rows: Sequence[TurnTodo], error: str = "") -> dict[str, Any]:
    """The interrupt value of a plan approval: the short form's keys and a ``HITLRequest``."""
    open_rows = [row for row in rows if row.status in OPEN_TODO_STATUSES]
    priorities = [row.priority for row in open_rows]
    shared = len(set(priorities)) < len(priorities)
    lines = [f"{i}. {row.title}" for i, row in enumerate(open_rows, start=1)]
    description = "Approve, edit or reject this plan before any of it is worked:\n" + "\n".join(
        lines
    )
    if error:
        description = f"{error}\n\n{description}"
    payload: dict[str, Any] = {
        "type": "plan_approval",
        "items": [row.to_dict() for row in open_rows],
        **hitl_request(
            PLAN_ACTION,
            {"items": [as_plan_item(row, shared) for row in open_rows]},
            description,
            PLAN_DECISIONS,
        ),
    }
    if error:
        payload["error"] = error
    return payload


async def ask_for_approval(
    plan: TurnPlan,
    rows: Sequence[TurnTodo],
    limits: PlanLimits,
    prompts: Prompts | None = None,
) -> dict[str, Any]:
    """Pause for the user's decision on the open rows, until a valid one comes."""
    error = ""
    while True:
        value = interrupt(approval_request(rows, error))
        try:
            return await apply_decision(plan, parse_decision(value), limits, prompts)
        except ValueError as problem:
            error = str(problem)
        except ToolFailure as failure:
            error = f'"edit" items are invalid: {failure.message}'
