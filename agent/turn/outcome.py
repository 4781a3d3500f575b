"""The messages the graph itself writes when a turn ends without the model's answer, and the
status a turn that answered ends with.

Both are honest by construction: they are built from the rows in the database, not from what the
model said, so a user always learns which planned items were done and which were not.

``answered`` means everything asked was done. A row cancelled by anyone but the user (a failed
action, NOT_FOUND, a refusal, a guess refused, no tool for it: the agent gave up on it, or a
cancel recorded before who cancelled was) is part of the request left undone, and so is a
direct action the compact profile reports as not done (``not_done_answer``): such a turn ends
``incomplete`` (``turn_end_status``). Rows the user cancelled (a rejected plan, a ``planEdits``
cancel: ``storage.models.CANCELLED_BY``) are the user's choice, not a failure. An answer that
claims a change no tool made, or that follows a change attempt which failed and was never made
good, ends ``incomplete`` too (``agent.turn.claim_check``, called where the turn ends:
``agent.turn.drain_rule.ended``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from langchain_core.messages import AIMessage, AnyMessage

from agent.turn.identity import message_text
from prompts import Prompts, chosen
from storage.models import TurnTodo

NONE_LINE = "- (none)"

NOT_DONE_METADATA = "turnplan_not_done"
"""``response_metadata`` key of an answer the harness wrote to say the request was not done
(the compact profile's failed direct action): typed, so the status never hangs on its words."""


def not_done_answer(text: str) -> AIMessage:
    """An answer saying the request was not done: the turn it ends is ``incomplete``."""
    return AIMessage(content=text, response_metadata={NOT_DONE_METADATA: True})


def reports_not_done(message: AnyMessage | None) -> bool:
    """Whether ``message`` is an answer made by ``not_done_answer``."""
    return isinstance(message, AIMessage) and bool(message.response_metadata.get(NOT_DONE_METADATA))


def not_done_rows(rows: Sequence[TurnTodo]) -> list[TurnTodo]:
    """The cancelled rows that were not the user's choice: work asked for and not done."""
    return [row for row in rows if row.status == "cancelled" and row.canceller() != "user"]


def turn_end_status(
    rows: Sequence[TurnTodo], answer: AnyMessage | None = None
) -> Literal["answered", "incomplete"]:
    """How a turn whose rows are all closed ends: ``incomplete`` when any was cancelled for
    a failure or the answer reports the request not done, else ``answered``."""
    return "incomplete" if not_done_rows(rows) or reports_not_done(answer) else "answered"


def _not_done_lines(rows: Sequence[TurnTodo]) -> list[str]:
    return [f"- {row.title}: {row.outcome or 'no reason given'}" for row in rows]


def with_not_done(
    answer: AIMessage, rows: Sequence[TurnTodo], prompts: Prompts | None = None
) -> AIMessage | None:
    """The answer restated (same id: it replaces the model's) with what was not done and why,
    from the rows; None when nothing was left undone or the answer already lists each of them
    in these very lines (the compact profile's answer, built from the rows)."""
    lines = _not_done_lines(not_done_rows(rows))
    text = message_text(answer).strip()
    if not lines or all(line in text for line in lines):
        return None
    content = chosen(prompts).render(
        "answer_not_done", answer=text, not_done="\n".join(lines), count=len(lines), total=len(rows)
    )
    return answer.model_copy(update={"content": content})


def _done_lines(rows: Sequence[TurnTodo]) -> str:
    lines = []
    for row in rows:
        if row.status == "completed":
            lines.append(f"- {row.title}: {row.outcome or 'done'}")
        elif row.status == "cancelled":
            lines.append(f"- {row.title} (cancelled: {row.outcome or 'no reason given'})")
    return "\n".join(lines) or NONE_LINE


def _open_lines(rows: Sequence[TurnTodo]) -> str:
    lines = []
    for row in rows:
        if row.status == "in_progress":
            lines.append(f"- {row.title} (was in progress)")
        elif row.status == "pending":
            lines.append(f"- {row.title}")
    return "\n".join(lines) or NONE_LINE


def _incomplete_plan_message(
    prompt: str, rows: Sequence[TurnTodo], prompts: Prompts | None, **values: object
) -> str:
    open_count = sum(1 for row in rows if row.status in ("pending", "in_progress"))
    return chosen(prompts).render(
        prompt,
        open_count=open_count,
        total=len(rows),
        done=_done_lines(rows),
        not_done=_open_lines(rows),
        **values,
    )


def budget_exhausted_message(
    rows: Sequence[TurnTodo], llm_calls: int, prompts: Prompts | None = None
) -> str:
    """The final answer when the turn ran out of LLM calls: what was done, what was not (or, for
    a turn that made no plan, just that)."""
    if not rows:
        return chosen(prompts).render("budget_exhausted_no_plan", llm_calls=llm_calls)
    return _incomplete_plan_message("budget_exhausted", rows, prompts, llm_calls=llm_calls)


def stalled_message(rows: Sequence[TurnTodo], answers: int, prompts: Prompts | None = None) -> str:
    """The final answer when the model kept answering instead of working on open rows;
    ``answers`` counts those answers (the reminded ones and the last)."""
    times = "once" if answers == 1 else f"{answers} times in a row"
    return _incomplete_plan_message("stalled", rows, prompts, times=times)


def tokens_exhausted_message(
    rows: Sequence[TurnTodo], used: int, limit: int, prompts: Prompts | None = None
) -> str:
    """The final answer when the turn's tokens passed ``Context.max_turn_tokens``: which budget
    ran out, what was done, what was not."""
    if not rows:
        return chosen(prompts).render("tokens_exhausted_no_plan", used=used, limit=limit)
    return _incomplete_plan_message("tokens_exhausted", rows, prompts, used=used, limit=limit)


def stalled_idle_message(
    rows: Sequence[TurnTodo], idle_rounds: int, repeated: str, prompts: Prompts | None = None
) -> str:
    """The final answer when ``idle_rounds`` tool rounds in a row made no progress
    (``agent.turn.idle``); ``repeated`` names the calls that went round."""
    return _incomplete_plan_message(
        "stalled_idle", rows, prompts, idle_rounds=idle_rounds, repeated=repeated
    )


def no_answer_message(
    rows: Sequence[TurnTodo], *, asked_again: bool, prompts: Prompts | None = None
) -> str:
    """The final answer when the model replied with nothing: twice in a row (``asked_again``:
    the second reply answered ``prompts/answer_required.md``), or once on the turn's last
    allowed call. It says no answer was produced and where the plan stands."""
    when = (
        "twice in a row, the second time when asked again for a reply"
        if asked_again
        else "on the last model call this turn was allowed"
    )
    if not rows:
        return chosen(prompts).render("no_answer_no_plan", when=when)
    return _incomplete_plan_message("no_answer", rows, prompts, when=when)


def written_tool_call_message(
    rows: Sequence[TurnTodo], *, asked_again: bool, prompts: Prompts | None = None
) -> str:
    """The final answer when the model wrote its tool call as text instead of making it, twice
    in a row (``asked_again``) or on the last allowed call: nothing it wrote was run."""
    when = (
        "twice in a row, the second time when asked to make the call"
        if asked_again
        else "on the last model call this turn was allowed"
    )
    if not rows:
        return chosen(prompts).render("written_tool_call_no_plan", when=when)
    return _incomplete_plan_message("written_tool_call", rows, prompts, when=when)


def plan_complete_message(rows: Sequence[TurnTodo], prompts: Prompts | None = None) -> str:
    """The final answer when the last item closed on the turn's last allowed LLM call."""
    return chosen(prompts).render("plan_complete", done=_done_lines(rows))


def plan_finished_message(rows: Sequence[TurnTodo], prompts: Prompts | None = None) -> str:
    """The answer built from a finished plan's rows (the compact profile's answer): everything
    done, or, when some items were cancelled for a failure, what was done and what was not,
    said first. Items the user cancelled are listed with the done ones, as the user's choice."""
    not_done = not_done_rows(rows)
    if not not_done:
        return plan_complete_message(rows, prompts)
    left = {row.id for row in not_done}
    return chosen(prompts).render(
        "plan_partly_done",
        done=_done_lines([row for row in rows if row.id not in left]),
        not_done="\n".join(_not_done_lines(not_done)),
        cancelled_count=len(not_done),
        total=len(rows),
    )


def turn_failed_message(
    reason: str, rows: Sequence[TurnTodo] | None, prompts: Prompts | None = None
) -> str:
    """The final answer when the model or the database failed mid-turn."""
    if rows:
        plan_status = (
            f"\nDone so far:\n{_done_lines(rows)}\n\nNot done:\n{_open_lines(rows)}\n\n"
            "The plan's items are kept exactly as they are.\n"
        )
    elif rows is None:
        plan_status = "\nThe state of this turn's plan could not be read.\n"
    else:
        plan_status = ""
    return chosen(prompts).render("turn_failed", reason=reason, plan_status=plan_status)
