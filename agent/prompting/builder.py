"""What each LLM call is sent, for every prompt profile: system prompt, tools, history, plan.

A prompt profile is data (``PromptProfile``): which prompt files make the system prompt and the
plan view, which tools a step binds, how much history goes with a call, where the plan view
goes. ``FULL`` is for capable chat models; ``COMPACT`` for the small embedded one (its tool
binding, with shortened schemas and forced calls, is ``agent.prompting.compact_tools``).

Seed 004, issue 2: a long turn outgrows any history window, so the plan and the turn's request
travel on every call instead of in old messages. What a call sends is ordered from what never
changes to what changes most, because provider prompt caches and llama.cpp's prefix cache reuse
only a prompt's unchanged beginning (issue 26 measured it per call in ``python -m bench``):

1. the tool schemas a step binds (the same on every call of a phase: planning, then working);
2. the system prompt (the same on every call of the run's toolset);
3. earlier turns, cut once for the whole turn, then the turn's request;
4. under ``FULL``, the plan view: rows in plan order, so rows closed on earlier calls are an
   unchanged run of lines, the count at the end;
5. the turn's steps the plan view does not report: from the newest call that changed the plan,
   without its plan calls and their results (the view shows what they did), so each call
   carries the rows that changed and the newest work, not the whole turn again.

The history is cut to the newest ``history_limit`` messages without ever separating an AI tool
call from its tool results, which OpenAI-compatible servers reject.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.tools import BaseTool

from agent.calls.safe_input import sendable
from agent.context import Context
from agent.errors import ErrorCode
from agent.llm.embedded_models import is_local_setting
from agent.tool_names import ASK_USER, PLAN_CHANGING_TOOLS, TODO_TOOL_NAMES
from agent.turn.empty_answer import without_empty_replies
from agent.turn.identity import call_record_id
from prompts import Prompts, chosen
from storage.models import TurnTodo

ProfileName = Literal["full", "compact"]
Phase = Literal["planning", "working"]
"""A full-profile call plans while the turn has no plan (or must call ``create_todo``), then
works the plan: each phase binds its own plan tools and gets its own section of the system
prompt, the same on every call of the phase."""


DELEGATE = "delegate"
"""The hand-off tool (``agent.tools.delegate``): it acts on an item in progress."""

PLANNING_TOOLS = frozenset({"create_todo"})
"""Plan tools a full-profile call binds while the turn has no plan."""
WORKING_TOOLS = frozenset({"complete_todo", "list_todo", DELEGATE})
"""Plan tools a full-profile call binds once the turn has a plan."""

NO_PLAN_PROMPT = "compact_no_plan"
"""The compact profile's system prompt under ``planning="off"`` (the usual one asks for a
plan)."""

REQUEST_PREVIEW = 2000


@dataclass(frozen=True)
class PromptProfile:
    """What one LLM call sends under a profile, as data; ``model_messages`` builds it."""

    name: ProfileName
    supervisor_prompt: str
    """Prompt file that opens the system prompt."""
    sections: bool
    """The system prompt adds the planning, delegation and toolset sections of the run's tools
    (the compact prompt holds all a small model is told)."""
    plan_view_prompt: str
    """Prompt file of the plan view; it may use ``$items``, ``$closed``, ``$total`` and
    ``$request_line``."""
    marks: Mapping[str, str]
    """How a row's status is written."""
    ids: bool
    """Rows a call may touch show their id, and the row in progress its context."""
    outcome_preview: int
    """Characters of a closed row's outcome the view shows."""
    history_cap: int | None
    """Messages of history at most, whatever ``Context.history_limit`` says (None: no cap)."""
    history_when_done: int | None
    """Messages of history once every item is closed (None: as on any call)."""
    reported_in_view: bool
    """The plan view goes before the turn's steps, and the steps it reports are left out
    (``unreported_steps``); otherwise it goes last and the window is sent as it is."""
    tools: Literal["by_phase", "compact"]
    """``by_phase``: the run's tools, with only the plan tools of the phase (``step_tools``);
    ``compact``: ``agent.prompting.compact_tools.step_binding``."""


FULL = PromptProfile(
    name="full",
    supervisor_prompt="supervisor",
    sections=True,
    plan_view_prompt="plan_view",
    marks={"completed": "[x]", "cancelled": "[-]", "in_progress": "[>]", "pending": "[ ]"},
    ids=True,
    outcome_preview=80,
    history_cap=None,
    history_when_done=None,
    reported_in_view=True,
    tools="by_phase",
)

