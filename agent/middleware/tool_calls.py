"""Tool calls under ``TurnPlanMiddleware`` (``wrap_tool_call``): exactly once, with evidence.

- A call whose result is recorded (``agent.turn.call_ledger``: a resumed or retried run, or the
  same message replayed) is not run again: the recorded result is its result.
- A call that returns is recorded; the todo tools record their own, in the transaction of
  their change (``agent.turn.plan_rows.Receipt``).
- A call that returned is evidence of the rows in progress (``agent.turn.evidence.record_call``).
- A call on a conversation another user owns (a paused turn's state edited to name it) is
  refused, nothing done (``agent.turn.ownership``), as in the graph's tools step.
- While a new plan waits for the user's approval (``Context.approve_plan``), only the plan
  tools run (``agent.turn.approval.PLAN_TOOLS``); any other call is refused, nothing done.
- A ``ToolFailure`` (a refused completion, an unknown row) reaches the model as the error
  envelope turnplan's graph sends, instead of ending the run.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from langchain.agents.middleware.types import ToolCallRequest
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.config import get_config
from langgraph.types import Command

from agent.errors import ErrorCode, ToolFailure, tool_error_content
from agent.tool_names import TODO_TOOL_NAMES
from agent.turn.approval import PLAN_TOOLS
from agent.turn.call_ledger import RecordBatch, output_text, record_result, recorded_results
from agent.turn.evidence import record_call
from agent.turn.identity import call_record_id, issuing_message
from agent.turn.ownership import refuse_another_users_conversation
from storage import Database
from storage.models import OPEN_TODO_STATUSES as OPEN
from storage.repositories import ToolCallKey, TurnScope

ToolResult = ToolMessage | Command[Any]
ToolHandler = Callable[[ToolCallRequest], Awaitable[ToolResult]]

WAITING_FOR_APPROVAL = ToolFailure(
    ErrorCode.NOT_RUN,
    "This call was not run: the plan is waiting for the user's approval.",
    "Wait for the approval; the plan view will show the approved plan.",
)


def _awaiting_approval(state: Mapping[str, Any], issuing: AIMessage | None) -> bool:
    """A plan (made before, or in the same message) waits for the user's approval."""
    if not state.get("approvePlan") or state.get("planApproved"):
        return False
    planning = issuing is not None and any(c["name"] == "create_todo" for c in issuing.tool_calls)
    open_rows = [todo for todo in state.get("todos") or () if todo.get("status") in OPEN]
    return planning or bool(open_rows)


def _error(call_id: str, name: str, failure: ToolFailure) -> ToolMessage:
    return ToolMessage(
        content=tool_error_content(failure), tool_call_id=call_id, name=name, status="error"
    )


async def run_once(
    database: Database, request: ToolCallRequest, handler: ToolHandler, user_id: str
) -> ToolResult:
    """Run ``request``'s call at most once in its conversation (see the module's docstring),
    and only on a conversation ``user_id`` owns: the state of a paused turn may have been
    edited to name another user's (``agent.turn.ownership``)."""
    state: Mapping[str, Any] = request.state or {}
    call = request.tool_call
    call_id, name = call["id"] or "", call["name"]
    scope = TurnScope(state.get("conversationId", ""), state.get("turnId", ""))
    issuing = issuing_message(state.get("messages", []), call_id)
    if name not in PLAN_TOOLS and _awaiting_approval(state, issuing):
        return _error(call_id, name, WAITING_FOR_APPROVAL)
    if not (scope.conversation_id and scope.turn_id and call_id):
        return await handler(request)
    record_id = call_record_id(issuing.id if issuing else None, call_id)
    try:
        await refuse_another_users_conversation(
            database, scope.conversation_id, user_id, get_config()
        )
        found = await recorded_results(database, scope.conversation_id, [record_id])
        if record_id in found:
            return ToolMessage(content=found[record_id].content, tool_call_id=call_id, name=name)
        result = await handler(request)
    except ToolFailure as failure:
        return _error(call_id, name, failure)
    if isinstance(result, ToolMessage) and result.status == "error":
        return result
    if name not in TODO_TOOL_NAMES:
        key = ToolCallKey(scope.conversation_id, scope.turn_id, record_id, name)
        await record_result(RecordBatch(database), key, result)
        text = output_text(result)
        await record_call(database, scope, record_id, name, call["args"], text, is_error=False)
    return result
