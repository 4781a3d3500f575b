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

from dataclasses import replace
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage
from langgraph.config import get_config
from langgraph.runtime import Runtime

from agent.auth import acting_user
from agent.context import Context
from agent.errors import ErrorCode, ToolFailure
from agent.nodes import SupervisorNode
from agent.nodes.deps import SupervisorDeps
from agent.nodes.model_step import TurnView, end_turn_with_failure, model_step
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
from agent.turn.lineage import RunIdentity, TurnRefused, begin_turn, identity_of
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
from prompts import load_prompt
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
    identity = identity_of(get_config())
    try:
        result = await apply_plan_edits(
            deps.database,
            scope,
            state.planEdits,
            plan_limits(context),
            user_id=acting_user(context.user_id, get_config()),
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


def continue_request(identity: RunIdentity) -> HumanMessage:
    """The message of a turn that only asks to continue the plan (``continuePlan`` with no
    message of its own). Its id comes from the run (the server's run, else the LangGraph
    task), so the same run started again names the same turn."""
    return HumanMessage(
        content=load_prompt("continue_request"),
        id=f"continue-{identity.run_id or identity.task_id}",
    )


def nothing_to_continue(turn_start: dict[str, Any]) -> dict[str, Any]:
    """The turn's answer when it was asked to continue a plan and no earlier turn left rows
    open: it says so, and nothing is planned."""
    answer = AIMessage(content=load_prompt("nothing_to_continue"))
    return {
        **turn_start,
        "messages": [*turn_start.get("messages", []), answer],
        "turnStatus": "answered",
    }


async def close_superseded(deps: SupervisorDeps, scope: TurnScope, identity: RunIdentity) -> str:
    """Close the open rows of the turns a newer run rolled back or interrupted, on the server
    (``agent.turn.superseded``), and return the note telling this turn about them. The turn
    that starts now does it: the stopped run cannot, and nothing else runs on the thread."""
    if deps.run_fates is None:
        return ""
    turns = await close_superseded_turns(
        deps.database,
        scope,
        thread_id=identity.thread_id,
        run_id=identity.run_id,
        fates=deps.run_fates,
    )
    return superseded_note(turns)


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
            update = await plan(state, runtime=runtime)
            update.setdefault("planEditResult", EDITS_WITH_MESSAGE if edits_sent else None)
        return {"inputError": None, **update, "planEdits": None}

    async def plan(state: SupervisorState, *, runtime: Runtime[Context]) -> dict[str, Any]:
        update = await plan_turn(state, runtime)
        # A request to continue is this run's alone: the next run continues only if it asks.
        return {**update, "continuePlan": False} if state.continuePlan else update

    async def plan_turn(state: SupervisorState, runtime: Runtime[Context]) -> dict[str, Any]:
        context = runtime.context or Context()
        human = latest_human_message(state.messages)
        config = get_config()
        identity = identity_of(config, deps.checkpoints)
        history = list(state.messages)
        asked = continue_request(identity) if state.continuePlan else None
        if asked is not None and (human is None or human.id == state.turnMessageId != asked.id):
            # Continue the plan, and nothing else: the turn's message says so. (The same run
            # started again finds its own message, and is that turn resumed, below.)
            human = asked
            history.append(human)
        running = state.turnStatus == "running" and bool(state.turnId)
        try:
            resent = (
                await resumed_turn_of_run(deps.database, state, identity, context, config)
                if human is not None
                else None
            )
            if human is not None and (resent == state.turnId or human.id == state.turnMessageId):
                # This run's input again on a checkpoint inside its turn (agent.turn.resume): a
                # copy with a new id is dropped; a running turn goes on, catching up; an ended
                # one (a server retry of a run that had finished) stays as it ended. The same
                # message from another run is no new request (below).
                again = resent == state.turnId or (running and human.id == state.turnMessageId)
                dropped = human.id != state.turnMessageId
                update: dict[str, Any] = (
                    {"messages": [RemoveMessage(id=human.id or "")]} if dropped else {}
                )
                if again and running:
                    return {**await resumed_turn_update(deps.database, state), **update}
                if again:
                    return update
        except ToolFailure as failure:
            return end_turn_with_failure(failure.message, None)
        # A run with no new human message (empty input on an existing thread) is not a turn:
        # re-running a finished one would resume its rows, which seed 004 rules out.
        if human is None or (human.id and human.id == state.turnMessageId):
            return {"messages": [AIMessage(content=NO_REQUEST)], "turnStatus": "failed"}
        if state.turnStatus == "running" and state.turnId:
            question = pending_question(state.messages, human)
            try:
                shown = question is not None and await question_was_asked(
                    deps.database, state.conversationId, question.record_id
                )
            except ToolFailure as failure:
                return end_turn_with_failure(failure.message, None)
            if question is not None and shown:
                return answer_with_message(question, human)
            if state.approvePlan and not state.planApproved:
                plan = TurnPlan(deps.database, TurnScope(state.conversationId, state.turnId))
                decision = decision_from_message(message_text(human))
                try:
                    open_items, _ = await plan.rows(["pending", "in_progress"])
                    if awaiting_approval(state.approvePlan, state.planApproved, open_items):
                        update = await apply_decision(plan, decision, plan_limits(context))
                        return decided_by_message(human, decision, update)
                except ToolFailure as failure:
                    return end_turn_with_failure(failure.message, None)
        named = TurnScope(
            conversation_id=conversation_id_of(
                context.conversation_id, config, state.conversationId
            ),
            # A server retry whose checkpoint is older than its turn: the turn it began.
            turn_id=resent or turn_id_of(human),
        )
        if state.continuePlan and context.planning != "off":
            try:
                too_long = await continuation_problem(deps.database, named, plan_limits(context))
            except ToolFailure as failure:
                return end_turn_with_failure(failure.message, None)
            if too_long is not None:  # nothing begun, nothing copied
                added = [] if human is asked else run_messages(history, state.turnMessageId)
                return refused_input(too_long, added)
        request = message_text(human)
        turn_start: dict[str, Any] = {
            "conversationId": named.conversation_id,
            "turnId": named.turn_id,
            "turnRequest": request,
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
        try:
            claim = await begin_turn(
                deps.database,
                named,
                message_id=human.id or "",
                identity=identity,
                user_id=acting_user(context.user_id, config),
                # The state's turn is the one before this on the thread's branch.
                previous_turn=(state.turnId or None) if state.turnId != named.turn_id else None,
            )
        except TurnRefused as refused:
            return end_turn_with_failure(str(refused), None, turn_start)
        except ToolFailure as failure:
            return end_turn_with_failure(failure.message, None, turn_start)
        turn_start.update(claim.update())
        if history is not state.messages and len(history) > len(state.messages):
            turn_start["messages"] = [human]
        open_elsewhere: tuple[str, ...] = ()
        superseded = ""
        if state.continuePlan and context.planning == "off":
            # The copies would be rows no step of this run may close (no plan tools): declined
            # before anything is copied, so the open rows stay where they are.
            declined = end_turn_with_failure(
                load_prompt("continue_needs_planning"), None, turn_start
            )
            return {
                **declined,
                "messages": [*turn_start.get("messages", []), *declined["messages"]],
            }
        try:
            # Before the open rows are read: a stopped run's rows are closed, not offered.
            superseded = await close_superseded(deps, claim.scope, identity)
            if state.continuePlan:
                limits = plan_limits(context)
                continued = await continue_open_rows(deps.database, claim.scope, None, limits)
                claim = replace(claim, rows=continued.change.rows)
                if not claim.rows:
                    return nothing_to_continue(turn_start)
                turn_start["todos"] = [row.to_dict() for row in claim.rows]
            elif deps.offers_continue(context):
                open_elsewhere = tuple(await open_titles_elsewhere(deps.database, claim.scope))
        except ToolFailure as failure:
            failed = end_turn_with_failure(failure.message, None, turn_start)
            return {**failed, "messages": [*turn_start.get("messages", []), *failed["messages"]]}
        if claim.rows is not None:
            # For this step's tools, or drain if the model answers (agent.turn.rows_handoff).
            handed = hand_over(turn_start["todos"], claim.scope, claim.step, claim.rows, shown=True)
            turn_start.update(handed)
        view = TurnView(
            scope=claim.scope,
            llm_calls=0,
            turn_request=request,
            turn_message_id=human.id,
            rows=claim.rows,
            claimed_step=claim.step,
            retaken=claim.retaken,
            open_elsewhere=open_elsewhere,
            superseded=superseded,
        )
        required = "create_todo" if context.planning == "always" and not claim.rows else None
        update = await model_step(deps, history, view, context, turn_start, required_tool=required)
        if "messages" in turn_start:  # the turn's own message goes before the step's answer
            update["messages"] = [*turn_start["messages"], *update.get("messages", [])]
        return update

    return plan_step
