"""The benchmark's shared-prefix figure: how much of each prompt a prefix cache could reuse."""

from __future__ import annotations

from typing import Any

import pytest

from bench.prefix import (
    common_prefix_length,
    mean_shared_prefix,
    rendered_prompt,
    shared_prefix_fractions,
)

TOOL = {"type": "function", "function": {"name": "do_item", "parameters": {"type": "object"}}}


def body(system: str, *later: dict[str, Any]) -> dict[str, Any]:
    """A chat-completions request body with one tool, a system prompt and a user request."""
    return {
        "tools": [TOOL],
        "messages": [
            {"role": "system", "content": system},
            {"role": "user", "content": "Please run do_item for item 01."},
            *later,
        ],
    }


def test_common_prefix_length_counts_characters_up_to_the_first_difference() -> None:
    assert common_prefix_length("abcdef", "abcxef") == 3
    assert common_prefix_length("abc", "abcdef") == 3
    assert common_prefix_length("", "abc") == 0
    assert common_prefix_length("same", "same") == 4


def test_the_prompt_is_the_tool_schemas_then_the_messages() -> None:
    prompt = rendered_prompt(body("You plan."))

    lines = prompt.splitlines()
    assert len(lines) == 3
    assert '"do_item"' in lines[0]
    assert '"system"' in lines[1] and '"user"' in lines[2]


def test_identical_prompts_share_everything() -> None:
    bodies = [body("You plan."), body("You plan."), body("You plan.")]

    assert shared_prefix_fractions(bodies) == [1.0, 1.0]
    assert mean_shared_prefix(bodies) == 1.0


def test_a_change_in_the_system_prompt_leaves_only_the_tools_and_its_start_shared() -> None:
    first = body("You plan.\n## Current plan (0 of 1 items closed)\n- [>] item 01")
    second = body("You plan.\n## Current plan (1 of 1 items closed)\n- [x] item 01")

    (fraction,) = shared_prefix_fractions([first, second])

    current = rendered_prompt(second)
    first_difference = current.index("1 of 1")
    assert fraction == pytest.approx(first_difference / len(current))
    assert fraction < 0.6  # the user message after the plan view is paid for again


def test_a_prompt_that_only_appends_messages_shares_all_of_the_previous_one() -> None:
    call = {"role": "assistant", "content": None, "tool_calls": [{"id": "c1"}]}
    result = {"role": "tool", "tool_call_id": "c1", "content": '{"done": "item 01"}'}
    first = body("You plan.")
    second = body("You plan.", call, result)

    (fraction,) = shared_prefix_fractions([first, second])

    previous, current = rendered_prompt(first), rendered_prompt(second)
    assert current.startswith(previous)
    assert fraction == pytest.approx(len(previous) / len(current))


def test_prompts_diverging_only_at_the_end_share_almost_everything() -> None:
    first = body("You plan.", {"role": "tool", "tool_call_id": "c1", "content": "result A"})
    second = body("You plan.", {"role": "tool", "tool_call_id": "c1", "content": "result B"})

    (fraction,) = shared_prefix_fractions([first, second])

    current = rendered_prompt(second)
    assert fraction == pytest.approx(current.index("B") / len(current))
    assert fraction > 0.8


def test_the_turn_figure_is_the_mean_over_calls_after_the_first() -> None:
    first = body("You plan.")
    changed = body("You act.")

    fractions = shared_prefix_fractions([first, first, changed])

    assert fractions[0] == 1.0 and fractions[1] < 1.0
    assert mean_shared_prefix([first, first, changed]) == pytest.approx((1 + fractions[1]) / 2)
    assert mean_shared_prefix([first]) is None
