"""A compact worker's step without its model: the planned action its hand-over carries.

Why: a worker's own loop leaves the small model a free choice of tools and words, which it
did not use (measured: the 270M model answered without calling a tool). The item handed over
names its action, so the worker makes that call as the supervisor would and answers from
what it returned (``agent.prompting.compact_outcomes``).
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langchain_core.tools import BaseTool

from agent.prompting.compact_act import planned_action_binding
from agent.prompting.compact_outcomes import direct_answer, since_last_todo_result
from agent.prompting.compact_plan import PlannedAction, stored_action
from prompts import Prompts


def worker_step(
    tools: Sequence[BaseTool], history: Sequence[AnyMessage], prompts: Prompts | None = None
) -> AIMessage | None:
    """A compact worker's next message without its model, or None to ask the model.

    The item handed over carries the plan's action in its context (``PlannedAction``):
    the worker makes that call as the supervisor would (its lookup first, for an action on an
    existing task), then answers with what it returned. Why: the worker's own loop leaves the
    small model a free choice of tools and words, which it did not use (measured: the 270M
    model answered without calling a tool)."""
    hand_over = next((m for m in reversed(history) if isinstance(m, HumanMessage)), None)
    if hand_over is None:
        return None
    by_name = {tool.name: tool for tool in tools}
    action = next(
        (
            found
            for line in hand_over.text.splitlines()
            if (found := _line_action(line)) is not None and found.tool in by_name
        ),
        None,
    )
    if action is None:
        return None
    if since_last_todo_result(history):
        return AIMessage(content=direct_answer(history, prompts=prompts))
    return planned_action_binding(
        by_name[action.tool], action, tools, history, prompts=prompts
    ).reply


def _line_action(line: str) -> PlannedAction | None:
    """The action on the hand-over's ``Context:`` line (``prompts/worker_request.md``): only
    there, never in the user's request quoted below it."""
    return stored_action(line.split(":", 1)[1]) if line.startswith("Context:") else None
