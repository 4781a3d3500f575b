"""The stable part of every request (tool schemas, then the system prompt) is byte-identical
across the calls of a turn, so provider prompt caches and llama.cpp's prefix cache hit; what
changes (history, plan) comes after it, and the plan and the request are still on every call."""

from __future__ import annotations

import json

from bench.prompt_size import turn_requests
from bench.scenario import request_for, titles_for
from tests.fakes import plan_rows, plan_view
from tests.scripted_openai import ScriptedOpenAIServer

N = 5


async def test_tools_and_system_prompt_are_identical_on_every_call_of_a_turn(
    scripted_openai: ScriptedOpenAIServer,
) -> None:
    bodies = await turn_requests(N, scripted_openai)

    assert len(bodies) == N + 2
    prefixes = {json.dumps([body["tools"], body["messages"][0]]) for body in bodies}
    assert len(prefixes) == 1
    assert bodies[0]["messages"][0]["role"] == "system"


async def test_every_call_after_planning_ends_with_the_plan_and_shows_the_request(
    scripted_openai: ScriptedOpenAIServer,
) -> None:
    bodies = await turn_requests(N, scripted_openai)
    request = request_for(titles_for(N))

    for body in bodies[1:]:
        messages = body["messages"]
        view = plan_view(messages)
        assert messages[-1] == {"role": "user", "content": view}
        assert len(plan_rows(view)) == N
        in_window = any(m.get("content") == request for m in messages[1:-1])
        assert in_window != (request in view)  # exactly once: in the history or in the view
