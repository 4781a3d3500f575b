"""Which way a ``plan`` step goes, from plain facts about the run: one small pure function.

A run reaching ``plan`` with no plan edits is one of six things: its own input again (a server
retry, ``agent.turn.resume``) inside a turn still running, or inside one that ended; no new
request at all; the answer to a question the running turn asked; the user's decision on a plan
awaiting approval; or a new turn (which may continue earlier open rows). ``agent.nodes.plan``
gathers the facts and runs the route's own function; the choice itself is here, so a table of
facts and routes tests it whole.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class PlanRoute(StrEnum):
    """The ways a ``plan`` step can go (``agent.nodes.plan`` has one function for each)."""

    RESUME = "resume"
    """This run's input again, inside its turn that still runs: the turn goes on, catching up."""
    KEEP_ENDED = "keep_ended"
    """This run's input again, on a turn that has ended: it stays as it ended."""
    NO_REQUEST = "no_request"
    """No new human message: not a turn (seed 004 rules out resuming a finished one)."""
    ANSWER_QUESTION = "answer_question"
    """The message answers the question the running turn asked (``ask_user``)."""
    DECIDE_APPROVAL = "decide_approval"
    """The message approves or rejects the plan the running turn waits on."""
    NEW_TURN = "new_turn"
    """A new turn, with or without a continuation of earlier open rows."""


@dataclass(frozen=True, kw_only=True)
class PlanFacts:
    """What the choice reads. The two looked-up facts (``question_shown``,
    ``awaiting_approval``) are only looked up when the others point at a new message on a
    running turn (``needs_lookups``); otherwise they stay False and are not read."""

    has_message: bool
    """The run has a human message (its own, or the request to continue)."""
    message_has_id: bool
    same_message: bool
    """The message's id is the state's turn message id."""
    resent_here: bool
    """The run's input was already sent once inside the state's turn (``resumed_turn_of_run``)."""
    running: bool
    """The state's turn is running (and has an id)."""
    question_shown: bool = False
    awaiting_approval: bool = False


def needs_lookups(facts: PlanFacts) -> bool:
    """Whether the choice depends on the question and approval look-ups: a new message on a
    running turn. Other runs skip those reads."""
    return facts.running and choose_plan_route(facts) is PlanRoute.NEW_TURN


def choose_plan_route(facts: PlanFacts) -> PlanRoute:
    """The route of a ``plan`` step that applies no plan edits. Earlier checks win: a resent
    input is never a new request, a question shown wins over an approval pending."""
    if facts.has_message and (facts.resent_here or (facts.running and facts.same_message)):
        return PlanRoute.RESUME if facts.running else PlanRoute.KEEP_ENDED
    if not facts.has_message or (facts.message_has_id and facts.same_message):
        return PlanRoute.NO_REQUEST
    if facts.running and facts.question_shown:
        return PlanRoute.ANSWER_QUESTION
    if facts.running and facts.awaiting_approval:
        return PlanRoute.DECIDE_APPROVAL
    return PlanRoute.NEW_TURN
