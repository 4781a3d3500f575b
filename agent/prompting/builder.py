"""What each LLM call is sent: system prompt, a bounded history, a compact view of the plan.

Seed 004, issue 2: a long turn outgrows any history window, so the plan and the turn's original
request travel on every call instead of in old messages. They go last, after the history: the
tool schemas and the system prompt before them are then byte-identical on every call of a turn,
so provider prompt caches and llama.cpp's prefix cache can skip them. The history is cut to the
newest ``history_limit`` messages without ever separating an AI tool call from its tool results,
which OpenAI-compatible servers reject, and without the steps of the turn that the plan view
already reports.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from agent.calls.safe_input import sendable
from agent.errors import ErrorCode
from agent.tool_names import PLAN_CHANGING_TOOLS
from agent.turn.empty_answer import without_empty_replies
from agent.turn.identity import call_record_id
from prompts import load_prompt, render_prompt
from storage.models import TurnTodo

OUTCOME_PREVIEW = 80
CONTEXT_PREVIEW = 300
REQUEST_PREVIEW = 2000
STATUS_MARKS = {"completed": "[x]", "cancelled": "[-]", "in_progress": "[>]", "pending": "[ ]"}


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def system_prompt(
    tool_names: Collection[str],
    extra_sections: Sequence[str] = (),
    *,
    agent_types: Mapping[str, str] | None = None,
) -> str:
    """The supervisor prompt; the planning section only when ``create_todo`` is bound, the
    delegation section (listing ``agent_types``: name -> description) only when ``delegate`` is.

    Without ``delegate``, planning says ``agentType`` is a label, so a model never tries to hand
    work to a worker that does not exist; with it, planning points to the delegation section.
    """
    delegating = "delegate" in tool_names
    sections = [load_prompt("supervisor")]
    if "create_todo" in tool_names:
        rule = load_prompt("agent_type_delegate" if delegating else "agent_type_label")
        sections.append(render_prompt("planning", agent_type_rule=rule))
    if delegating:
        listing = "\n".join(
            f"- `{name}`: {description}" for name, description in (agent_types or {}).items()
        )
        sections.append(render_prompt("delegation", workers=listing))
    sections.extend(extra_sections)
    return "\n\n".join(sections)


def _plan_line(row: TurnTodo, *, show_id: bool) -> str:
    mark = STATUS_MARKS.get(row.status, "[?]")
    if row.status in ("completed", "cancelled"):
        outcome = _clip(row.outcome or "", OUTCOME_PREVIEW)
        return f"- {mark} {row.title} — {outcome}"
    line = f"- {mark} {row.title} (id {row.id})" if show_id else f"- {mark} {row.title}"
    if row.status == "in_progress":
        details = []
        if row.context:
            details.append(f"context: {_clip(row.context, CONTEXT_PREVIEW)}")
        if row.completionCriteria:
            details.append(f"done when: {_clip(row.completionCriteria, CONTEXT_PREVIEW)}")
        if details:
            line += " — " + "; ".join(details)
    return line


def _ids_to_show(rows: Sequence[TurnTodo]) -> set[str]:
    """Ids of the rows a call may touch: those in progress (to close them) and the pending ones
    that start next (to act on them in the same message; several when they share an order).
    Later rows get theirs in the view once they are next, or from ``list_todo``."""
    pending = [row for row in rows if row.status == "pending"]
    first = min((row.priority or 0 for row in pending), default=None)
    return {
        row.id
        for row in rows
        if row.status == "in_progress" or (row.status == "pending" and (row.priority or 0) == first)
    }


def request_reminder(request: str) -> str:
    """The turn's original request, for calls where it has left the history window."""
    return f'The user asked: "{_clip(request, REQUEST_PREVIEW)}"'


