"""``delegate``: hand the plan item in progress to the worker its ``agentType`` names, and wait.

Seed 004, issue 1: delegation used to end the turn. Here the worker runs to completion inside the
tool call, so the tools node returns its answer as an ordinary tool result and the drain loop goes
on as after any other tool. The row is not closed here: the supervisor reads the result and
closes the row with ``complete_todo``, so the outcome stays its judgement (seed 004, issue 4).

The worker runs with the supervisor's context (same ``user_id``) and config (callbacks, stream),
and the turn's ids in its state, so its task tools audit under this turn. A worker that fails or
runs out of steps comes back as a ``WORKER_ERROR`` envelope; the row stays in progress.

The worker's LLM calls are the turn's (seed 004, issue 4): it may make what the turn's budget
has left (``worker_allowance``; shared evenly by the delegations of one message, which run side
by side), its calls are added to ``llmCalls`` after the round (``workerLlmCalls``), and a worker
that wants one more call than that is stopped before the call is sent (``WorkerCallCap``) and
reported as ``BUDGET_EXHAUSTED``, the row left open, so the turn ends with the honest partial
answer instead of spending calls past its cap.

Its tokens are the turn's too (issue 30 §4): the cap counts them (``usage_metadata``, else
estimated from characters), they are added to the turn's and the row's usage after the round
(``workerUsage``), and with ``Context.max_turn_tokens`` set the worker gets what the turn has
left (split like the calls) and is stopped before a call once it has passed that, reported as
``BUDGET_EXHAUSTED`` naming the token budget; the turn then ends ``budget_exhausted``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import merge_configs
from langchain_core.tools import BaseTool, tool
from langgraph.errors import GraphBubbleUp, GraphRecursionError
from langgraph.prebuilt import ToolNode
from langgraph.types import Command

from agent.context import Context
from agent.errors import ErrorCode, ToolFailure
from agent.tool_names import (
    WORKER_TOOLS_METADATA,
)
from agent.tools.runtime import ToolRuntimeT, run_context, state_value, turn_scope
from agent.turn.blockers import ensure_unblocked
from agent.turn.budget import extended_budget
from agent.turn.identity import issuing_message, message_text
from agent.turn.plan_rows import TurnPlan
from agent.turn.progress import emit_delegation_event
from agent.turn.usage import turn_usage
from agent.workers.call_cap import WorkerBudgetSpent, WorkerCallCap, WorkerTokensSpent
from agent.workers.registry import WorkerRegistry
from agent.workers.worker import DELEGATE_TOOL_NAME, Worker
from prompts import CONFIG_KEY, Prompts, chosen
from storage import Database
from storage.models import OPEN_TODO_STATUSES, TurnTodo

logger = logging.getLogger(__name__)

REASON_LIMIT = 300
RETRY_HINT = (
    "The item is still in progress: call delegate again, do it yourself with your own tools, "
    "or cancel it with complete_todo (status 'cancelled') and say why."
)


def _reason(error: BaseException) -> str:
    text = " ".join(str(error).split()) or type(error).__name__
    return text if len(text) <= REASON_LIMIT else text[: REASON_LIMIT - 1] + "…"


def worker_allowance(budget: int, llm_calls: int, context: Context, delegations: int = 1) -> int:
    """LLM calls a worker may make: what the turn may still spend, with the extension a round
    on an open item earns (``agent.turn.budget.extended_budget``, never past
    ``max_iterations``), split evenly between the ``delegations`` of one message."""
    left = extended_budget(budget or context.base_iterations, llm_calls, context) - llm_calls
    return max(0, left) // max(1, delegations)


def worker_token_allowance(
    used: int, max_turn_tokens: int | None, delegations: int = 1
) -> int | None:
    """Tokens a worker may spend: what ``max_turn_tokens`` leaves after the turn's ``used``
    tokens, split evenly between the ``delegations`` of one message; None without a budget."""
    if max_turn_tokens is None:
        return None
    return max(0, max_turn_tokens - used) // max(1, delegations)


def _delegations_in_message(runtime: ToolRuntimeT) -> int:
    """How many ``delegate`` calls the message that made this call holds (they run together)."""
    messages = state_value(runtime, "messages", []) or []
    issuer = issuing_message(messages, runtime.tool_call_id or "")
    if issuer is None:
        return 1
    return sum(1 for call in issuer.tool_calls if call.get("name") == DELEGATE_TOOL_NAME) or 1


def _budget_spent(
    worker: Worker, row: TurnTodo, cap: WorkerCallCap, tokens: bool = False
) -> ToolFailure:
    if tokens:
        return ToolFailure(
            ErrorCode.BUDGET_EXHAUSTED,
            f"Worker '{worker.name}' stopped on '{row.title}': the turn's token budget is spent "
            f"({cap.tokens} token(s) used by the worker in {cap.made} call(s), "
            f"{cap.token_allowance} allowed). The item is not done.",
            "The item stays in progress: tell the user what is left; they can continue the plan "
            "in a new turn with a larger token budget.",
            workerLlmCalls=cap.made,
            workerTokens=cap.tokens,
        )
    return ToolFailure(
        ErrorCode.BUDGET_EXHAUSTED,
        f"Worker '{worker.name}' stopped on '{row.title}': the turn's LLM-call budget is spent "
        f"({cap.made} call(s) made by the worker, {cap.allowed} allowed). The item is not done.",
        "The item stays in progress: tell the user what is left; they can continue the plan in "
        "a new turn with a larger budget.",
        workerLlmCalls=cap.made,
    )


def _worker_for(row: TurnTodo, registry: WorkerRegistry) -> Worker:
    """The worker the row names, or an error the model can act on."""
    if row.status not in OPEN_TODO_STATUSES:
        raise ToolFailure(
            ErrorCode.VALIDATION_ERROR,
            f"Todo '{row.title}' is already {row.status}; a closed item cannot be delegated.",
            "Move on to the item in progress.",
        )
    agent_type = row.agentType or ""
    if agent_type not in registry:
        named = f"agentType '{agent_type}'" if agent_type else "no agentType"
        raise ToolFailure(
            ErrorCode.VALIDATION_ERROR,
            f"Todo '{row.title}' has {named}; the registered worker types are "
            f"{registry.names_text()}.",
            "Do this item yourself with your own tools; only items whose agentType is one of "
            "the registered types can be delegated.",
        )
    return registry[agent_type]


def _hand_over(row: TurnTodo, request: str, prompts: Prompts) -> HumanMessage:
    return HumanMessage(
        id=str(uuid.uuid4()),  # to find where the worker's own messages begin in its output
        content=prompts.render(
            "worker_request",
            title=row.title,
            context=row.context or "(none)",
            criteria=row.completionCriteria or "(not stated)",
            request=request,
        ),
    )


def _final_answer(worker: Worker, messages: list[AnyMessage]) -> str:
    last = messages[-1] if messages else None
    if not isinstance(last, AIMessage) or last.tool_calls:
        raise ToolFailure(
            ErrorCode.WORKER_ERROR, f"Worker '{worker.name}' ended without an answer.", RETRY_HINT
        )
    return message_text(last).strip()


async def _run_worker(
    worker: Worker, row: TurnTodo, runtime: ToolRuntimeT, cap: WorkerCallCap, prompts: Prompts
) -> tuple[str, int, list[Any]]:
    """Run ``worker`` on ``row`` to the end: (answer, tool calls it made, tasks it changed).
    ``cap`` counts its LLM calls and stops the one past the turn's budget; ``prompts``: the
    delegating graph's, handed to the worker in its config (``prompts.CONFIG_KEY``)."""
    scope = turn_scope(runtime)
    await asyncio.to_thread(prompts.load, "worker_request")  # off the loop; cached afterwards
    hand_over = _hand_over(row, state_value(runtime, "turnRequest", "") or "", prompts)
    own: RunnableConfig = {
        "callbacks": [cap],
        "recursion_limit": worker.recursion_limit,
        "configurable": {CONFIG_KEY: prompts},
    }
    config: RunnableConfig = merge_configs(runtime.config, own)
    try:
        output = await worker.graph.ainvoke(
            {
                "messages": [hand_over],
                "conversationId": scope.conversation_id,
                "turnId": scope.turn_id,
            },
            config=config,
            context=run_context(runtime),
        )
    except (GraphBubbleUp, asyncio.CancelledError):
        raise  # interrupts and cancellation belong to the run, not to the model
    except WorkerBudgetSpent as spent:
        raise _budget_spent(worker, row, cap, isinstance(spent, WorkerTokensSpent)) from None
    except GraphRecursionError:
        raise ToolFailure(
            ErrorCode.WORKER_ERROR,
            f"Worker '{worker.name}' did not finish within its limit of "
            f"{worker.recursion_limit} steps.",
            RETRY_HINT,
        ) from None
    except Exception as error:  # the worker boundary: the supervisor decides what happens next
        logger.warning("worker %s failed: %r", worker.name, error, exc_info=True)
        raise ToolFailure(
            ErrorCode.WORKER_ERROR,
            f"Worker '{worker.name}' failed ({type(error).__name__}: {_reason(error)}).",
            RETRY_HINT,
        ) from error
    messages: list[AnyMessage] = list(output.get("messages", []))
    start = next((i + 1 for i, m in enumerate(messages) if m.id == hand_over.id), 0)
    produced = messages[start:]
    calls = sum(len(m.tool_calls) for m in produced if isinstance(m, AIMessage))
    return _final_answer(worker, produced), calls, list(output.get("modifiedTasks", []))