COMPACT = PromptProfile(
    name="compact",
    supervisor_prompt="compact_supervisor",
    sections=False,
    plan_view_prompt="compact_plan_view",
    marks={
        "completed": "done:",
        "cancelled": "cancelled:",
        "in_progress": "now:",
        "pending": "next:",
    },
    # A small model needs the titles and which one is now; ids are constants in its schemas.
    ids=False,
    outcome_preview=60,
    # The current item's action and result, and its lead-in; its window was measured with the
    # small model as it is, so it is sent whole (no steps left out for the plan view).
    history_cap=4,
    # Shown the tool-call history, the small model imitated it instead of answering; the plan
    # view lists what was done (and the answer is built from the rows, compact_tools.bind_step).
    history_when_done=0,
    reported_in_view=False,
    tools="compact",
)

PROFILES: Mapping[ProfileName, PromptProfile] = {"full": FULL, "compact": COMPACT}

CONTEXT_PREVIEW = 300


def prompt_profile(context: Context, model_setting: str | None) -> PromptProfile:
    """The profile for a run: the context's choice, else compact for the embedded model.

    ``model_setting`` is the resolved setting string (``"local"``, ``"openai:..."``), or None
    when the graph was built with a chat model instance (then only an explicit choice counts).
    """
    if context.prompt_profile != "auto":
        return PROFILES[context.prompt_profile]
    # Every embedded model (``local``, ``local:<name>``) is small enough to need the compact one.
    return COMPACT if model_setting is not None and is_local_setting(model_setting) else FULL


def history_limit(profile: PromptProfile, configured: int, rows: Sequence[TurnTodo]) -> int:
    """Messages of history for a call: ``configured`` (``Context.history_limit``) within the
    profile's caps."""
    done = bool(rows) and not any(row.status == "in_progress" for row in rows)
    if done and profile.history_when_done is not None:
        return profile.history_when_done
    return configured if profile.history_cap is None else min(configured, profile.history_cap)


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def step_phase(rows: Sequence[TurnTodo], required_tool: str | None = None) -> Phase:
    """``planning`` until the turn has a plan (or while ``required_tool`` is to be called),
    then ``working``."""
    return "working" if rows and required_tool is None else "planning"


def system_prompt(
    tool_names: Collection[str],
    extra_sections: Sequence[str] = (),
    *,
    agent_types: Mapping[str, str] | None = None,
    profile: PromptProfile = FULL,
    phase: Phase = "planning",
    planning: str = "auto",
    prompts: Prompts | None = None,
) -> str:
    """The system prompt of ``profile`` for a run binding ``tool_names``, in ``phase``, from
    ``prompts`` (the graph's or the middleware's; default: the environment's).

    Full: the supervisor prompt; the section of the phase (``planning`` when ``create_todo``
    is a run tool, ``working`` when ``complete_todo`` is); the delegation section (listing
    ``agent_types``: name -> description) only when ``delegate`` is, then ``extra_sections``
    (the toolsets'). Without ``delegate``, planning says ``agentType`` is a label, so a model
    never tries to hand work to a worker that does not exist. A phase's prompt is the same on
    every call of it; the step's tools, sent before it, change with the phase anyway, so a
    prompt cache loses nothing by the change.

    ``planning="off"`` (``Context.planning``): no plan tools are bound, so no section speaks
    of a plan, and the compact profile gets its no-plan prompt.
    """
    texts = chosen(prompts)
    if planning == "off":
        if not profile.sections:
            return texts.load(NO_PLAN_PROMPT)
        tool_names = set(tool_names) - TODO_TOOL_NAMES - {DELEGATE}
    sections = [texts.load(profile.supervisor_prompt)]
    if not profile.sections:
        return sections[0]
    delegating = DELEGATE in tool_names
    if phase == "planning" and "create_todo" in tool_names:
        rule = texts.load("agent_type_delegate" if delegating else "agent_type_label")
        sections.append(texts.render("planning", agent_type_rule=rule))
    if phase == "working" and "complete_todo" in tool_names:
        sections.append(texts.load("working"))
    if delegating:
        listing = "\n".join(
            f"- `{name}`: {description}" for name, description in (agent_types or {}).items()
        )
        sections.append(texts.render("delegation", workers=listing))
    sections.extend(extra_sections)
    return "\n\n".join(sections)


