"""How much of each LLM call's prompt repeats the previous call's from the start.

Prompt caches (OpenAI's, Anthropic's, vLLM's and llama.cpp's prefix caching) reuse work only for
the longest prefix a prompt shares with one seen before, so a prompt that changes near its start
pays for almost all of it again on every call, however much of it is unchanged further on.

The prompt is taken as a server would render it from the request body: the tool schemas first,
in the order sent, then the messages in order. Each schema and each message is written as
canonical JSON (sorted keys, as the scripted server's ``usage`` count), one per line, so the
fraction is in the same characters the token figures are counted in and does not depend on the
client's key order.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from typing import Any

from bench.wire import Body


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def rendered_prompt(body: Body) -> str:
    """The prompt of one chat-completions request: tool schemas, then messages, one a line."""
    parts = [*(body.get("tools") or []), *(body.get("messages") or [])]
    return "\n".join(_canonical(part) for part in parts)


def common_prefix_length(first: str, second: str) -> int:
    """Characters the two strings share from the start.

    A binary search over slice comparisons (done in C), because the longest prompts here are
    hundreds of thousands of characters and a turn has up to 150 calls."""
    low, high = 0, min(len(first), len(second))
    while low < high:
        middle = (low + high + 1) // 2
        if first[:middle] == second[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def shared_prefix_fractions(bodies: Sequence[Body]) -> list[float]:
    """For each call after the first: the share of its prompt equal to the previous call's
    prompt from the start (0 to 1)."""
    prompts = [rendered_prompt(body) for body in bodies]
    return [
        common_prefix_length(previous, current) / len(current) if current else 1.0
        for previous, current in itertools.pairwise(prompts)
    ]


def mean_shared_prefix(bodies: Sequence[Body]) -> float | None:
    """The turn's mean of ``shared_prefix_fractions``; None for a turn of one call."""
    fractions = shared_prefix_fractions(bodies)
    return sum(fractions) / len(fractions) if fractions else None