def build_delegate_tool(
    registry: WorkerRegistry, database: Database, prompts: Prompts | None = None
) -> BaseTool:
    """The ``delegate`` tool for the workers in ``registry``; rows are read from ``database``;
    ``prompts``: the graph's texts (the worker's request, and the worker's own prompts)."""
    texts = chosen(prompts)

    @tool(DELEGATE_TOOL_NAME)
    async def delegate(
        todoId: str,  # noqa: N803 - seed 004 names todo ids todoId
        runtime: ToolRuntimeT,
    ) -> Command[Any] | str:
        """Hand a plan item to the worker named by its `agentType` and wait for its answer.

        `todoId` is the item's id (normally the item in progress). The worker does the item
        with its own tools and returns `result` (its report) and `toolCalls`. The item stays
        open: close it next with complete_todo, using the result as the outcome.
        """
        row = await TurnPlan(database, turn_scope(runtime)).find(todoId)
        worker = _worker_for(row, registry)
        ensure_unblocked(row, "delegated")
        context = run_context(runtime)
        delegations = _delegations_in_message(runtime)
        used = turn_usage(runtime.state)
        cap = WorkerCallCap(
            worker_allowance(
                int(state_value(runtime, "iterationBudget", 0) or 0),
                int(state_value(runtime, "llmCalls", 0) or 0),
                context,
                delegations,
            ),
            worker_token_allowance(used.total_tokens, context.max_turn_tokens, delegations),
        )
        emit_delegation_event(runtime.stream_writer, "delegated", row, worker.name)
        try:
            answer, calls, modified = await _run_worker(worker, row, runtime, cap, texts)
        except ToolFailure as failure:
            emit_delegation_event(
                runtime.stream_writer, "returned", row, worker.name, failure.message
            )
            if not cap.made:
                raise
            # The worker's calls are the turn's even when it failed or was stopped.
            error = ToolMessage(
                content=json.dumps(failure.envelope(), ensure_ascii=False),
                tool_call_id=runtime.tool_call_id or "",
                name=DELEGATE_TOOL_NAME,
                status="error",
            )
            return Command(
                update={
                    "messages": [error],
                    "workerLlmCalls": [cap.made],
                    "workerUsage": [cap.spent(row.id)],
                }
            )
        emit_delegation_event(runtime.stream_writer, "returned", row, worker.name)
        content = json.dumps(
            {
                "todoId": row.id,
                "agentType": worker.name,
                "result": answer,
                "toolCalls": calls,
                "llmCalls": cap.made,
            },
            ensure_ascii=False,
        )
        message = ToolMessage(
            content=content, tool_call_id=runtime.tool_call_id or "", name=DELEGATE_TOOL_NAME
        )
        update: dict[str, Any] = {
            "messages": [message],
            "workerLlmCalls": [cap.made],
            "workerUsage": [cap.spent(row.id)],
        }
        if modified:
            update["modifiedTasks"] = modified
        return Command(update=update)

    return delegate


def delegated_tools(registry: WorkerRegistry) -> dict[str, dict[str, Any]]:
    """The tools the workers hold (``WORKER_TOOLS_METADATA``), the first worker's for a name
    two hold."""
    found: dict[str, dict[str, Any]] = {}
    for worker in registry.values():
        for node in worker.graph.get_graph().nodes.values():
            if not isinstance(node.data, ToolNode):
                continue
            for name, held in node.data.tools_by_name.items():
                if name not in found:
                    lines = (held.description or "").strip().splitlines()
                    found[name] = {
                        "agentType": worker.name,
                        "description": lines[0] if lines else "",
                        "metadata": dict(held.metadata or {}),
                    }
    return found


def delegation_tools(
    registry: WorkerRegistry, database: Database, prompts: Prompts | None = None
) -> list[BaseTool]:
    """``[delegate]`` when any worker is registered, else nothing (the default graph). Its
    metadata names the workers' tools, so a plan made from the request's verbs can hand a step
    to the worker that does it."""
    if not registry:
        return []
    delegate = build_delegate_tool(registry, database, prompts)
    delegate.metadata = {
        **(delegate.metadata or {}),
        WORKER_TOOLS_METADATA: delegated_tools(registry),
    }
    return [delegate]
