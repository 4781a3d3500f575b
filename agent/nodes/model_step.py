"""One LLM call of the turn, shared by the ``plan`` and ``execute`` nodes.

It sends the bounded prompt (system prompt, history window, plan view) and counts the call
against the turn's budget; ``agent.nodes.routing`` then sends tool calls to the tools node and
anything else to ``drain``. A model that cannot be reached (after its own retries) or a plan
store that cannot be read ends the turn with a message saying so; the rows are left exactly as
they were.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, BaseMessage
from langchain_core.runnables import ensure_config
from langchain_core.runnables.config import merge_configs
from langgraph.errors import GraphBubbleUp

from agent.calls.gate import NOT_FRESH, fresh_message
from agent.calls.safe_input import quarantine_unstorable_calls
from agent.context import Context
from agent.errors import ToolFailure
from agent.llm.chat_models import invalid_tool_call_messages
from agent.nodes.deps import SupervisorDeps
from agent.prompting.builder import model_messages
from agent.prompting.orphan_results import orphan_results
from agent.turn.answer_ledger import record_answer, recorded_answer
from agent.turn.lineage import DeferredClaim
from agent.turn.outcome import turn_failed_message
from agent.turn.plan_rows import TurnPlan
from agent.turn.rows_handoff import NOTHING_HANDED
from agent.turn.usage import (
    RowUsage,
    TurnUsage,
    UsageRecorder,
    call_usage,
    charged_rows,
    usage_after_call,
)
from prompts import Prompts
from storage.models import TurnTodo
from storage.repositories import TurnScope

logger = logging.getLogger(__name__)

NO_USAGE = TurnUsage(llm_calls=0, prompt_tokens=0, completion_tokens=0, estimated=False)


@dataclass(frozen=True)
class TurnView:
    """The turn as the model step needs it (``plan`` passes values it has not stored yet)."""

    scope: TurnScope
    llm_calls: int
    turn_request: str
    turn_message_id: str | None
    rows: Sequence[TurnTodo] | None = None
    """The turn's rows if the caller has just read them (``execute`` reads them with its step
    claim); None to read them here."""
    claimed_step: int | None = None
    """The turn's step the caller claimed in this run right before the call (``plan`` and
    ``execute`` do); the answer's tool calls then skip the call gate's read
    (``agent.calls.gate.fresh_message``)."""
    deferred_claim: DeferredClaim | None = None
    """The step's claim, when the caller left it to be made with the answer's record
    (``agent.turn.lineage.DeferredClaim``; ``execute`` then makes it alone if nothing is
    recorded)."""
    retaken: bool = False
    """The step is one this run took before (``TurnClaim.retaken``): the answer it got then, if
    recorded, is the answer now (``agent.turn.answer_ledger``)."""
    usage: TurnUsage = NO_USAGE
    """The turn's usage before this call (``agent.turn.usage.turn_usage`` of the state)."""
    row_usage: Mapping[str, RowUsage] = field(default_factory=dict)
    """The usage charged to each row before this call (``SupervisorState.rowUsage``)."""
    open_elsewhere: tuple[str, ...] = ()
    """Titles of the rows earlier turns of the conversation left open (``plan`` reads them):
    the call is told and may continue them (``SupervisorDeps.step_call``)."""
    superseded: str = ""
    """The note on earlier turns a newer run stopped, whose open rows ``plan`` closed
    (``agent.turn.superseded``): the call is told what was left undone and what stays done."""


REASON_LIMIT = 300


def _first_line(error: BaseException) -> str:
    """A short reason for the user; the full error goes to the log."""
    text = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return text if len(text) <= REASON_LIMIT else text[: REASON_LIMIT - 1] + "…"


def end_turn_with_failure(
    reason: str,
    rows: Sequence[TurnTodo] | None,
    update: dict[str, Any] | None = None,
    prompts: Prompts | None = None,
) -> dict[str, Any]:
    """The update that ends the turn with a message saying what failed and where the plan
    stands (``turnStatus`` ``failed`` routes to the end); ``prompts``: the graph's texts."""
    message = AIMessage(content=turn_failed_message(reason, rows, prompts))
    ended = {**NOTHING_HANDED, **NOT_FRESH, "messages": [message], "turnStatus": "failed"}
    return {**(update or {}), **ended}