def plan_view(rows: Sequence[TurnTodo], request: str, *, show_request: bool) -> str:
    """A compact, current view of the turn's plan: closed items with a short outcome, the item in
    progress with its id and context, the items next with their ids, the later ones by title."""
    closed = sum(1 for row in rows if row.status in ("completed", "cancelled"))
    ids = _ids_to_show(rows)
    request_line = request_reminder(request) if show_request else ""
    working = any(row.status == "in_progress" for row in rows)
    return render_prompt(
        "plan_view",
        closed=closed,
        total=len(rows),
        legend="; [>]: in progress, work on these now" if working else "",
        request_line=request_line,
        items="\n".join(_plan_line(row, show_id=row.id in ids) for row in rows),
    ).replace("\n\n", "\n")


ORPHAN_RESULT = json.dumps(
    {
        "error": ErrorCode.NOT_RUN.value,
        "message": "This tool call never returned a result (its run was interrupted).",
        "suggestion": "Do not assume it took effect; call the tool again if it is still needed.",
    }
)


def orphaned_tool_calls(messages: Sequence[AnyMessage]) -> dict[str, str]:
    """Tool calls in the history that no tool message answers: call id by record id
    (``agent.turn.identity.call_record_id``)."""
    answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
    return {
        call_record_id(message.id, call_id): call_id
        for message in messages
        if isinstance(message, AIMessage)
        for call in [*message.tool_calls, *message.invalid_tool_calls]
        if (call_id := call.get("id")) and call_id not in answered
    }


def answer_orphaned_tool_calls(
    messages: Sequence[AnyMessage], recorded: Mapping[str, str] | None = None
) -> list[AnyMessage]:
    """The history with a result after every tool call that never got one.

    A run that stops inside the tools node (a cancelled run, an interrupt never resumed, a tool
    bug) leaves an AI tool call without results in the thread; OpenAI-compatible servers reject
    every later request that contains it, which would break the conversation for good. A call
    whose result was recorded with its effect (``recorded``: content by call id) gets that
    result; any other gets a ``NOT_RUN`` error, since it changed nothing.
    """
    answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
    recorded = recorded or {}
    patched: list[AnyMessage] = []
    for message in messages:
        patched.append(message)
        if isinstance(message, AIMessage):
            for call in [*message.tool_calls, *message.invalid_tool_calls]:
                call_id = call.get("id")
                if call_id and call_id not in answered:
                    name = call.get("name") or "unknown"
                    if call_id in recorded:
                        patched.append(
                            ToolMessage(content=recorded[call_id], tool_call_id=call_id, name=name)
                        )
                        continue
                    patched.append(
                        ToolMessage(
                            content=ORPHAN_RESULT,
                            tool_call_id=call_id,
                            name=name,
                            status="error",
                        )
                    )
    return patched


def history_window(messages: Sequence[AnyMessage], limit: int) -> list[AnyMessage]:
    """The newest ``limit`` messages, starting at a message that is not a tool result.

    If the cut falls inside a tool-call group, the group's leftover results are dropped. If
    that would leave nothing (one group longer than the limit), the whole newest group is kept,
    so the model always sees the results it is acting on.
    """
    if limit <= 0 or not messages:
        return []
    start = max(0, len(messages) - limit)
    while start < len(messages) and isinstance(messages[start], ToolMessage):
        start += 1
    if start < len(messages):
        return list(messages[start:])
    group_start = len(messages) - 1
    while group_start > 0 and not isinstance(messages[group_start], AIMessage):
        group_start -= 1
    return list(messages[group_start:])


def recent_history(messages: Sequence[AnyMessage], limit: int) -> Sequence[AnyMessage]:
    """All that ``history_window(..., limit)`` can keep of ``messages``: the newest ``limit``,
    and, when they begin inside a tool-call group, the rest of that group back to its AI message.

    Preparing only these for the model (orphaned calls answered, text made sendable) gives the
    same window as preparing the whole history, whose cost would grow with the conversation on
    every call: a long-lived thread holds thousands of messages.
    """
    if limit <= 0:
        return []
    start = max(0, len(messages) - limit)
    while start > 0 and isinstance(messages[start], ToolMessage):
        start -= 1
    return messages[start:]