def step_tools(
    tools: Sequence[BaseTool],
    rows: Sequence[TurnTodo],
    required_tool: str | None = None,
    planning: str = "auto",
) -> list[BaseTool]:
    """The tools a full-profile call binds: the run's own tools first (the same on every call
    of the turn, so the start of the prompt stays cacheable), ``ask_user``, then the plan tools
    of the phase: ``create_todo`` while there is no plan (or when it is required), then
    ``complete_todo`` and ``delegate`` to work the plan, and ``list_todo`` when the plan has
    several stages (one stage's open rows are all in progress, each shown with its id and
    context, so a listing would only repeat the view). A tool the model has no use for in the
    step is not sent: each schema is sent with every call. The choice depends on the phase and
    the plan's stages, which stay the same from call to call. ``planning="off"`` binds no
    plan tool (nor ``delegate``, which hands over a plan item): the run's own tools only."""
    if planning == "off":
        wanted: Collection[str] = ()
    elif step_phase(rows, required_tool) == "planning":
        wanted = PLANNING_TOOLS
    elif len({row.priority or 0 for row in rows}) > 1:
        wanted = WORKING_TOOLS
    else:
        wanted = WORKING_TOOLS - {"list_todo"}
    plan_tools = TODO_TOOL_NAMES | {DELEGATE}
    own = [tool for tool in tools if tool.name not in plan_tools and tool.name != ASK_USER]
    ask = [tool for tool in tools if tool.name == ASK_USER]
    phase = [tool for tool in tools if tool.name in wanted]
    return [*own, *ask, *phase]


def _plan_line(row: TurnTodo, profile: PromptProfile, *, show_id: bool) -> str:
    mark = profile.marks.get(row.status, row.status)
    if not profile.ids:
        line = f"- {mark} {row.title}"
        if row.status in ("completed", "cancelled") and row.outcome:
            line += f" ({' '.join(row.outcome.split())[: profile.outcome_preview]})"
        return line
    if row.status in ("completed", "cancelled"):
        outcome = _clip(row.outcome or "", profile.outcome_preview)
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


def plan_view(
    rows: Sequence[TurnTodo],
    request: str,
    *,
    show_request: bool,
    profile: PromptProfile = FULL,
    prompts: Prompts | None = None,
) -> str:
    """A compact, current view of the turn's plan, in plan order, as one paragraph (no blank
    line). Full: closed items with a short outcome, the items in progress with their ids and
    context, the items next with their ids, the later ones by title; no count, which would
    change on every call for what the marks already say. Compact: the count, then titles and
    which one is now, without ids."""
    closed = sum(1 for row in rows if row.status in ("completed", "cancelled"))
    ids = _ids_to_show(rows) if profile.ids else set()
    return "\n".join(
        line
        for line in chosen(prompts)
        .render(
            profile.plan_view_prompt,
            closed=closed,
            total=len(rows),
            request_line=request_reminder(request) if show_request else "",
            items="\n".join(_plan_line(row, profile, show_id=row.id in ids) for row in rows),
        )
        .splitlines()
        if line.strip()
    )


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


def _newest_plan_change(messages: Sequence[AnyMessage]) -> tuple[int, set[str]] | None:
    """The index of the newest AI message with a plan call that succeeded, and the ids of those
    of its plan calls that did; None when no call in ``messages`` changed the plan. A call's
    result is among the tool messages right after its message (a server that numbers calls
    afresh reuses an id in a later message)."""
    succeeded: set[str] = set()  # the successful results right after the message looked at
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, ToolMessage):
            if message.status != "error":
                succeeded.add(message.tool_call_id)
            continue
        if isinstance(message, AIMessage):
            reported = {
                call_id
                for call in message.tool_calls
                if call["name"] in PLAN_CHANGING_TOOLS and (call_id := call.get("id")) in succeeded
            }
            if reported:
                return index, reported
        succeeded = set()
    return None


def _without_calls(message: AIMessage, call_ids: set[str]) -> AIMessage | None:
    """``message`` without the tool calls ``call_ids`` (and their content blocks, which some
    providers send as the calls); None when nothing is left of it."""
    calls = [call for call in message.tool_calls if call.get("id") not in call_ids]
    content: Any = message.content
    if isinstance(content, list):
        content = [
            block
            for block in content
            if not (isinstance(block, dict) and block.get("id") in call_ids)
        ]
    has_text = bool(content.strip()) if isinstance(content, str) else bool(content)
    if not (calls or message.invalid_tool_calls or has_text):
        return None
    kwargs = {
        key: value
        for key, value in message.additional_kwargs.items()
        if key not in ("tool_calls", "function_call")
    }
    return message.model_copy(
        update={"tool_calls": calls, "content": content, "additional_kwargs": kwargs}
    )


