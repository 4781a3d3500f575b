"""Tool calls under ``TurnPlanMiddleware`` (``wrap_tool_call``): exactly once, with evidence.

Every call is run and recorded by the record path the supervisor graph's tools step uses too
(``agent.turn.record_call``):

- a call whose result is recorded (a resumed or retried run, or the same message replayed) is
  not run again: the recorded result is its result;
- a free call that returns has its result, its ledger entry and its evidence of the rows in
  progress written in one transaction; the todo tools and the personal-task tools record their
  own, in the transaction of their change (``agent.turn.plan_rows.Receipt``,
  ``agent.tools.audited``);
- a tool that raises comes back as a recorded ``TOOL_ERROR`` result
  (``Context.handle_tool_errors=False``: raised again), and a ``ToolFailure`` (a refused
  completion, an unknown row) as the error envelope turnplan's graph sends, instead of ending
  the run.

Before that, as in the graph's tools step:

- a call on a conversation another user owns (a paused turn's state edited to name it) is
  refused, nothing done (``agent.turn.ownership``);
- while a new plan waits for the user's approval (``Context.approve_plan``), only the plan
  tools run (``agent.turn.approval.PLAN_TOOLS``); any other call is refused, nothing done.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from langchain.agents.middleware.types import ToolCallRequest
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.config import get_config
from langgraph.types import Command

from agent.context import ContextDefaults
from agent.errors import ErrorCode, ToolFailure, tool_error_content
from agent.tool_names import TODO_TOOL_NAMES
from agent.tools.audited import AuditedTaskTool
from agent.turn.approval import PLAN_TOOLS
from agent.turn.identity import call_record_id, issuing_message, refuse_a_reused_call_id
from agent.turn.ownership import refuse_another_users_conversation
from agent.turn.record_call import replay_or_run_call
from storage import Database
from storage.models import OPEN_TODO_STATUSES as OPEN
from storage.repositories import TurnScope

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


def _records_itself(request: ToolCallRequest) -> bool:
    """Whether the called tool writes its record in the transaction of its change: the todo
    tools and the personal-task tools (``agent.tools.audited``)."""
    return request.tool_call["name"] in TODO_TOOL_NAMES or isinstance(request.tool, AuditedTaskTool)


async def run_once(
    database: Database,
    request: ToolCallRequest,
    handler: ToolHandler,
    user_id: str,
    defaults: ContextDefaults | None = None,
) -> ToolResult:
    """Run ``request``'s call at most once in its conversation (see the module's docstring),
    and only on a conversation ``user_id`` owns: the state of a paused turn may have been
    edited to name another user's (``agent.turn.ownership``). ``defaults``: the middleware's
    settings, which a run's context overrides (``handle_tool_errors``)."""
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
        refuse_a_reused_call_id(issuing, call)
        await refuse_another_users_conversation(
            database, scope.conversation_id, user_id, get_config()
        )
        recorded = await replay_or_run_call(
            database,
            request,
            handler,
            record_id=record_id,
            records_itself=_records_itself(request),
            defaults=defaults,
        )
    except ToolFailure as failure:  # not the user's conversation, or the store is down
        return _error(call_id, name, failure)
    return recorded.result
