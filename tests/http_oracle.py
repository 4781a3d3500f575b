"""The N-item oracle of tests.fakes, speaking through the scripted OpenAI-compatible server.

It decides from the request body alone (the plan view it is sent), exactly as a real model
behind ``ChatOpenAI`` would have to, so wire tests and benchmarks exercise the full HTTP path.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.fakes import plan_rows, plan_view
from tests.scripted_openai import Reply, text, tool_calls

Action = Callable[[str], tuple[str, dict[str, Any]]]


def plan_view_of(body: dict[str, Any]) -> str:
    """The plan view of an OpenAI request body ("" if none): ``tests.fakes.plan_view``."""
    return plan_view(body.get("messages") or [])


@dataclass
class HttpPlanOracle:
    """Plan every title and act on the first; then close one and act on the next per call."""

    titles: list[str]
    action: Action
    answer: str = "All done."

    def __call__(self, body: dict[str, Any]) -> Reply:
        rows = plan_rows(plan_view_of(body))
        if not rows:
            return tool_calls(
                ("create_todo", {"items": [{"title": t} for t in self.titles]}),
                self.action(self.titles[0]),
            )
        current = next((row for row in rows if row.mark == ">"), None)
        if current is None:
            return text(self.answer)
        calls = [("complete_todo", {"todoId": current.id, "outcome": f"did {current.title}"})]
        following = next((row for row in rows if row.mark == " "), None)
        if following is not None:
            calls.append(self.action(following.title))
        return tool_calls(*calls)


TURN_KEY = re.compile(r"\bturn ([A-Za-z0-9_-]+)")
"""How a lockstep request names its turn: ``... turn <key>`` in the user's message."""


def turn_key_of(body: dict[str, Any]) -> str:
    """The ``<key>`` of the first user message's ``turn <key>`` ("" if none)."""
    for message in body.get("messages") or []:
        if message.get("role") == "user":
            content = message.get("content")
            found = TURN_KEY.search(content if isinstance(content, str) else json.dumps(content))
            return found.group(1) if found else ""
    return ""


@dataclass
class LockstepOracle:
    """Many turns at once, in step: each plans ``rows`` rows titled ``<key> row <i>`` and adds one
    personal task per row with the row's title (``add_task``), then answers.

    The first call of each turn is held until ``expected`` turns have made theirs (or
    ``hold_seconds`` passed), so all runs get their model answers in bursts: the first burst plans
    and starts every turn, the k-th does every turn's k-th step. A task title is unique per turn
    and row, so a task added twice is a side effect repeated. ``on_answer`` is called with the
    running count of answers as each one is sent (the harness kills a worker from it).
    """

    expected: int
    rows: int = 3
    hold_seconds: float = 60.0
    on_answer: Callable[[int], None] | None = None
    answers: int = 0
    released: set[str] = field(default_factory=set)
    _arrived: set[str] = field(default_factory=set)
    _all_arrived: asyncio.Event | None = None

    def titles(self, key: str) -> list[str]:
        """The row titles (and task titles) of the turn ``key``."""
        return [f"{key} row {i}" for i in range(1, self.rows + 1)]

    async def __call__(self, body: dict[str, Any]) -> Reply:
        key = turn_key_of(body)
        if key not in self.released and not plan_rows(plan_view_of(body)):
            await self._hold(key)
        reply = HttpPlanOracle(self.titles(key), lambda t: ("add_task", {"title": t}))(body)
        self.answers += 1
        if self.on_answer is not None:
            self.on_answer(self.answers)
        return reply

    async def _hold(self, key: str) -> None:
        if self._all_arrived is None:
            self._all_arrived = asyncio.Event()
        self._arrived.add(key)
        if len(self._arrived) >= self.expected:
            self._all_arrived.set()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._all_arrived.wait(), self.hold_seconds)
        self.released.add(key)
