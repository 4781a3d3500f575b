"""Models behind the scripted OpenAI-compatible server: one that asks the user mid-plan, one
that waits for plan approval, one that gives up on an item whose task does not exist.

It plans one item, tries ``complete_task("call")`` (two tasks match), asks which one with
``ask_user`` on the ambiguity error, completes the task the answer names, closes the item and
answers. It reads only the request body, as a real model behind ``ChatOpenAI`` would.
"""

from __future__ import annotations

import json
from typing import Any

from tests.fakes import plan_rows, window_of
from tests.http_oracle import plan_view_of
from tests.scripted_openai import Reply, text, tool_calls

OPTIONS = ["call mom", "call dad"]


def _results_of_last_step(body: dict[str, Any]) -> dict[str, str]:
    """The newest assistant message's tool results, by tool name."""
    results: dict[str, str] = {}
    for message in reversed(window_of(body.get("messages") or [])):
        if message.get("role") != "tool":
            names = {
                call["id"]: call["function"]["name"] for call in message.get("tool_calls") or []
            }
            return {names.get(call_id, "?"): content for call_id, content in results.items()}
        results[message.get("tool_call_id", "")] = str(message.get("content") or "")
    return {}


def asking_model(body: dict[str, Any]) -> Reply:
    rows = plan_rows(plan_view_of(body))
    if not rows:
        return tool_calls(
            ("create_todo", {"items": [{"title": "Complete the call task"}]}),
            ("complete_task", {"task_identifier": "call"}),
        )
    current = next((row for row in rows if row.mark == ">"), None)
    if current is None:
        return text("Done: I completed it.")
    results = _results_of_last_step(body)
    if "VALIDATION_ERROR" in results.get("complete_task", ""):
        return tool_calls(("ask_user", {"question": "Which call task?", "options": OPTIONS}))
    if "ask_user" in results:
        return tool_calls(("complete_task", {"task_identifier": results["ask_user"]}))
    outcome = json.loads(results.get("complete_task", "{}")).get("message", "completed")
    return tool_calls(("complete_todo", {"todoId": current.id, "outcome": outcome or "done"}))


PLAN = ["Add bread", "Add milk"]


def _add(title: str) -> tuple[str, dict[str, Any]]:
    return ("add_task", {"title": title.removeprefix("Add ").strip()})


def approval_aware_model(body: dict[str, Any]) -> Reply:
    """Plans two additions and acts on the first; then acts on the item in progress unless the
    last step's action succeeded (one refused before approval is made again), else closes it
    and acts on the next; answers when nothing is open."""
    rows = plan_rows(plan_view_of(body))
    if not rows:
        return tool_calls(("create_todo", {"items": [{"title": t} for t in PLAN]}), _add(PLAN[0]))
    current = next((row for row in rows if row.mark == ">"), None)
    if current is None:
        return text(f"Done: {len(rows)} items.")
    action = _results_of_last_step(body).get("add_task")
    if action is None or '"error"' in action:
        return tool_calls(_add(current.title))
    close = ("complete_todo", {"todoId": current.id, "outcome": f"did {current.title}"})
    following = next((row for row in rows if row.mark == " "), None)
    return tool_calls(close, *([_add(following.title)] if following else []))


def gives_up_on_a_missing_task(body: dict[str, Any]) -> Reply:
    """Plans one item and completes the task "ghost", which does not exist; on the NOT_FOUND,
    cancels the item with the tool's reason, then answers."""
    rows = plan_rows(plan_view_of(body))
    if not rows:
        return tool_calls(
            ("create_todo", {"items": [{"title": "Complete ghost"}]}),
            ("complete_task", {"task_identifier": "ghost"}),
        )
    current = next((row for row in rows if row.mark == ">"), None)
    if current is None:
        return text("I tried.")
    reason = json.loads(str(body["messages"][-1]["content"]))["message"]
    return tool_calls(
        ("complete_todo", {"todoId": current.id, "outcome": reason, "status": "cancelled"})
    )