async def model_step(
    deps: SupervisorDeps,
    history: Sequence[AnyMessage],
    view: TurnView,
    context: Context,
    update: dict[str, Any] | None = None,
    *,
    required_tool: str | None = None,
) -> dict[str, Any]:
    """Make one LLM call; the returned update holds its answer (and the caller's own changes
    from ``update``). ``required_tool`` names a tool the model must call."""
    update = dict(update or {})
    await deps.prepare()
    try:
        rows = await _rows_of(deps, view)
    except ToolFailure as failure:
        return end_turn_with_failure(failure.message, None, update, deps.prompts)

    try:
        replayed = (
            await recorded_answer(deps.database, view.scope, view.llm_calls, len(history))
            if view.retaken
            else None
        )
    except ToolFailure as failure:
        return end_turn_with_failure(failure.message, rows, update, deps.prompts)
    if replayed is not None:
        # The calls of this answer may have run already: the tools step reads their records.
        update.update(_charge(view, rows, replayed, None))
        return _with_answer(update, replayed, view)
    try:
        step = await deps.step_call(
            context,
            history=history,
            rows=rows,
            required_tool=required_tool,
            request=view.turn_request,
            open_elsewhere=view.open_elsewhere,
            superseded=view.superseded,
        )
        recorded = await orphan_results(
            deps.database, view.scope.conversation_id, history, step.history_limit
        )
        prompt = model_messages(
            base_prompt=step.base_prompt,
            history=history,
            history_limit=step.history_limit,
            rows=rows,
            turn_request=view.turn_request,
            turn_message_id=view.turn_message_id,
            profile=step.profile,
            recorded=recorded,
            prompts=deps.prompts,
        )
        recorder = UsageRecorder()
        config = merge_configs(ensure_config(), {"callbacks": [recorder]})
        response = answered = await step.model.ainvoke(prompt, config)
        if isinstance(response, AIMessage):
            place = (view.scope, view.llm_calls, len(history))  # the turn's n-th call
            response = await record_answer(deps.database, *place, response, view.deferred_claim)
    except (GraphBubbleUp, asyncio.CancelledError):
        raise
    except ToolFailure as failure:  # the recorded results could not be read or written
        return end_turn_with_failure(failure.message, rows, update, deps.prompts)
    except Exception as error:  # the model boundary: any failure ends the turn, explained
        logger.warning("model call failed: %r", error, exc_info=logger.isEnabledFor(logging.DEBUG))
        reason = f"the language model failed ({type(error).__name__}: {_first_line(error)})."
        return end_turn_with_failure(reason, rows, update, deps.prompts)
    if not isinstance(response, AIMessage):
        returned = f"the language model returned {type(response).__name__}, not a message."
        return end_turn_with_failure(returned, rows, update, deps.prompts)

    update.update(_charge(view, rows, answered, prompt, recorder))
    # Another run's answer (recorded first) may have had its calls run; this call's own answer
    # has ids nothing has seen yet.
    fresh = response is answered
    return _with_answer(update, response, view, fresh=fresh)


async def _rows_of(deps: SupervisorDeps, view: TurnView) -> list[TurnTodo]:
    """The turn's rows: as the caller read them, else read now."""
    if view.rows is not None:
        return list(view.rows)
    return (await TurnPlan(deps.database, view.scope).rows())[0]


def _charge(
    view: TurnView,
    rows: Sequence[TurnTodo],
    answer: AIMessage,
    prompt: Sequence[BaseMessage] | None,
    recorder: UsageRecorder | None = None,
) -> dict[str, Any]:
    """The usage update of this call (``agent.turn.usage``), charged to the rows in progress.
    The state holds it (checkpointed); ``turn_row_usage`` gets it when the turn ends."""
    usage = call_usage(answer, prompt, recorder)
    return usage_after_call(view.usage, view.row_usage, usage, charged_rows(rows))


def _with_answer(
    update: dict[str, Any], response: AIMessage, view: TurnView, *, fresh: bool = False
) -> dict[str, Any]:
    """The step's update with the model's answer (repaired calls answered, unstorable ones
    refused) counted against the budget."""
    repairs = invalid_tool_call_messages(response)
    response, refusals = quarantine_unstorable_calls(response)
    update.update(fresh_message(response, view.scope, view.claimed_step) if fresh else NOT_FRESH)
    update["messages"] = [response, *repairs, *refusals]
    update["llmCalls"] = view.llm_calls + 1
    return update
