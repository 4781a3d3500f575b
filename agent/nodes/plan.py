"""``plan``: the first step of every turn.

It names the turn (ids from the newest human message and the thread), records it in ``turns``,
resets the per-turn counters, and makes the turn's first LLM call with every tool bound. A simple
request is answered right here (one call, no rows); a multi-step one comes back as a
``create_todo`` call.

A run whose input has ``planEdits`` and no new human message edits the current turn's plan and
makes no LLM call (``agent.turn.plan_edits``); ``agent.nodes.routing.after_plan`` then
re-asks the pause the turn was at, or ends the run.

A run that sends its turn's message again is that turn resumed, not a new one
(``agent.turn.resume``): a LangGraph Server retries a run whose worker died by starting it over
from its input, on whatever checkpoint the thread last saved.

Rows earlier turns left open are never resumed on their own (seed 004). The plan step is told
of them in one line and offered ``continue_open_todos``; a run whose input says
``continuePlan`` continues them before its first call (``agent.turn.continuation``), with or
without a message of its own.

On the LangGraph server a new turn first closes the open rows of turns a newer run rolled back
or interrupted (``multitask_strategy``), which nothing else would ever close, and tells its
first call what those turns had already done (``agent.turn.superseded``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, RemoveMessage
from langchain_core.runnables import RunnableConfig
from langgraph.config import get_config
from langgraph.runtime import Runtime

from agent.auth import acting_user
from agent.context import Context
from agent.errors import ErrorCode, ToolFailure
from agent.nodes import SupervisorNode
from agent.nodes.deps import SupervisorDeps
from agent.nodes.model_step import TurnView, end_turn_with_failure, model_step
from agent.nodes.owned_turn import refuse_another_users_turn
from agent.nodes.plan_route import PlanFacts, PlanRoute, choose_plan_route, needs_lookups
from agent.state import SupervisorState
from agent.turn.approval import (
    apply_decision,
    awaiting_approval,
    decided_by_message,
    decision_from_message,
)
from agent.turn.continuation import continue_open_rows, open_titles_elsewhere
from agent.turn.identity import (
    conversation_id_of,
    latest_human_message,
    message_text,
    turn_id_of,
)
from agent.turn.lineage import RunIdentity, TurnClaim, TurnRefused, begin_turn, identity_of
from agent.turn.ownership import refuse_another_users_conversation
from agent.turn.plan_card import plan_card, ui_todos
from agent.turn.plan_edits import apply_plan_edits
from agent.turn.plan_rows import TurnPlan, plan_limits
from agent.turn.question import answer_with_message, pending_question, question_was_asked
from agent.turn.resume import resumed_turn_of_run, resumed_turn_update
from agent.turn.rows_handoff import NOTHING_HANDED, hand_over
from agent.turn.run_input import (
    continuation_problem,
    input_problem,
    refused_input,
    run_messages,
)
from agent.turn.superseded import close_superseded_turns, superseded_note
from prompts import Prompts
from storage.repositories import TurnScope

NO_REQUEST = "There is no new message to answer: send a human message to start a turn."
EDITS_WITH_MESSAGE = {
    "status": "error",
    "error": ErrorCode.VALIDATION_ERROR.value,
    "message": "planEdits came with a new message; they were not applied.",
    "suggestion": "Send planEdits in a run of their own, with no new message.",
}


async def edit_plan(
    deps: SupervisorDeps, state: SupervisorState, context: Context
) -> dict[str, Any]:
    """The update of a run that only edits the current turn's plan: no LLM call, the turn's
    status and pause kept (``agent.turn.plan_edits``). The run's identity keys them, so a
    re-picked attempt of the same server run applies them once."""
    scope = TurnScope(state.conversationId, state.turnId)
    config = get_config()
    identity = identity_of(config)
    user = acting_user(context.user_id, config)
    try:
        # A state edited to name another user's conversation edits nothing of it
        # (``agent.turn.ownership``; no read when the state names the run's own thread).
        await refuse_another_users_conversation(deps.database, scope.conversation_id, user, config)
        result = await apply_plan_edits(
            deps.database,
            scope,
            state.planEdits,
            plan_limits(context),
            user_id=user,
            start_next=state.turnStatus == "running",
            run_key=identity.run_id or identity.task_id,
        )
    except ToolFailure as failure:
        return {"planEditResult": {"status": "error", **failure.envelope()}}
    todos = ui_todos(row.to_dict() for row in result.rows)
    # The plan card too, so a UI that shows it (agent-chat-ui) shows the edited plan.
    card = plan_card(
        state.turnId, todos, state.messages, turn_status=state.turnStatus, llm_calls=state.llmCalls
    )
    return {
        "planEditResult": {"status": "applied", "applied": result.applied},
        "todos": todos,
        **card,
        **NOTHING_HANDED,
    }


def continue_request(identity: RunIdentity, prompts: Prompts) -> HumanMessage:
    """The message of a turn that only asks to continue the plan (``continuePlan`` with no
    message of its own). Its id comes from the run (the server's run, else the LangGraph
    task), so the same run started again names the same turn."""
    return HumanMessage(
        content=prompts.load("continue_request"),
        id=f"continue-{identity.run_id or identity.task_id}",
    )


def nothing_to_continue(turn_start: dict[str, Any], prompts: Prompts) -> dict[str, Any]:
    """The turn's answer when it was asked to continue a plan and no earlier turn left rows
    open: it says so, and nothing is planned."""
    answer = AIMessage(content=prompts.load("nothing_to_continue"))
    return {
        **turn_start,
        "messages": [*turn_start.get("messages", []), answer],
        "turnStatus": "answered",
    }


async def close_superseded(
    deps: SupervisorDeps, scope: TurnScope, identity: RunIdentity, *, continuing: bool = False
) -> str:
    """Close the open rows of the turns a newer run rolled back or interrupted, on the server
    (``agent.turn.superseded``), and return the note telling this turn about them. The turn
    that starts now does it: the stopped run cannot, and nothing else runs on the thread.
    ``continuing``: this run continues the open rows (an interrupted turn's are kept)."""
    if deps.run_fates is None:
        return ""
    turns = await close_superseded_turns(
        deps.database,
        scope,
        thread_id=identity.thread_id,
        run_id=identity.run_id,
        fates=deps.run_fates,
        continuing=continuing,
    )
    return superseded_note(turns, deps.prompts)


@dataclass(frozen=True)
class PlanRun:
    """A ``plan`` step's input, read once for every route: the run's settings and identity,
    the human message the turn answers (the run's own, or the request to continue the plan)
    and the history the first call sees."""

    state: SupervisorState
    context: Context
    config: RunnableConfig
    identity: RunIdentity
    human: HumanMessage | None
    history: list[AnyMessage]
    asked: HumanMessage | None
    """The request to continue the plan, when the run's input says ``continuePlan``."""
    resent: str | None = None
    """The turn this run's input was already sent in (``agent.turn.resume``), if any."""


def read_plan_run(
    deps: SupervisorDeps, state: SupervisorState, runtime: Runtime[Context]
) -> PlanRun:
    """The step's input. A run that only asks to continue the plan (no new message of its own)
    gets the request to continue as its message. (The same run started again finds its own
    message, and is that turn resumed.)"""
    human = latest_human_message(state.messages)
    config = get_config()
    identity = identity_of(config, deps.checkpoints)
    history = list(state.messages)
    asked = continue_request(identity, deps.prompts) if state.continuePlan else None
    if asked is not None and (human is None or human.id == state.turnMessageId != asked.id):
        human = asked
        history.append(human)
    context = runtime.context or Context()
    return PlanRun(state, context, config, identity, human, history, asked)


async def plan_facts(deps: SupervisorDeps, run: PlanRun) -> tuple[PlanRun, PlanFacts]:
    """The run with the turn its input was already sent in, and the facts its route is chosen
    from; the question and approval are looked up only when the route depends on them."""
    state, human = run.state, run.human
    resent = None
    if human is not None:
        resent = await resumed_turn_of_run(
            deps.database, state, run.identity, run.context, run.config
        )
    facts = PlanFacts(
        has_message=human is not None,
        message_has_id=human is not None and bool(human.id),
        same_message=human is not None and human.id == state.turnMessageId,
        resent_here=resent == state.turnId,
        running=state.turnStatus == "running" and bool(state.turnId),
    )
    run = replace(run, resent=resent)
    if human is None or not needs_lookups(facts):
        return run, facts
    question = pending_question(state.messages, human)
    shown = question is not None and await question_was_asked(
        deps.database, state.conversationId, question.record_id
    )
    awaiting = not shown and await approval_awaited(deps, state)
    return run, replace(facts, question_shown=shown, awaiting_approval=awaiting)


async def approval_awaited(deps: SupervisorDeps, state: SupervisorState) -> bool:
    """Whether the running turn has a plan still waiting for the user's approval."""
    if not state.approvePlan or state.planApproved:
        return False
    plan = TurnPlan(deps.database, TurnScope(state.conversationId, state.turnId))
    open_items, _ = await plan.rows(["pending", "in_progress"])
    return awaiting_approval(state.approvePlan, state.planApproved, open_items)


def copy_dropped(run: PlanRun) -> dict[str, Any]:
    """This run's input again on a checkpoint inside its turn (``agent.turn.resume``): a copy
    of the turn's message with a new id leaves the history."""
    human = run.human
    assert human is not None
    if human.id == run.state.turnMessageId:
        return {}
    return {"messages": [RemoveMessage(id=human.id or "")]}


async def resume_turn(deps: SupervisorDeps, run: PlanRun) -> dict[str, Any]:
    """``PlanRoute.RESUME``: the running turn goes on, catching up."""
    return {**await resumed_turn_update(deps.database, run.state), **copy_dropped(run)}


async def keep_ended(deps: SupervisorDeps, run: PlanRun) -> dict[str, Any]:
    """``PlanRoute.KEEP_ENDED``: a server retry of a run that had finished; the turn stays as
    it ended."""
    return copy_dropped(run)


async def no_request(deps: SupervisorDeps, run: PlanRun) -> dict[str, Any]:
    """``PlanRoute.NO_REQUEST``: a run with no new human message (empty input on an existing
    thread) is not a turn: re-running a finished one would resume its rows (seed 004)."""
    return {"messages": [AIMessage(content=NO_REQUEST)], "turnStatus": "failed"}


async def answer_question(deps: SupervisorDeps, run: PlanRun) -> dict[str, Any]:
    """``PlanRoute.ANSWER_QUESTION``: the message is the result of the ``ask_user`` call."""
    assert run.human is not None
    question = pending_question(run.state.messages, run.human)
    assert question is not None
    return answer_with_message(question, run.human)


async def decide_approval(deps: SupervisorDeps, run: PlanRun) -> dict[str, Any]:
    """``PlanRoute.DECIDE_APPROVAL``: the message approves the plan, or says what to change."""
    state, human = run.state, run.human
    assert human is not None
    plan = TurnPlan(deps.database, TurnScope(state.conversationId, state.turnId))
    decision = decision_from_message(message_text(human))
    update = await apply_decision(plan, decision, plan_limits(run.context), deps.prompts)
    return decided_by_message(human, decision, update, deps.prompts)


def turn_start_fields(named: TurnScope, human: HumanMessage, context: Context) -> dict[str, Any]:
    """Every per-turn field as a new turn starts: each one written, so a turn never reads a
    value an earlier turn left."""
    return {
        "conversationId": named.conversation_id,
        "turnId": named.turn_id,
        "turnRequest": message_text(human),
        "turnMessageId": human.id or "",
        "llmCalls": 0,
        "promptTokens": 0,
        "completionTokens": 0,
        "usageEstimated": False,
        "rowUsage": {},
        "idleRounds": 0,
        "idleCalls": [],
        "progressMark": "",
        "remindersInARow": 0,
        "planApproved": False,
        "approvePlan": context.approve_plan,
        "iterationBudget": context.base_iterations,
        "turnStatus": "running",
        "turnStep": 0,
        "catchUpTo": 0,
        "todos": [],
        "toolErrors": 0,
        "verifierCalls": 0,
        "verifierTokens": 0,
        "auditCalls": 0,
        "auditTokens": 0,
        "evidenceLog": [],
        "modifiedTasks": [],
        "workerLlmCalls": [],
        "workerUsage": [],
    }


def with_turn_message(turn_start: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    """``update`` with the turn's own message (when this run added it) before its messages."""
    return {**update, "messages": [*turn_start.get("messages", []), *update["messages"]]}


async def refused_continuation(
    deps: SupervisorDeps, run: PlanRun, named: TurnScope
) -> dict[str, Any] | None:
    """The refusal of a continuation that would make the plan too long (nothing begun, nothing
    copied), else None."""
    state, context = run.state, run.context
    if not state.continuePlan or context.planning == "off":
        return None
    try:
        too_long = await continuation_problem(deps.database, named, plan_limits(context))
    except ToolFailure as failure:
        return end_turn_with_failure(failure.message, None, prompts=deps.prompts)
    if too_long is None:
        return None
    added = [] if run.human is run.asked else run_messages(run.history, state.turnMessageId)
    return refused_input(too_long, added)


async def new_turn(deps: SupervisorDeps, run: PlanRun) -> dict[str, Any]:
    """``PlanRoute.NEW_TURN``: name the turn, claim its first step, then make its first call."""
    state, context, human = run.state, run.context, run.human
    assert human is not None
    named = TurnScope(
        conversation_id=conversation_id_of(
            context.conversation_id, run.config, state.conversationId
        ),
        # A server retry whose checkpoint is older than its turn: the turn it began.
        turn_id=run.resent or turn_id_of(human),
    )
    refused = await refused_continuation(deps, run, named)
    if refused is not None:
        return refused
    turn_start = turn_start_fields(named, human, context)
    try:
        claim = await begin_turn(
            deps.database,
            named,
            message_id=human.id or "",
            identity=run.identity,
            user_id=acting_user(context.user_id, run.config),
            # The state's turn is the one before this on the thread's branch.
            previous_turn=(state.turnId or None) if state.turnId != named.turn_id else None,
        )
    except TurnRefused as refused_turn:
        return end_turn_with_failure(str(refused_turn), None, turn_start, deps.prompts)
    except ToolFailure as failure:
        return end_turn_with_failure(failure.message, None, turn_start, prompts=deps.prompts)
    turn_start.update(claim.update())
    if len(run.history) > len(state.messages):
        turn_start["messages"] = [human]
    if state.continuePlan and context.planning == "off":
        # The copies would be rows no step of this run may close (no plan tools): declined
        # before anything is copied, so the open rows stay where they are.
        reason = deps.prompts.load("continue_needs_planning")
        return with_turn_message(
            turn_start, end_turn_with_failure(reason, None, turn_start, prompts=deps.prompts)
        )
    return await first_step(deps, run, claim, turn_start)


async def first_step(
    deps: SupervisorDeps, run: PlanRun, claim: TurnClaim, turn_start: dict[str, Any]
) -> dict[str, Any]:
    """The new turn's first LLM call, with the rows it continues (``continuePlan``) or the
    titles of rows earlier turns left open, and what superseded turns had done."""
    context, human = run.context, run.human
    assert human is not None
    open_elsewhere: tuple[str, ...] = ()
    try:
        # Before the open rows are read: a stopped run's rows are closed, not offered.
        superseded = await close_superseded(
            deps, claim.scope, run.identity, continuing=run.state.continuePlan
        )
        if run.state.continuePlan:
            limits = plan_limits(context)
            continued = await continue_open_rows(deps.database, claim.scope, None, limits)
            claim = replace(claim, rows=continued.change.rows)
            if not claim.rows:
                return nothing_to_continue(turn_start, deps.prompts)
            turn_start["todos"] = [row.to_dict() for row in claim.rows]
        elif deps.offers_continue(context):
            open_elsewhere = tuple(await open_titles_elsewhere(deps.database, claim.scope))
    except ToolFailure as failure:
        return with_turn_message(
            turn_start,
            end_turn_with_failure(failure.message, None, turn_start, prompts=deps.prompts),
        )
    if claim.rows is not None:
        # For this step's tools, or drain if the model answers (agent.turn.rows_handoff).
        handed = hand_over(turn_start["todos"], claim.scope, claim.step, claim.rows, shown=True)
        turn_start.update(handed)
    view = TurnView(
        scope=claim.scope,
        llm_calls=0,
        turn_request=turn_start["turnRequest"],
        turn_message_id=human.id,
        rows=claim.rows,
        claimed_step=claim.step,
        retaken=claim.retaken,
        open_elsewhere=open_elsewhere,
        superseded=superseded,
    )
    required = "create_todo" if context.planning == "always" and not claim.rows else None
    update = await model_step(deps, run.history, view, context, turn_start, required_tool=required)
    if "messages" in turn_start:  # the turn's own message goes before the step's answer
        update["messages"] = [*turn_start["messages"], *update.get("messages", [])]
    return update


Route = Callable[[SupervisorDeps, PlanRun], Awaitable[dict[str, Any]]]
ROUTES: dict[PlanRoute, Route] = {
    PlanRoute.RESUME: resume_turn,
    PlanRoute.KEEP_ENDED: keep_ended,
    PlanRoute.NO_REQUEST: no_request,
    PlanRoute.ANSWER_QUESTION: answer_question,
    PlanRoute.DECIDE_APPROVAL: decide_approval,
    PlanRoute.NEW_TURN: new_turn,
}
"""One function per route (``agent.nodes.plan_route``)."""


async def plan_turn(
    deps: SupervisorDeps, state: SupervisorState, runtime: Runtime[Context]
) -> dict[str, Any]:
    """A ``plan`` step with no plan edits: gather the facts, choose the route, run it. A
    database failure before a new turn begins ends the turn saying so; a new turn handles its
    own (its update then carries the turn's fields)."""
    run = read_plan_run(deps, state, runtime)
    try:
        if state.turnId:  # the turn the state names, before its rows are read
            await refuse_another_users_turn(deps.database, state.conversationId, run.context)
        run, facts = await plan_facts(deps, run)
        route = choose_plan_route(facts)
        if route is not PlanRoute.NEW_TURN:
            return await ROUTES[route](deps, run)
    except ToolFailure as failure:
        return end_turn_with_failure(failure.message, None, prompts=deps.prompts)
    return await new_turn(deps, run)


def make_plan_node(deps: SupervisorDeps) -> SupervisorNode:
    async def plan_step(state: SupervisorState, *, runtime: Runtime[Context]) -> dict[str, Any]:
        """Every ``plan`` update empties ``planEdits`` (an input, taken once) and says what
        this run's edits did (None: it sent none) and whether its input was refused, so
        ``after_plan`` reads this run's. An empty list is edits sent, and refused."""
        context = runtime.context or Context()
        human = latest_human_message(state.messages)
        new_message = human is not None and bool(human.id) and human.id != state.turnMessageId
        added = run_messages(state.messages, state.turnMessageId) if new_message else []
        problem = input_problem(state.continuePlan, added, context)
        if problem is not None:  # refused before any work: agent.turn.run_input
            return {**refused_input(problem, added), "planEdits": None}
        edits_sent = state.planEdits is not None
        if edits_sent and not new_message:
            update = await edit_plan(deps, state, context)
        else:
            update = await plan_turn(deps, state, runtime)
            # A request to continue is this run's alone: the next run continues only if it asks.
            if state.continuePlan:
                update = {**update, "continuePlan": False}
            update.setdefault("planEditResult", EDITS_WITH_MESSAGE if edits_sent else None)
        return {"inputError": None, **update, "planEdits": None}

    return plan_step
