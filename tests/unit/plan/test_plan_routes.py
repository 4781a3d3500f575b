"""Which way a ``plan`` step goes: every route of ``choose_plan_route`` from the facts that
pick it, and the precedence between them (a resent input is never a new request; a question
shown wins over a plan awaiting approval)."""

from __future__ import annotations

import pytest

from agent.nodes.plan_route import PlanFacts, PlanRoute, choose_plan_route, needs_lookups

NEW_MESSAGE = {"has_message": True, "message_has_id": True, "same_message": False}
SAME_MESSAGE = {"has_message": True, "message_has_id": True, "same_message": True}

CASES = [
    # (what happens, facts, route)
    (
        "a retried run inside its running turn goes on",
        {**SAME_MESSAGE, "resent_here": False, "running": True},
        PlanRoute.RESUME,
    ),
    (
        "a copy of the input with a new id, turn running",
        {**NEW_MESSAGE, "resent_here": True, "running": True},
        PlanRoute.RESUME,
    ),
    (
        "a retried run whose turn ended stays ended",
        {**NEW_MESSAGE, "resent_here": True, "running": False},
        PlanRoute.KEEP_ENDED,
    ),
    (
        "no human message at all",
        {
            "has_message": False,
            "message_has_id": False,
            "same_message": False,
            "resent_here": False,
            "running": False,
        },
        PlanRoute.NO_REQUEST,
    ),
    (
        "the ended turn's own message again, from another run",
        {**SAME_MESSAGE, "resent_here": False, "running": False},
        PlanRoute.NO_REQUEST,
    ),
    (
        "an answer to the question the running turn asked",
        {**NEW_MESSAGE, "resent_here": False, "running": True, "question_shown": True},
        PlanRoute.ANSWER_QUESTION,
    ),
    (
        "a question shown wins over a plan awaiting approval",
        {
            **NEW_MESSAGE,
            "resent_here": False,
            "running": True,
            "question_shown": True,
            "awaiting_approval": True,
        },
        PlanRoute.ANSWER_QUESTION,
    ),
    (
        "a decision on the plan awaiting approval",
        {**NEW_MESSAGE, "resent_here": False, "running": True, "awaiting_approval": True},
        PlanRoute.DECIDE_APPROVAL,
    ),
    (
        "a new message on a running turn with nothing pending",
        {**NEW_MESSAGE, "resent_here": False, "running": True},
        PlanRoute.NEW_TURN,
    ),
    (
        "a new message after an ended turn",
        {**NEW_MESSAGE, "resent_here": False, "running": False},
        PlanRoute.NEW_TURN,
    ),
    (
        "looked-up facts count only on a running turn",
        {
            **NEW_MESSAGE,
            "resent_here": False,
            "running": False,
            "question_shown": True,
            "awaiting_approval": True,
        },
        PlanRoute.NEW_TURN,
    ),
    (
        "a message without an id after an ended turn is a new turn",
        {
            "has_message": True,
            "message_has_id": False,
            "same_message": True,
            "resent_here": False,
            "running": False,
        },
        PlanRoute.NEW_TURN,
    ),
]


@pytest.mark.parametrize(
    ("facts", "route"), [case[1:] for case in CASES], ids=[case[0] for case in CASES]
)
def test_each_run_takes_its_route(facts: dict[str, bool], route: PlanRoute) -> None:
    assert choose_plan_route(PlanFacts(**facts)) is route


def test_every_route_is_reachable() -> None:
    assert {case[2] for case in CASES} == set(PlanRoute)


@pytest.mark.parametrize(
    ("facts", "looked_up"),
    [
        ({**NEW_MESSAGE, "resent_here": False, "running": True}, True),
        ({**NEW_MESSAGE, "resent_here": False, "running": False}, False),
        ({**SAME_MESSAGE, "resent_here": False, "running": True}, False),
        ({**NEW_MESSAGE, "resent_here": True, "running": True}, False),
    ],
    ids=["new message, running turn", "turn ended", "resumed", "resent"],
)
def test_question_and_approval_are_read_only_for_a_new_message_on_a_running_turn(
    facts: dict[str, bool], looked_up: bool
) -> None:
    assert needs_lookups(PlanFacts(**facts)) is looked_up
