"""The no-progress stop (issue 29 §4): tool activity is not progress.

A tool round is idle when it started or closed no row (the rows' ids and statuses are what they
were after the round before) and each of its calls only read the plan (``list_todo``) or repeated
a call already made in this turn with the same name and arguments. ``Context.max_idle_rounds``
idle rounds in a row end the turn ``stalled`` at once, with the honest partial report naming the
calls that went round, instead of spending the budget up to its cap. Any other round starts the
count again.

The count and the calls live in graph state (``idleRounds``, ``idleCalls``, ``progressMark``), so
they are checkpointed with the turn and a resumed run goes on counting where it stopped.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, ToolCall

from storage.models import TurnTodo

PLAN_READS = frozenset({"list_todo"})
"""Calls that only read the plan: the plan view already shows it."""

CALL_TEXT_LIMIT = 120
"""Longest description of one call in the stalled report."""


def progress_mark(rows: Sequence[TurnTodo]) -> str:
    """A short digest of the rows' ids and statuses: it changes when a row is created, started or
    closed, and only then ("" for no rows)."""
    if not rows:
        return ""
    text = "\n".join(f"{row.id}={row.status}" for row in sorted(rows, key=lambda r: r.id))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _call_key(call: ToolCall) -> str:
    return f"{call['name']}:{json.dumps(call.get('args') or {}, sort_keys=True, default=str)}"


def describe_call(call: ToolCall) -> str:
    """A call as the report shows it: ``name(args)``, shortened."""
    args = call.get("args") or {}
    text = (
        f"{call['name']}({json.dumps(args, sort_keys=True, default=str)})"
        if args
        else (f"{call['name']}()")
    )
    return text if len(text) <= CALL_TEXT_LIMIT else text[: CALL_TEXT_LIMIT - 1] + "…"


def _turn_messages(messages: Sequence[AnyMessage], turn_message_id: str) -> Sequence[AnyMessage]:
    """The messages of this turn (after its human message; all of them if it is not found)."""
    if turn_message_id:
        for index in range(len(messages) - 1, -1, -1):
            if messages[index].id == turn_message_id:
                return messages[index + 1 :]
    return messages


def idle_calls(messages: Sequence[AnyMessage], turn_message_id: str) -> list[str] | None:
    """The descriptions of the last tool round's calls when each only read the plan or repeated
    a call made earlier in this turn with the same arguments; None when one did something new
    (or there was no round)."""
    turn = _turn_messages(messages, turn_message_id)
    rounds = [message for message in turn if isinstance(message, AIMessage) and message.tool_calls]
    if not rounds:
        return None
    last, earlier = rounds[-1], rounds[:-1]
    made = {_call_key(call) for message in earlier for call in message.tool_calls}
    described = []
    for call in last.tool_calls:
        if call["name"] not in PLAN_READS and _call_key(call) not in made:
            return None
        described.append(describe_call(call))
    return described


@dataclass(frozen=True)
class IdleVerdict:
    """What the round means for the count: the state update, and whether the turn must stop."""

    update: dict[str, Any]
    stalled: bool
    rounds: int
    calls: list[str]


def judge_round(
    messages: Sequence[AnyMessage],
    turn_message_id: str,
    rows: Sequence[TurnTodo],
    *,
    mark_before: str,
    idle_before: int,
    calls_before: Sequence[str],
    max_idle_rounds: int,
) -> IdleVerdict:
    """Count the tool round that just ended (``rows``: the rows after it)."""
    mark = progress_mark(rows)
    calls = idle_calls(messages, turn_message_id) if mark == mark_before else None
    if calls is None:
        return IdleVerdict({"idleRounds": 0, "idleCalls": [], "progressMark": mark}, False, 0, [])
    rounds = idle_before + 1
    seen = [*calls_before, *calls]
    update = {"idleRounds": rounds, "idleCalls": seen, "progressMark": mark}
    return IdleVerdict(update, rounds >= max_idle_rounds, rounds, seen)


def repeated_summary(calls: Sequence[str]) -> str:
    """The calls of the idle rounds, each once with how often it was made, most frequent first."""
    counted = Counter(calls)
    return "; ".join(
        f"{call} {count} times" if count > 1 else call for call, count in counted.most_common()
    )
