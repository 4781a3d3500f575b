"""The N-item oracle of tests.fakes, speaking through the scripted OpenAI-compatible server.

It decides from the request body alone (the plan view it is sent), exactly as a real model
behind ``ChatOpenAI`` would have to, so wire tests and benchmarks exercise the full HTTP path.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
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
