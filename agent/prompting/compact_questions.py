"""The harness's questions before an action on an existing task, and its plain refusals.

Why: an action that cannot be taken back is never made on a guess (issue 40). When the
user's words name no listed task without doubt, the harness asks which one they mean (the
candidate titles as options) or says plainly that nothing was changed; when the action comes
from stored text rather than this turn's request, it asks the user to confirm first, since
stored text is never an order. The small model is asked neither question: it could not be
trusted to ask, or not to.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool

from agent.prompting.compact_binding import (
    ACTION_MAX_TOKENS,
    ANSWER_MAX_TOKENS,
    StepBinding,
    tool_call_message,
)
from agent.prompting.compact_lookup import candidate_tasks, is_lookup, matching_task
from agent.prompting.compact_plan import PlannedAction
from agent.prompting.compact_verbs import tool_entry
from agent.prompting.request_steps import refers_back
from agent.tool_names import ASK_USER, TODO_TOOL_NAMES
from agent.turn.outcome import not_done_answer
from prompts import Prompts
from prompts import chosen as texts_of
from storage.models import TurnTodo

MAX_QUESTION_OPTIONS = 20
"""Tasks offered as answers to the harness's question at most (``ask_user``'s own cap)."""
MAX_OPTION_LENGTH = 200
"""An option's length at most (``ask_user``'s own cap)."""


ASK_CALL_PREFIX = "call_which_"
"""The start of the tool-call id of the harness's question which task the user means."""


def _asked_answer(history: Sequence[AnyMessage]) -> str | None:
    """The user's answer to the harness's question for the current item (after its lookup),
    or None when none was asked yet."""
    for message in reversed(history):
        if isinstance(message, HumanMessage):
            return None
        if isinstance(message, ToolMessage):
            if message.name == ASK_USER:
                return message.text
            if message.name in TODO_TOOL_NAMES or is_lookup(message):
                return None
    return None


