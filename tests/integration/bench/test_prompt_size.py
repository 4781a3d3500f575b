"""``bench.prompt_size`` measures what the N-item turn sends, and its split adds up."""

from __future__ import annotations

from bench.prompt_size import CallSize, chars, report, split_request, turn_requests
from tests.scripted_openai import ScriptedOpenAIServer

N = 3


async def test_every_request_splits_into_parts_that_add_up_to_its_size(
    scripted_openai: ScriptedOpenAIServer,
) -> None:
    bodies = await turn_requests(N, scripted_openai)

    assert len(bodies) == N + 2
    sizes = [split_request(body) for body in bodies]
    for body, size in zip(bodies, sizes, strict=True):
        assert size.total == chars(body)
        assert min(size.tools, size.system, size.window, size.envelope) > 0
    assert sizes[0].plan_view == 0  # the planning call: no plan yet
    assert all(size.plan_view > 0 for size in sizes[1:])

    text = report(N, sizes)
    assert f"{sum(size.total for size in sizes):,} characters" in text
    for part in ("tools", "system", "plan view", "window", "envelope"):
        assert f"| {part} |" in text


def test_a_plan_view_inside_the_system_prompt_is_counted_as_plan_view() -> None:
    view = "## Current plan of this turn (0 of 1 items closed)\n- [>] a (id x)"
    body = {
        "model": "m",
        "messages": [
            {"role": "system", "content": f"Be brief.\n\n{view}"},
            {"role": "user", "content": "do a"},
        ],
        "tools": [],
    }
    size = split_request(body)
    assert size == CallSize(
        tools=2,
        system=chars(body["messages"][0]) - (len(view) + 1),
        plan_view=len(view) + 1,  # its one "\n" is sent escaped, as two characters
        window=chars(body["messages"][1]),
        envelope=size.envelope,
    )
    assert size.total == chars(body)
