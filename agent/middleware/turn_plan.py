"""``TurnPlanMiddleware``: turnplan's guarantees inside LangChain's ``create_agent``.

A thin adapter: every decision is one of the core functions the supervisor graph's nodes use
too (``agent.turn``), called from the middleware hooks with plain values read off the agent's
state (``agent.middleware.state.TurnPlanState``):

- ``before_agent``: the turn of the newest human message starts (ids, ``turns`` row; on a
  server, the rows of turns a newer run stopped closed) or goes on
  (``agent.middleware.turn_start``);
- ``before_model``: after a tool round, its budget extension and the idle count
  (``agent.turn.tool_round``); a spent budget or a stalled turn ends here with the honest report;
  a new plan waiting for approval pauses in LangChain's HITL request shape
  (``agent.turn.approval``);
- ``wrap_model_call``: the phase's tools, turnplan's system prompt and the plan view
  (``agent.middleware.model_request``);
- ``after_model``: the drain (``agent.turn.drain_rule``): an answer while rows are open goes
  back with the reminder; the end of the turn gets its honest status and closing answer;
- ``wrap_tool_call``: exactly-once results and evidence (``agent.middleware.tool_calls``).

The todo tools (``create_todo``, ``list_todo``, ``complete_todo``) come with the middleware; the
conversation and turn ids are injected from the state, never typed by the model.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from langchain.agents.middleware.types import (
    AgentMiddleware,
    ExtendedModelResponse,
    ModelCallResult,
    ModelRequest,
    ModelResponse,
    ToolCallRequest,
    hook_config,
)
from langchain_core.messages import AIMessage
from langgraph.config import get_config
from langgraph.runtime import Runtime
from langgraph.types import Command

from agent.auth import acting_user
from agent.calls.completion import CompletionCheck
from agent.context import Context, ContextDefaults, run_settings
from agent.errors import ToolFailure
from agent.middleware.model_request import turn_request
from agent.middleware.state import TurnPlanState
from agent.middleware.tool_calls import ToolHandler, ToolResult, run_once
from agent.middleware.turn_start import ended, start_turn
from agent.prompting.builder import FULL, history_limit
from agent.prompting.orphan_results import orphan_results
from agent.tools.todos import build_todo_tools
from agent.turn.approval import ask_for_approval, awaiting_approval
from agent.turn.claim_check import needs_row_evidence
from agent.turn.drain_rule import TurnCounters, drain_decision, open_rows
from agent.turn.evidence import turn_evidence
from agent.turn.lineage import identity_of, record_run_going_on
from agent.turn.outcome import turn_failed_message
from agent.turn.ownership import TURN_REFUSED, refuse_another_users_conversation
from agent.turn.plan_card import ui_todos
from agent.turn.plan_rows import TurnPlan, plan_limits
from agent.turn.superseded import RunFates
from agent.turn.tool_round import IdleCount, after_tool_round, judge_tool_round
from agent.turn.usage import (
    call_usage,
    charged_rows,
    store_row_usage,
    todos_with_usage,
    turn_usage,
    usage_after_call,
)
from prompts import Prompts
from storage import Database
from storage.models import TurnTodo
from storage.repositories import TurnScope

ENDED = "end"


def _scope(state: Mapping[str, Any]) -> TurnScope:
    return TurnScope(state.get("conversationId", ""), state.get("turnId", ""))


def _counters(state: Mapping[str, Any], llm_calls: int | None = None) -> TurnCounters:
    return TurnCounters(
        llm_calls=state.get("llmCalls", 0) if llm_calls is None else llm_calls,
        budget=state.get("iterationBudget", 0),
        reminders_in_a_row=state.get("remindersInARow", 0),
        usage=turn_usage(state),
    )


def _todos(rows: Sequence[TurnTodo], state: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The rows in ``TodoListMiddleware``'s shape (``content``, ``status``) with turnplan's
    fields, each with the usage charged to it (``agent.turn.usage``)."""
    return todos_with_usage(ui_todos(row.to_dict() for row in rows), state.get("rowUsage", {}))


def _answer(response: ModelResponse[Any]) -> AIMessage | None:
    return next((m for m in response.result if isinstance(m, AIMessage)), None)


