"""How a ``create_agent`` run starts, or goes on with, its turn (``before_agent``).

The newest human message names the turn, as in the supervisor graph's ``plan`` node
(``agent.turn.identity``); the conversation is the context's ``conversation_id``, else the
thread. The turn is recorded in ``turns`` (``agent.turn.lineage.begin_turn``: the conversation's
owner, a replay of a whole turn on another run as a fork with a plan of its own). The same
message again while its turn runs (an interrupt resumed, a retried run) is that turn going on.
A new message while the turn's plan waits for approval is the user's decision on it.

On a LangGraph server (``run_fates`` given) a new turn first closes the open rows of earlier
turns whose run a newer run rolled back or interrupted (``agent.turn.superseded``), as the
supervisor graph's ``plan`` node does; the note on what those runs left undone and what stays
done goes to the turn's first model call (``supersededNote``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.config import get_config

from agent.auth import acting_user
from agent.context import Context
from agent.errors import ToolFailure
from agent.turn.approval import (
    apply_decision,
    awaiting_approval,
    decided_by_message,
    decision_from_message,
)
from agent.turn.identity import conversation_id_of, latest_human_message, message_text, turn_id_of
from agent.turn.lineage import TurnRefused, begin_turn, identity_of
from agent.turn.outcome import turn_failed_message
from agent.turn.ownership import TURN_REFUSED, refuse_another_users_conversation
from agent.turn.plan_rows import TurnPlan, plan_limits
from agent.turn.superseded import RunFates, close_superseded_turns, superseded_note
from prompts import Prompts
from storage import Database
from storage.models import OPEN_TODO_STATUSES
from storage.repositories import TurnScope

NO_REQUEST = "There is no new message to answer: send a human message to start a turn."


def ended(text: str, status: str) -> dict[str, Any]:
    """The update that ends the run at once with ``text``."""
    return {"messages": [AIMessage(content=text)], "turnStatus": status, "jump_to": "end"}


async def decide_by_message(
    database: Database,
    state: Mapping[str, Any],
    human: HumanMessage,
    settings: Context,
    prompts: Prompts | None = None,
) -> dict[str, Any] | None:
    """A message sent while the turn's plan waits for approval answers it (a plain yes
    approves, anything else rejects with its words: ``agent.turn.approval``); None when no
    plan waits."""
    scope = TurnScope(state.get("conversationId", ""), state.get("turnId", ""))
    plan = TurnPlan(database, scope)
    config = get_config()
    try:
        # A state edited to name another user's turn reads nothing of it (agent.turn.ownership).
        user = acting_user(settings.user_id, config)
        await refuse_another_users_conversation(
            database, scope.conversation_id, user, config, refused=TURN_REFUSED
        )
        open_items, _ = await plan.rows(list(OPEN_TODO_STATUSES))
        if not awaiting_approval(True, False, open_items):
            return None
        decision = decision_from_message(message_text(human))
        update = await apply_decision(plan, decision, plan_limits(settings), prompts)
    except ToolFailure as failure:
        return ended(turn_failed_message(failure.message, None, prompts), "failed")
    return decided_by_message(human, decision, update, prompts)


async def start_turn(
    database: Database,
    state: Mapping[str, Any],
    settings: Context,
    prompts: Prompts | None = None,
    run_fates: RunFates | None = None,
) -> dict[str, Any] | None:
    """The state update that starts the turn of the newest human message (None: the turn
    already runs, this run goes on with it); ``prompts``: the middleware's texts;
    ``run_fates``: how to ask the server what became of a run (None: a Python caller, which
    has no server runs to be stopped)."""
    human = latest_human_message(state.get("messages", []))
    running = state.get("turnStatus") == "running"
    if human is not None and human.id == state.get("turnMessageId") and running:
        return None
    if human is None or human.id == state.get("turnMessageId"):
        return ended(NO_REQUEST, "failed")
    if running and state.get("approvePlan") and not state.get("planApproved"):
        decided = await decide_by_message(database, state, human, settings, prompts)
        if decided is not None:
            return decided
    config = get_config()
    named = TurnScope(
        conversation_id=conversation_id_of(
            settings.conversation_id, config, state.get("conversationId", "")
        ),
        turn_id=turn_id_of(human),
    )
    identity = identity_of(config)
    try:
        claim = await begin_turn(
            database,
            named,
            message_id=human.id or "",
            identity=identity,
            user_id=acting_user(settings.user_id, config),
            previous_turn=state.get("turnId") or None,
        )
        stopped = (
            await close_superseded_turns(
                database,
                claim.scope,
                thread_id=identity.thread_id,
                run_id=identity.run_id,
                fates=run_fates,
            )
            if run_fates is not None
            else []
        )
    except TurnRefused as refused:
        return ended(turn_failed_message(str(refused), None, prompts), "failed")
    except ToolFailure as failure:
        return ended(turn_failed_message(failure.message, None, prompts), "failed")
    return {
        "conversationId": claim.scope.conversation_id,
        "turnId": claim.scope.turn_id,
        "turnRequest": message_text(human),
        "turnMessageId": human.id or "",
        "turnStatus": "running",
        "llmCalls": 0,
        "promptTokens": 0,
        "completionTokens": 0,
        "usageEstimated": False,
        "rowUsage": {},
        "iterationBudget": settings.base_iterations,
        "remindersInARow": 0,
        "idleRounds": 0,
        "idleCalls": [],
        "progressMark": "",
        "approvePlan": settings.approve_plan,
        "planApproved": False,
        "todos": [],
        "modifiedTasks": [],
        "verifierCalls": 0,
        "verifierTokens": 0,
        "supersededNote": superseded_note(stopped, prompts),
        "turnRunId": identity.run_id,
    }
