"""The stable part of every request (tool schemas, then the system prompt) is byte-identical
across the calls of a phase (planning, then working the plan), so provider prompt caches and
llama.cpp's prefix cache hit; the request and the plan follow it, and the newest work comes
last, without the plan calls the plan view already reports."""

from __future__ import annotations

import itertools
import json

from bench.prefix import common_prefix_length, rendered_prompt
from bench.prompt_size import turn_requests
from bench.scenario import request_for, titles_for
from tests.fakes import plan_rows, plan_view
from tests.scripted_openai import ScriptedOpenAIServer

N = 5


def _names(body: dict[str, object]) -> list[str]:
    return [tool["function"]["name"] for tool in body["tools"]]  # type: ignore[attr-defined]


async def test_tools_and_system_prompt_are_identical_on_every_call_of_a_phase(
    scripted_openai: ScriptedOpenAIServer,
) -> None:
    bodies = await turn_requests(N, scripted_openai)

    assert len(bodies) == N + 2
    working = {json.dumps([body["tools"], body["messages"][0]]) for body in bodies[1:]}
    assert len(working) == 1
    assert bodies[0]["messages"][0]["role"] == "system"
    # Planning binds create_todo, working the plan complete_todo and list_todo; the run's own
    # tools and ask_user come first in both, the same.
    planning, later = _names(bodies[0]), _names(bodies[1])
    assert planning[-1] == "create_todo" and "create_todo" not in later
    assert {"complete_todo", "list_todo"} <= set(later) and "complete_todo" not in planning
    assert planning[:-1] == later[: len(planning) - 1]


async def test_every_call_after_planning_sends_the_request_then_the_plan_then_the_new_work(
    scripted_openai: ScriptedOpenAIServer,
) -> None:
    bodies = await turn_requests(N, scripted_openai)
    request = request_for(titles_for(N))

    for body in bodies[1:]:
        messages = body["messages"]
        view = plan_view(messages)
        assert messages[1] == {"role": "user", "content": f"{request}\n\n{view}"}
        assert len(plan_rows(view)) == N
        assert sum(request in str(m.get("content")) for m in messages) == 1
        # The plan calls the view reports are not sent again, nor their results.
        calls = [call for m in messages for call in m.get("tool_calls") or []]
        assert all(call["function"]["name"] == "do_item" for call in calls)


async def test_rows_closed_on_earlier_calls_are_part_of_the_shared_prefix(
    scripted_openai: ScriptedOpenAIServer,
) -> None:
    bodies = await turn_requests(N, scripted_openai)

    for previous, current in itertools.pairwise(bodies[1:]):
        shared = rendered_prompt(previous)[
            : common_prefix_length(rendered_prompt(previous), rendered_prompt(current))
        ]
        closed = [row for row in plan_rows(plan_view(previous["messages"])) if row.mark == "x"]
        assert all(f"[x] {row.title}" in shared for row in closed)
