"""The N-item turn: one domain tool, N independent actions, one user request.

The domain tool is deliberately trivial (it records its argument) so that every cost measured
is the agent framework's, not the tool's. Each run gets its own ``ActionLog`` so the benchmark
can check that a system really did every item exactly once before its figures count.
"""

from __future__ import annotations

import itertools
import json
import math
from dataclasses import dataclass, field
from typing import Any

from langchain_core.tools import BaseTool, StructuredTool

ACTION_TOOL = "do_item"
"""Name of the domain tool every oracle calls once per item."""


def titles_for(n: int) -> list[str]:
    """The N item titles of the request, short and distinct."""
    return [f"item {i:02d}" for i in range(1, n + 1)]


def request_for(titles: list[str]) -> str:
    """The user's request: N independent actions of the one domain tool."""
    listed = ", ".join(titles)
    return f"Please run do_item once for each of these {len(titles)} items: {listed}."


def action(title: str) -> tuple[str, dict[str, Any]]:
    """The oracle's tool call that does one item: (tool name, arguments)."""
    return ACTION_TOOL, {"item": title}


@dataclass
class ActionLog:
    """Items the domain tool was called with, in call order."""

    done: list[str] = field(default_factory=list)

    def tool(self) -> BaseTool:
        """A fresh ``do_item`` tool writing to this log."""

        async def do_item(item: str) -> str:
            self.done.append(item)
            return json.dumps({"done": item})

        return StructuredTool.from_function(
            coroutine=do_item,
            name=ACTION_TOOL,
            description="Run the action for one item (the benchmark's domain tool).",
        )

    def did_each_once(self, titles: list[str]) -> bool:
        return sorted(self.done) == sorted(titles)


def layers_of(titles: list[str]) -> list[list[int]]:
    """The dependency-graph scenario (issue 30): the items in layers of ``ceil(sqrt(N))``, each
    item needing the result of every item of the layer before it (N = 4: A -> (B, C) -> D is
    the smallest diamond; N = 20: 4 layers of 5). Indexes into ``titles``."""
    if len(titles) == 4:
        return [[0], [1, 2], [3]]
    width = max(1, math.ceil(math.sqrt(len(titles))))
    return [list(range(i, min(i + width, len(titles)))) for i in range(0, len(titles), width)]


def blockers_of(titles: list[str]) -> list[list[int]]:
    """Each item's ``blockedBy``: every item of the layer before its own."""
    blocked: list[list[int]] = [[] for _ in titles]
    layers = layers_of(titles)
    for before, layer in itertools.pairwise(layers):
        for index in layer:
            blocked[index] = list(before)
    return blocked
