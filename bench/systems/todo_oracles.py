"""Oracles for agents whose planning tool is LangChain's ``write_todos`` (TodoListMiddleware).

``write_todos(todos=[{"content", "status"}])`` replaces the whole list each call; the middleware
rejects two ``write_todos`` calls in one message but not ``write_todos`` next to other tools.
Its instructions allow several items ``in_progress`` at once when they are independent, and ask
for completions to be marked right after the work ("don't batch completions") and for the final
answer to come in the message after the last ``write_todos``.

- ``parallel_todo_oracle``, the cheapest legal path: write all N as ``in_progress`` and make all
  N actions in the same message; mark all N ``completed``; answer. 3 calls, whatever N.
- ``sequential_todo_oracle``, the same discipline turnplan enforces (one item at a time): write
  the list with item 1 in progress and act on it; then per call mark the current item completed,
  the next in progress, and act on it; mark the last completed; answer. N + 2 calls.

Both read only the request: the list is the arguments of the newest ``write_todos`` call.
"""

from __future__ import annotations

from typing import Any

from bench.scenario import ACTION_TOOL, action
from bench.wire import Body, Oracle, assistant_calls
from tests.scripted_openai import Reply, text, tool_calls

WRITE_TODOS = "write_todos"


def _todos(titles: list[str], status: str) -> list[dict[str, Any]]:
    return [{"content": title, "status": status} for title in titles]


def parallel_todo_oracle(titles: list[str]) -> Oracle:
    """Plan and do everything at once, then close everything, then answer."""

    def respond(body: Body) -> Reply:
        turns = assistant_calls(body)
        if not turns:
            return tool_calls(
                (WRITE_TODOS, {"todos": _todos(titles, "in_progress")}),
                *(action(t) for t in titles),
            )
        if any(name == ACTION_TOOL for name, _ in turns[-1]):
            return tool_calls((WRITE_TODOS, {"todos": _todos(titles, "completed")}))
        return text("All done.")

    return respond


def _latest_todos(turns: list[list[tuple[str, dict[str, Any]]]]) -> list[dict[str, Any]] | None:
    for calls in reversed(turns):
        for name, args in calls:
            if name == WRITE_TODOS:
                return [dict(todo) for todo in args["todos"]]
    return None


def sequential_todo_oracle(titles: list[str]) -> Oracle:
    """One item in progress at a time, moved forward in the message that does the next item."""

    def respond(body: Body) -> Reply:
        todos = _latest_todos(assistant_calls(body))
        if todos is None:
            first = [{"content": titles[0], "status": "in_progress"}]
            return tool_calls(
                (WRITE_TODOS, {"todos": first + _todos(titles[1:], "pending")}),
                action(titles[0]),
            )
        current = next((t for t in todos if t["status"] == "in_progress"), None)
        if current is None:
            return text("All done.")
        current["status"] = "completed"
        following = next((t for t in todos if t["status"] == "pending"), None)
        if following is None:
            return tool_calls((WRITE_TODOS, {"todos": todos}))
        following["status"] = "in_progress"
        return tool_calls((WRITE_TODOS, {"todos": todos}), action(following["content"]))

    return respond
