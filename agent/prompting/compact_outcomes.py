"""What the current item's actions came to, read from the history: the outcome text.

Why: the compact profile never lets the small model write an outcome or a final answer about
an action (it wrote "completed_todo" as an outcome and echoed its prompt as an answer;
measured). The harness reads the tool results since the item began and says what was done
(the tool and the title it reports, every title a list returned, a worker's report) or why it
failed, and a one-step request done without a plan is answered from the same text.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage

from agent.prompting.compact_binding import DELEGATE
from agent.prompting.compact_lookup import is_lookup
from agent.prompting.compact_schemas import MAX_STRING_LENGTH
from agent.tool_names import ASK_USER, CONTINUE_OPEN_TODOS, TODO_TOOL_NAMES
from agent.turn.outcome import not_done_answer
from prompts import Prompts
from prompts import chosen as texts_of

MAX_LISTING_LENGTH = 1500
"""Cap on a list step's outcome, which names every task listed (the answer shows it)."""


def since_last_todo_result(history: Sequence[AnyMessage]) -> list[ToolMessage]:
    """Results of non-todo tools after the newest todo-tool result or user message (the
    current item's work, or a direct action's in a turn without a plan), newest first. The
    harness's lookups (``agent.prompting.compact_lookup``) and the user's answers to its
    questions (which task they mean) are no action and are left out."""
    results: list[ToolMessage] = []
    for message in reversed(history):
        if isinstance(message, HumanMessage):
            break
        if isinstance(message, ToolMessage):
            if message.name in TODO_TOOL_NAMES or message.name == CONTINUE_OPEN_TODOS:
                break
            if not is_lookup(message) and message.name != ASK_USER:
                results.append(message)
    return results


def _payload(result: ToolMessage) -> dict[str, Any]:
    try:
        payload = json.loads(result.text)
    except ValueError:
        return {}
    return payload if isinstance(payload, dict) else {}


def _done(item: Mapping[str, Any]) -> bool:
    return item.get("completed") is True or item.get("status") in ("completed", "done")


def _listing(payload: Mapping[str, Any]) -> str | None:
    """``2 pending task(s): buy groceries; do laundry`` for a list result, else None; tasks
    done are counted and marked (``2 task(s), 1 done: report; call mom (done)``): a listing
    that hid them would pass them for open."""
    items = payload.get("tasks", payload.get("items"))
    if not isinstance(items, list):
        return None
    titles = [
        f"{item.get('title')} (done)" if _done(item) else str(item.get("title"))
        for item in items
        if isinstance(item, dict)
    ]
    kind = payload.get("filter")
    which = f"{kind} " if isinstance(kind, str) and kind != "all" else ""
    listed = "; ".join(titles) if titles else "none"
    done = sum(1 for item in items if isinstance(item, dict) and _done(item))
    counted = f", {done} done" if done and done < len(titles) else ""
    return f"{len(titles)} {which}task(s){counted}: {listed}"


def action_outcomes(history: Sequence[AnyMessage], prompts: Prompts | None = None) -> list[str]:
    """Outcomes to close the item with: one per successful action of the current item, e.g.
    ``add_task: buy groceries`` (the tool, and the title it reports), or for a list every title
    it returned, so the answer built from the rows shows what the user asked to see."""
    outcomes = []
    for result in reversed(since_last_todo_result(history)):
        if _failed(result, prompts=prompts):
            continue
        payload = _payload(result)
        listing = _listing(payload)
        if listing is not None:
            outcome = f"{result.name}: {listing}"[:MAX_LISTING_LENGTH]
        elif isinstance(payload.get("result"), str):  # a worker's report, through delegate
            outcome = f"{payload.get('agentType', result.name)}: {payload['result']}"
            outcome = outcome[:MAX_STRING_LENGTH]
        elif isinstance(payload.get("title"), str):
            outcome = f"{result.name}: {payload['title']}"[:MAX_STRING_LENGTH]
        else:
            outcome = f"{result.name} succeeded"
        outcomes.append(outcome)
    return list(dict.fromkeys(outcomes))


def failure_outcome(history: Sequence[AnyMessage], prompts: Prompts | None = None) -> str:
    """Why the current item is cancelled: the last failed action's error, in a line."""
    failures = [
        result for result in since_last_todo_result(history) if _failed(result, prompts=prompts)
    ]
    if not failures:
        return "no tool could do it"
    last = failures[0]
    payload = _payload(last)
    error = payload.get("error") if isinstance(payload.get("error"), dict) else payload
    message = error.get("message") if isinstance(error, dict) else None
    message = message or payload.get("result")  # a worker's "Not done: ..." report
    text = message if isinstance(message, str) and message else last.text
    return f"{last.name} failed: {' '.join(text.split())}"[:MAX_STRING_LENGTH]


def action_succeeded(history: Sequence[AnyMessage], prompts: Prompts | None = None) -> bool:
    return any(not _failed(result, prompts=prompts) for result in since_last_todo_result(history))


def _failed(result: ToolMessage, prompts: Prompts | None = None) -> bool:
    """An error, or a worker's report that its action failed (a compact worker answers
    ``direct_failed``: "Not done: ..."), so a delegated item is not closed as completed."""
    if result.status == "error":
        return True
    report = _payload(result).get("result") if result.name == DELEGATE else None
    not_done = texts_of(prompts).render("direct_failed", outcome="").strip()
    return isinstance(report, str) and report.strip().startswith(not_done)


def direct_answer(history: Sequence[AnyMessage], prompts: Prompts | None = None) -> str:
    """The answer of a one-step request done without a plan, from what its action returned."""
    outcomes = action_outcomes(history, prompts=prompts)
    if outcomes:
        return texts_of(prompts).render("direct_done", outcome="; ".join(outcomes))
    return texts_of(prompts).render(
        "direct_failed", outcome=failure_outcome(history, prompts=prompts)
    )


def direct_reply(history: Sequence[AnyMessage], prompts: Prompts | None = None) -> AIMessage:
    """``direct_answer`` as the turn's answer; a failed action's is marked not done, so the
    turn ends ``incomplete`` (``agent.turn.outcome.not_done_answer``), never ``answered``."""
    text = direct_answer(history, prompts=prompts)
    return (
        AIMessage(content=text)
        if action_outcomes(history, prompts=prompts)
        else not_done_answer(text)
    )
