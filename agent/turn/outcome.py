"""The messages the graph itself writes when a turn ends without the model's answer.

Both are honest by construction: they are built from the rows in the database, not from what the
model said, so a user always learns which planned items were done and which were not.
"""

from __future__ import annotations

from collections.abc import Sequence

from prompts import render_prompt
from storage.models import TurnTodo

NONE_LINE = "- (none)"


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


def _incomplete_plan_message(prompt: str, rows: Sequence[TurnTodo], **values: object) -> str:
    open_count = sum(1 for row in rows if row.status in ("pending", "in_progress"))
    return render_prompt(
        prompt,
        open_count=open_count,
        total=len(rows),
        done=_done_lines(rows),
        not_done=_open_lines(rows),
        **values,
    )


def budget_exhausted_message(rows: Sequence[TurnTodo], llm_calls: int) -> str:
    """The final answer when the turn ran out of LLM calls: what was done, what was not (or, for
    a turn that made no plan, just that)."""
    if not rows:
        return render_prompt("budget_exhausted_no_plan", llm_calls=llm_calls)
    return _incomplete_plan_message("budget_exhausted", rows, llm_calls=llm_calls)


def stalled_message(rows: Sequence[TurnTodo], answers: int) -> str:
    """The final answer when the model kept answering instead of working on open rows;
    ``answers`` counts those answers (the reminded ones and the last)."""
    times = "once" if answers == 1 else f"{answers} times in a row"
    return _incomplete_plan_message("stalled", rows, times=times)


def tokens_exhausted_message(rows: Sequence[TurnTodo], used: int, limit: int) -> str:
    """The final answer when the turn's tokens passed ``Context.max_turn_tokens``: which budget
    ran out, what was done, what was not."""
    if not rows:
        return render_prompt("tokens_exhausted_no_plan", used=used, limit=limit)
    return _incomplete_plan_message("tokens_exhausted", rows, used=used, limit=limit)


def stalled_idle_message(rows: Sequence[TurnTodo], idle_rounds: int, repeated: str) -> str:
    """The final answer when ``idle_rounds`` tool rounds in a row made no progress
    (``agent.turn.idle``); ``repeated`` names the calls that went round."""
    return _incomplete_plan_message(
        "stalled_idle", rows, idle_rounds=idle_rounds, repeated=repeated
    )


def no_answer_message(rows: Sequence[TurnTodo], *, asked_again: bool) -> str:
    """The final answer when the model replied with nothing: twice in a row (``asked_again``:
    the second reply answered ``prompts/answer_required.md``), or once on the turn's last
    allowed call. It says no answer was produced and where the plan stands."""
    when = (
        "twice in a row, the second time when asked again for a reply"
        if asked_again
        else "on the last model call this turn was allowed"
    )
    if not rows:
        return render_prompt("no_answer_no_plan", when=when)
    return _incomplete_plan_message("no_answer", rows, when=when)


def written_tool_call_message(rows: Sequence[TurnTodo], *, asked_again: bool) -> str:
    """The final answer when the model wrote its tool call as text instead of making it, twice
    in a row (``asked_again``) or on the last allowed call: nothing it wrote was run."""
    when = (
        "twice in a row, the second time when asked to make the call"
        if asked_again
        else "on the last model call this turn was allowed"
    )
    if not rows:
        return render_prompt("written_tool_call_no_plan", when=when)
    return _incomplete_plan_message("written_tool_call", rows, when=when)


def plan_complete_message(rows: Sequence[TurnTodo]) -> str:
    """The final answer when the last item closed on the turn's last allowed LLM call."""
    return render_prompt("plan_complete", done=_done_lines(rows))


def plan_finished_message(rows: Sequence[TurnTodo]) -> str:
    """The answer built from a finished plan's rows (the compact profile's answer): everything
    done, or, when some items were cancelled, what was done and what was not, said first."""
    if not any(row.status == "cancelled" for row in rows):
        return plan_complete_message(rows)
    completed = [row for row in rows if row.status == "completed"]
    cancelled = [row for row in rows if row.status == "cancelled"]
    return render_prompt(
        "plan_partly_done",
        done=_done_lines(completed),
        not_done="\n".join(
            f"- {row.title}: {row.outcome or 'no reason given'}" for row in cancelled
        ),
        cancelled_count=len(cancelled),
        total=len(rows),
    )


def turn_failed_message(reason: str, rows: Sequence[TurnTodo] | None) -> str:
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
    return render_prompt("turn_failed", reason=reason, plan_status=plan_status)