def unreported_steps(turn: Sequence[AnyMessage]) -> list[AnyMessage]:
    """The turn's messages after its request that the plan view does not report.

    The plan view shows every item, each closed one with its outcome, the ones in progress with
    their ids and context: all that the turn's successful ``create_todo`` and ``complete_todo``
    calls did. So the turn's messages before the newest message with such a call go, and so do
    that message's successful plan calls and their results. What stays is all the model still
    needs: the other calls of that message (the work on the item started with it) with their
    results, failed plan calls with their errors, and everything after (further work, questions,
    reminders). Without such a call the turn is returned whole.
    """
    found = _newest_plan_change(turn)
    if found is None:
        return list(turn)
    index, reported = found
    step = turn[index]
    assert isinstance(step, AIMessage)  # _newest_plan_change returns AI messages only
    # Only that message's own results go: the tool messages right after it. A server that
    # numbers calls afresh in every response ("call_0" each time) reuses the ids later.
    results_end = index + 1
    while results_end < len(turn) and isinstance(turn[results_end], ToolMessage):
        results_end += 1
    rest = [
        message
        for message in turn[index + 1 : results_end]
        if not (isinstance(message, ToolMessage) and message.tool_call_id in reported)
    ] + list(turn[results_end:])
    kept = _without_calls(step, reported)
    return rest if kept is None else [kept, *rest]


def _prepared(
    messages: Sequence[AnyMessage], recorded: Mapping[str, str] | None
) -> list[AnyMessage]:
    """What the model may be sent of ``messages``: no empty replies, every tool call answered,
    text made sendable."""
    return sendable(answer_orphaned_tool_calls(without_empty_replies(messages), recorded))


def _request_index(history: Sequence[AnyMessage], turn_message_id: str | None) -> int | None:
    if turn_message_id is None:
        return None
    return next(
        (i for i in range(len(history) - 1, -1, -1) if history[i].id == turn_message_id), None
    )


def model_messages(
    *,
    base_prompt: str,
    history: Sequence[AnyMessage],
    history_limit: int,
    rows: Sequence[TurnTodo],
    turn_request: str,
    turn_message_id: str | None,
    profile: PromptProfile = FULL,
    recorded: Mapping[str, str] | None = None,
    prompts: Prompts | None = None,
) -> list[BaseMessage]:
    """The messages of one LLM call under ``profile`` (the tools are bound to the model).

    ``base_prompt`` is the system message, the same on every call. ``recorded`` holds the
    results of orphaned calls that ran (``agent.turn.call_ledger``); ``prompts``: the plan
    view's texts (default: the environment's).

    With a plan and the request in ``history``, a profile that reports steps in its view
    (``FULL``) sends the newest ``history_limit`` messages of earlier turns (cut once for the
    whole turn, so they are the same on every call of it), the request, the plan view, then
    the newest ``history_limit`` messages of ``unreported_steps``. Otherwise the newest
    ``history_limit`` messages are sent, with the plan view last, or the request alone while
    there is no plan and the request has left the window.
    """
    start = _request_index(history, turn_message_id) if profile.reported_in_view else None
    if rows and start is not None:
        earlier = history_window(
            _prepared(recent_history(history[:start], history_limit), recorded),
            history_limit,
        )
        turn = _prepared(history[start + 1 :], recorded)
        steps = history_window(unreported_steps(turn), history_limit)
        view = plan_view(rows, turn_request, show_request=False, profile=profile, prompts=prompts)
        return alternating(
            [
                SystemMessage(content=base_prompt),
                *earlier,
                *sendable([history[start]]),
                HumanMessage(content=view),
                *steps,
            ]
        )
    recent = recent_history(history, history_limit)
    window = history_window(_prepared(recent, recorded), history_limit)
    if rows and profile.reported_in_view:
        window = without_reported_steps(window, turn_message_id)
    request_visible = turn_message_id is not None and any(
        message.id == turn_message_id for message in window
    )
    prompt: list[BaseMessage] = [SystemMessage(content=base_prompt), *window]
    if rows:
        view = plan_view(
            rows,
            turn_request,
            show_request=not request_visible,
            profile=profile,
            prompts=prompts,
        )
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