def without_reported_steps(
    window: Sequence[AnyMessage], turn_message_id: str | None
) -> list[AnyMessage]:
    """``window`` without the steps of this turn that the plan view already reports.

    Once a call has created the plan or closed an item, the plan view says what it did: every
    item, each closed one with its outcome, the one in progress with its id and context. So the
    turn's messages between its request and the newest such call are dropped; that call stays
    with its results, and so does all that came after it (the current item's work, errors,
    questions, reminders). The request and earlier turns stay as the window has them.
    ``turn_message_id`` is the request's id; without it nothing is dropped.
    """
    if turn_message_id is None:
        return list(window)
    opening = next((i for i, m in enumerate(window) if m.id == turn_message_id), -1)
    succeeded = {
        m.tool_call_id for m in window if isinstance(m, ToolMessage) and m.status != "error"
    }
    for index in range(len(window) - 1, opening, -1):
        message = window[index]
        if isinstance(message, AIMessage) and any(
            call["name"] in PLAN_CHANGING_TOOLS and call.get("id") in succeeded
            for call in message.tool_calls
        ):
            return [*window[: opening + 1], *window[index:]]
    return list(window)


def model_messages(
    *,
    base_prompt: str,
    history: Sequence[AnyMessage],
    history_limit: int,
    rows: Sequence[TurnTodo],
    turn_request: str,
    turn_message_id: str | None,
    render_plan: Callable[..., str] = plan_view,
    recorded: Mapping[str, str] | None = None,
    drop_reported: bool = True,
) -> list[BaseMessage]:
    """The full prompt of one LLM call: ``base_prompt`` as the system message, the history
    window, then the plan view (drawn by ``render_plan``; a prompt profile may bring its own,
    called like ``plan_view``) as the last message, or the request alone while there is no plan
    and the request has left the window. ``base_prompt`` is the same on every call, so the
    prompt's prefix is too. ``recorded`` holds the results of orphaned calls that ran
    (``agent.turn.call_ledger``). ``drop_reported``: with a plan, leave out the turn's steps the
    plan view reports (``without_reported_steps``)."""
    recent = without_empty_replies(recent_history(history, history_limit))
    window = history_window(sendable(answer_orphaned_tool_calls(recent, recorded)), history_limit)
    if rows and drop_reported:
        window = without_reported_steps(window, turn_message_id)
    request_visible = turn_message_id is not None and any(
        message.id == turn_message_id for message in window
    )
    prompt: list[BaseMessage] = [SystemMessage(content=base_prompt), *window]
    if rows:
        view = render_plan(rows, turn_request, show_request=not request_visible)
        prompt.append(HumanMessage(content=view))
    elif turn_request and not request_visible:
        prompt.append(HumanMessage(content=request_reminder(turn_request)))
    return alternating(prompt)


def alternating(prompt: Sequence[BaseMessage]) -> list[BaseMessage]:
    """``prompt`` with each user message that follows another joined to it.

    Chat templates that insist on alternating roles (Gemma's and Mistral's, served by vLLM or by
    llama.cpp with ``--jinja``) reject two user messages in a row, and the prompt makes them: the
    plan view after the request once the view reports all the turn did, a reminder or a note
    after the request. The joined message is a copy; the history keeps its messages as they are.
    """
    joined: list[BaseMessage] = []
    for message in prompt:
        previous = joined[-1] if joined else None
        if isinstance(message, HumanMessage) and isinstance(previous, HumanMessage):
            joined[-1] = previous.model_copy(
                update={"content": _joined_content(previous.content, message.content)}
            )
        else:
            joined.append(message)
    return joined


MessageContent = str | list[str | dict[str, Any]]


def _joined_content(first: MessageContent, second: MessageContent) -> MessageContent:
    if isinstance(first, str) and isinstance(second, str):
        return f"{first}\n\n{second}"
    blocks: list[str | dict[str, Any]] = []
    for content in (first, second):
        blocks.extend([{"type": "text", "text": content}] if isinstance(content, str) else content)
    return blocks