class TurnPlanMiddleware(AgentMiddleware[TurnPlanState, Any, Any]):
    """turnplan's plan/execute/drain guarantees for ``create_agent`` (see the module).

    ``database``: turnplan's ``Database`` or its URL (SQLite or PostgreSQL; default:
    ``TURNPLAN_DATABASE_URL``, else ``.turnplan/turnplan.db``). ``context``: turnplan's
    settings (``agent.context.Context``: ``base_iterations``, ``max_iterations``,
    ``max_reminders``, ``max_idle_rounds``, ``approve_plan``, ...); a run's context that is a
    turnplan ``Context`` (or a dict of its keys) overrides them. ``completion_checks``: what a
    row must pass before ``complete_todo`` closes it (``agent.calls.completion``).
    ``prompts_dir``: a folder of prompt files that replace the shipped ones file by file
    (default: ``TURNPLAN_PROMPTS_DIR``, else none), checked here as ``build_graph`` checks its
    own (``prompts.PromptFolderError``; docs/prompts.md). ``run_fates``: how to ask the
    LangGraph server what became of one of its runs (``agent.run_fates.server_run_fate``, as
    the served ``turnplan_agent`` does), so a turn closes the rows of earlier turns a newer run
    rolled back or interrupted (``agent.turn.superseded``); None (the default) for an agent run
    from Python, which has no server runs to be stopped."""

    state_schema = TurnPlanState

    def __init__(
        self,
        database: Database | str | None = None,
        *,
        context: ContextDefaults | None = None,
        completion_checks: Mapping[str, CompletionCheck] | None = None,
        prompts_dir: str | Path | None = None,
        run_fates: RunFates | None = None,
    ) -> None:
        super().__init__()
        self.run_fates = run_fates
        self.database = database if isinstance(database, Database) else Database(database)
        self._defaults = context
        self.prompts = Prompts.at(prompts_dir)
        self.prompts.check()
        self.tools = build_todo_tools(self.database, completion_checks, self.prompts)
        self._prompts_read = False

    def _settings(self, runtime: Runtime[Any] | None) -> Context:
        return run_settings(runtime.context if runtime is not None else None, self._defaults)

    async def _rows(self, state: Mapping[str, Any]) -> list[TurnTodo]:
        return (await TurnPlan(self.database, _scope(state)).rows())[0]

    async def _refused(
        self, state: Mapping[str, Any], runtime: Runtime[Any] | None
    ) -> dict[str, Any] | None:
        """The update ending the run when the state names a conversation of another user (a
        state edited on the user's own thread: ``agent.turn.ownership``), before its rows are
        read; None (and no read) when it names the run's own thread."""
        config = get_config()
        user = acting_user(self._settings(runtime).user_id, config)
        try:
            await refuse_another_users_conversation(
                self.database, _scope(state).conversation_id, user, config, refused=TURN_REFUSED
            )
        except ToolFailure as failure:
            return ended(turn_failed_message(failure.message, None, self.prompts), "failed")
        return None

    async def abefore_agent(
        self, state: TurnPlanState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        if not self._prompts_read:  # off the event loop: the dev server forbids blocking reads
            await asyncio.to_thread(self.prompts.load_all)
            self._prompts_read = True
        return await start_turn(
            self.database, state, self._settings(runtime), self.prompts, self.run_fates
        )

    @hook_config(can_jump_to=["end"])
    async def abefore_model(
        self, state: TurnPlanState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        if state.get("turnStatus") != "running":
            return {"jump_to": ENDED}
        refused = await self._refused(state, runtime)
        if refused is not None:
            return refused
        held = await self._held_by_this_run(state)
        if "jump_to" in held:
            return held
        update = await self._after_tool_round(state, runtime)
        return {**held, **update} if update else (held or None)

    async def _held_by_this_run(self, state: Mapping[str, Any]) -> dict[str, Any]:
        """``turnRunId`` when this server run goes on with a turn another run began (resumed
        after a pause), recorded first (``agent.turn.lineage.record_run_going_on``), so a newer
        run that stops this one closes the turn's rows; empty otherwise (one string compare)."""
        identity = identity_of(get_config())
        if not identity.run_id or identity.run_id == state.get("turnRunId"):
            return {}
        try:
            await record_run_going_on(self.database, _scope(state), identity)
        except ToolFailure as failure:
            return ended(turn_failed_message(failure.message, None, self.prompts), "failed")
        return {"turnRunId": identity.run_id}

    async def _after_tool_round(
        self, state: TurnPlanState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """After a tool round: its budget extension and idle count, the plan's approval when
        it waits for one, and the end of a turn that is spent or stalled."""
        asking = bool(state.get("approvePlan")) and not state.get("planApproved")
        tools_ran = after_tool_round(state["messages"])
        if not (asking or tools_ran):
            return None
        settings = self._settings(runtime)
        rows = await self._rows(state)
        approval: dict[str, Any] = {}
        if awaiting_approval(asking, False, open_rows(rows)):
            # The round that made the plan is judged once the user has decided on it.
            plan = TurnPlan(self.database, _scope(state))
            approval = await ask_for_approval(plan, rows, plan_limits(settings), self.prompts)
            rows = await self._rows(state)
        if not tools_ran:
            return {**approval, "todos": _todos(rows, state)} if approval else None
        verdict = judge_tool_round(
            state["messages"],
            state.get("turnMessageId", ""),
            rows,
            budget=state.get("iterationBudget", 0),
            llm_calls=state.get("llmCalls", 0),
            usage=turn_usage(state),
            idle=IdleCount(
                state.get("progressMark", ""),
                state.get("idleRounds", 0),
                state.get("idleCalls", []),
            ),
            context=settings,
            prompts=self.prompts,
        )
        notes = approval.pop("messages", [])
        update = {**approval, **verdict.update, "todos": _todos(rows, state)}
        if verdict.stalled is not None:
            stalled = {"messages": [*notes, verdict.stalled], "turnStatus": "stalled"}
            return await self._ended(state, {**update, **stalled})
        if verdict.out_of_budget:
            counters = _counters({**state, **update})
            decision = drain_decision(state["messages"], rows, counters, settings, self.prompts)
            ended = {**decision, "messages": [*notes, *decision.get("messages", [])]}
            return await self._ended(state, {**update, **ended})
        return {**update, "messages": notes} if notes else update

    async def _ended(self, state: Mapping[str, Any], update: dict[str, Any]) -> dict[str, Any]:
        """``update`` for a turn that ends here: its rows' usage stored (``turn_row_usage``),
        and the run sent to its end."""
        await store_row_usage(
            self.database,
            _scope(state),
            state.get("rowUsage", {}),
            bool(state.get("usageEstimated")),
        )
        return {**update, "jump_to": ENDED}

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelCallResult[Any]:
        """The call with turnplan's request, its usage added to the turn and to the rows in
        progress (as the graph's ``model_step`` does). A state naming another user's turn is
        refused before its rows are read: a state edited as ``before_model`` comes straight
        here, and the model is never called."""
        state: Mapping[str, Any] = request.state
        refused = await self._refused(state, request.runtime)
        if refused is not None:
            answer, status = refused["messages"], refused["turnStatus"]
            return ExtendedModelResponse(
                model_response=ModelResponse(result=answer),
                command=Command(update={"turnStatus": status}),
            )
        settings = self._settings(request.runtime)
        rows = await self._rows(state)
        recorded = await orphan_results(
            self.database,
            _scope(state).conversation_id,
            request.messages,
            history_limit(FULL, settings.history_limit, rows),
        )
        shaped = turn_request(request, rows, settings, recorded, self.prompts)
        response = await handler(shaped)
        answer = _answer(response)
        if answer is None:
            return response
        prompt = [*([shaped.system_message] if shaped.system_message else []), *shaped.messages]
        usage = usage_after_call(
            turn_usage(state),
            state.get("rowUsage", {}),
            call_usage(answer, prompt),
            charged_rows(rows),
        )
        return ExtendedModelResponse(model_response=response, command=Command(update=usage))

    @hook_config(can_jump_to=["model", "end"])
    async def aafter_model(
        self, state: TurnPlanState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        if state.get("turnStatus") != "running":  # the call ended the turn (refused)
            return {"jump_to": ENDED}
        llm_calls = state.get("llmCalls", 0) + 1
        last = state["messages"][-1] if state["messages"] else None
        if isinstance(last, AIMessage) and last.tool_calls:
            return {"llmCalls": llm_calls}
        refused = await self._refused(state, runtime)
        if refused is not None:
            return {**refused, "llmCalls": llm_calls}
        rows = await self._rows(state)
        evidence = (
            await turn_evidence(self.database, _scope(state))
            if rows and not open_rows(rows) and needs_row_evidence(state["messages"])
            else []
        )
        decision = drain_decision(
            state["messages"],
            rows,
            _counters(state, llm_calls),
            self._settings(runtime),
            self.prompts,
            evidence,
        )
        update = {"llmCalls": llm_calls, "todos": _todos(rows, state), **decision}
        if decision.get("turnStatus", "running") != "running":
            return await self._ended(state, update)
        if decision.get("messages"):  # the reminder, or the request for a real answer
            return {**update, "jump_to": "model"}
        return update

    async def awrap_tool_call(self, request: ToolCallRequest, handler: ToolHandler) -> ToolResult:
        context = request.runtime.context if request.runtime is not None else None
        user = acting_user(run_settings(context, self._defaults).user_id, get_config())
        return await run_once(self.database, request, handler, user, self._defaults)