def _picked(answer: str, candidates: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The candidate the user's answer picks: its title (the options are the titles), the
    words of one title, or its number in the list; None for anything else."""
    text = answer.strip().strip("'\"").strip()
    if text.isdigit() and 1 <= int(text) <= len(candidates):
        return candidates[int(text) - 1]
    return matching_task(text, candidates, quoted=False)


def chosen_task(
    target: str,
    listed: Sequence[Mapping[str, Any]],
    quoted: bool,
    history: Sequence[AnyMessage],
    todo_id: str | None,
    can_ask: bool,
    prompts: Prompts | None = None,
) -> Mapping[str, Any] | StepBinding:
    """The listed task the item acts on, or the step that asks the user which one, or the
    step that says nothing was changed. A word that points back ("it") is never searched for
    among the titles: if the plan could not say what it means, the user is asked. A quoted
    target is a title the user wrote out ('it works'), never a pointing word."""
    pointing = not quoted and refers_back(target)
    task = None if pointing else matching_task(target, listed, quoted=quoted)
    if task is not None:
        return task
    candidates = (
        list(listed[:MAX_QUESTION_OPTIONS]) if pointing else candidate_tasks(target, listed)
    )
    answer = _asked_answer(history)
    if answer is not None:
        picked = _picked(answer, candidates)
        if picked is not None:
            return picked
    if not candidates:
        return not_done_step(
            texts_of(prompts).render("no_such_task", words=target), todo_id, prompts=prompts
        )
    if answer is None and can_ask:
        titles = [str(task["title"])[:MAX_OPTION_LENGTH] for task in candidates]
        question = texts_of(prompts).render("which_task", words=target).strip()
        call_id = f"{ASK_CALL_PREFIX}{uuid.uuid4().hex[:20]}"
        reply = AIMessage(
            content="",
            tool_calls=[
                {
                    "name": ASK_USER,
                    "args": {"question": question, "options": titles},
                    "id": call_id,
                }
            ],
        )
        return StepBinding("act", [], ASK_USER, ACTION_MAX_TOKENS, reply=reply)
    named = ", ".join(f"'{task['title']}'" for task in candidates)
    return not_done_step(
        texts_of(prompts).render("task_not_chosen", words=target, candidates=named),
        todo_id,
        prompts=prompts,
    )


def not_done_step(outcome: str, todo_id: str | None, prompts: Prompts | None = None) -> StepBinding:
    """The step that ends an action the harness would not make: the item cancelled with the
    reason, or, for a request done without a plan, the answer saying it."""
    outcome = outcome.strip()
    if todo_id is not None:
        args = {"todoId": todo_id, "outcome": outcome, "status": "cancelled"}
        reply = tool_call_message("complete_todo", args)
        return StepBinding("close", [], "complete_todo", ACTION_MAX_TOKENS, reply=reply)
    answer = not_done_answer(texts_of(prompts).render("direct_failed", outcome=outcome))
    return StepBinding("answer", [], None, ANSWER_MAX_TOKENS, reply=answer)


CONFIRM_CALL_PREFIX = "call_confirm_"
"""The start of the tool-call id of the harness's question whether to make a stored action."""
YES = re.compile(r"^(?:y|yes|yeah|yep|ok|okay|sure|go ahead|do it|please do|1)\b", re.IGNORECASE)


def _from_request(planned: PlannedAction, said: Sequence[str]) -> bool:
    """Whether the user's own words (this turn's request, or the previous one that a pointing
    word of this turn reached back to) hold what the action acts on or the words it was
    planned from."""
    texts = [" ".join(text.split()).casefold() for text in said]
    return any(
        part and part in text
        for part in (" ".join(planned.target.split()).casefold(), planned.clause.casefold())
        for text in texts
    )


def unconfirmed_step(
    tool: BaseTool,
    current: TurnTodo,
    planned: PlannedAction,
    history: Sequence[AnyMessage],
    request: str,
    prompts: Prompts | None = None,
) -> StepBinding | None:
    """The step that asks the user before an action that cannot be taken back when the words
    it was planned from are not this turn's (a row continued from an earlier turn, or written
    by anyone but this request's plan): stored text is never an order. None when the action
    may go on: it can be taken back (adding, listing), it comes from this request, or the user
    said yes; a "no" (or no way to ask) closes the item, nothing changed."""
    if not tool_entry(tool).lookup:
        return None  # it acts on no existing task: what it does can be taken back
    requests = [m.text for m in history if isinstance(m, HumanMessage) and not m.name]
    if _from_request(planned, [request, *requests[-2:-1]]):
        return None
    action = f"{planned.tool} on '{planned.target}'"
    answer = next(
        (
            message.text
            for message in reversed(_since_human(history))
            if isinstance(message, ToolMessage)
            and message.tool_call_id.startswith(CONFIRM_CALL_PREFIX)
        ),
        None,
    )
    if answer is not None and YES.match(answer.strip()):
        return None
    if answer is None:
        question = texts_of(prompts).render(
            "confirm_stored_action", title=current.title, action=action
        )
        call = {
            "name": ASK_USER,
            "args": {"question": question.strip(), "options": ["yes", "no"]},
            "id": f"{CONFIRM_CALL_PREFIX}{uuid.uuid4().hex[:20]}",
        }
        reply = AIMessage(content="", tool_calls=[call])
        return StepBinding("act", [], ASK_USER, ACTION_MAX_TOKENS, reply=reply)
    return not_done_step(
        f"not confirmed ({action}); nothing was changed", current.id, prompts=prompts
    )


def _since_human(history: Sequence[AnyMessage]) -> list[AnyMessage]:
    """The messages after the newest user message (the turn's own work)."""
    for index in range(len(history) - 1, -1, -1):
        if isinstance(history[index], HumanMessage):
            return list(history[index + 1 :])
    return list(history)
