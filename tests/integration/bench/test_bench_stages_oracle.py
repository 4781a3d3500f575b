"""The turnplan-stages oracle decides from the plan view in the request alone: plan one stage
and act on every item, close every row in progress, answer; and never loops on a graph that
does something else."""

from __future__ import annotations

import json
import uuid
from typing import Any

from agent.prompting.builder import plan_view
from bench.run import all_systems
from bench.scenario import ACTION_TOOL, titles_for
from bench.systems.turnplan_stages import StagesOracle
from storage.models import TurnTodo
from tests.scripted_openai import Reply

TITLES = titles_for(3)


def row(title: str, status: str) -> TurnTodo:
    outcome = f"did {title}" if status in ("completed", "cancelled") else None
    return TurnTodo(
        id=str(uuid.uuid4()),
        title=title,
        status=status,
        outcome=outcome,
        context="",
        completionCriteria="",
    )


def request(rows: list[TurnTodo]) -> dict[str, Any]:
    """A chat-completions body whose system prompt carries turnplan's plan view of ``rows``."""
    system = "You are the supervisor."
    if rows:
        system += "\n\n" + plan_view(rows, "Please run do_item.", show_request=False)
    return {
        "tools": [],
        "messages": [
            {"role": "system", "content": system},
            {"role": "user", "content": "Please run do_item."},
        ],
    }


def calls(reply: Reply) -> list[tuple[str, dict[str, Any]]]:
    return [(name, json.loads(raw)) for name, raw in reply.tool_calls]


def test_call_one_plans_every_item_as_one_stage_and_acts_on_all_of_them() -> None:
    oracle = StagesOracle(TITLES)

    made = calls(oracle(request([])))

    (plan_name, plan_args), *actions = made
    assert plan_name == "create_todo"
    assert plan_args["items"] == [{"title": title, "order": 1} for title in TITLES]
    assert actions == [(ACTION_TOOL, {"item": title}) for title in TITLES]


def test_call_two_closes_every_row_in_progress_in_one_message() -> None:
    oracle = StagesOracle(TITLES)
    oracle(request([]))
    rows = [row(title, "in_progress") for title in TITLES]

    made = calls(oracle(request(rows)))

    assert [name for name, _ in made] == ["complete_todo"] * len(TITLES)
    assert [args["todoId"] for _, args in made] == [r.id for r in rows]
    assert all(args["outcome"] for _, args in made)
    assert oracle.problem == ""


def test_call_three_answers_when_no_row_is_open() -> None:
    oracle = StagesOracle(TITLES)
    oracle(request([]))
    in_progress = [row(title, "in_progress") for title in TITLES]
    oracle(request(in_progress))

    reply = oracle(request([row(title, "completed") for title in TITLES]))

    assert reply.content and not reply.tool_calls
    assert oracle.problem == ""


def test_rows_still_open_after_the_closes_are_all_closed_at_once_then_it_answers() -> None:
    # A graph that keeps one row in progress: only the first row of the stage was started.
    oracle = StagesOracle(TITLES)
    oracle(request([]))
    first = [row(TITLES[0], "in_progress"), row(TITLES[1], "pending"), row(TITLES[2], "pending")]

    assert [args["todoId"] for _, args in calls(oracle(request(first)))] == [first[0].id]
    assert oracle.problem == "the graph started 1 of 3 rows of the stage"

    first[0].status, first[0].outcome = "completed", "did item 01"
    first[1].status = "in_progress"
    closing = calls(oracle(request(first)))
    assert [args["todoId"] for _, args in closing] == [first[1].id, first[2].id]

    stuck = oracle(request(first))
    assert stuck.content and not stuck.tool_calls


def test_a_plan_that_never_appears_gets_an_answer_not_a_second_plan() -> None:
    oracle = StagesOracle(TITLES)
    oracle(request([]))

    reply = oracle(request([]))

    assert reply.content and not reply.tool_calls
    assert oracle.problem == "create_todo left no plan in the plan view"


def test_the_system_is_registered_with_the_others() -> None:
    names = [system.name for system in all_systems()]

    assert names[:2] == ["turnplan", "turnplan-stages"]
