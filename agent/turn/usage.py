"""Token usage of a turn and of each of its rows (issue 29 §5).

Every LLM call's usage comes from the answer's ``usage_metadata``; a server that reports none
(llama.cpp builds, some proxies) gets an estimate from the characters sent and received, and the
turn is marked ``usageEstimated`` so nobody takes the figure for a bill. A call is charged to the
rows in progress when it was made: a stage of rows started together shares it evenly (the
remainder of the division goes to the first rows, so the rows add up to what the calls cost);
calls made with no row in progress (the planning call, the closing answer) count for the turn
only. The totals live in graph state, so they are checkpointed and survive a resume; per-row
figures are also written to ``turn_row_usage`` (``storage.repositories.row_usage``).

``turn_usage(state)`` is the one reader of a turn's totals (workers that share the turn's budget
read it too); ``tokens_exhausted`` is the one rule of ``Context.max_turn_tokens``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage

from storage.models import TurnTodo

CHARS_PER_TOKEN = 4
"""The usual rule of thumb for English text with BPE tokenizers; only used when the server
reports no usage."""

RowUsage = dict[str, int]
"""``{"llmCalls", "promptTokens", "completionTokens"}`` of one row."""


@dataclass(frozen=True)
class CallUsage:
    """What one LLM call cost."""

    prompt_tokens: int
    completion_tokens: int
    estimated: bool
    """True when the server reported no usage and the figures come from characters."""


@dataclass(frozen=True)
class TurnUsage:
    """A turn's running totals, as ``turn_usage`` reads them from the state."""

    llm_calls: int
    prompt_tokens: int
    completion_tokens: int
    estimated: bool

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


def _field(state: object, key: str, default: Any) -> Any:
    if isinstance(state, Mapping):
        return state.get(key, default)
    return getattr(state, key, default)


def turn_usage(state: object) -> TurnUsage:
    """The turn's LLM calls and tokens so far, from the graph state (a ``SupervisorState``, or
    the values dict a client or ``aget_state`` returns)."""
    return TurnUsage(
        llm_calls=int(_field(state, "llmCalls", 0) or 0),
        prompt_tokens=int(_field(state, "promptTokens", 0) or 0),
        completion_tokens=int(_field(state, "completionTokens", 0) or 0),
        estimated=bool(_field(state, "usageEstimated", False)),
    )


def tokens_exhausted(usage: TurnUsage, max_turn_tokens: int | None) -> bool:
    """The turn's prompt plus completion tokens have passed ``Context.max_turn_tokens``."""
    return max_turn_tokens is not None and usage.total_tokens > max_turn_tokens


def _chars(content: object) -> int:
    if isinstance(content, str):
        return len(content)
    if isinstance(content, list):
        return sum(
            _chars(part.get("text", "")) if isinstance(part, dict) else _chars(part)
            for part in content
        )
    return 0


def estimate_tokens(chars: int) -> int:
    """Tokens for ``chars`` characters (at least one for anything non-empty)."""
    return math.ceil(chars / CHARS_PER_TOKEN)


def _message_chars(message: BaseMessage) -> int:
    chars = _chars(message.content)
    if isinstance(message, AIMessage):
        chars += sum(
            len(call["name"]) + len(json.dumps(call["args"], sort_keys=True))
            for call in message.tool_calls
        )
    return chars


def call_usage(answer: AIMessage, prompt: Sequence[BaseMessage] | None) -> CallUsage:
    """The usage of the call that produced ``answer`` (sent ``prompt``): the server's figures,
    else an estimate from characters. A replayed answer (``prompt`` None: this run did not send
    it) with no recorded figures is estimated from its own text, the prompt counted as 0."""
    reported = answer.usage_metadata
    if reported and (reported.get("input_tokens") or reported.get("output_tokens")):
        return CallUsage(
            int(reported.get("input_tokens") or 0), int(reported.get("output_tokens") or 0), False
        )
    sent = sum(_message_chars(message) for message in prompt or ())
    return CallUsage(estimate_tokens(sent), estimate_tokens(_message_chars(answer)), True)


def split_evenly(total: int, parts: int) -> list[int]:
    """``total`` in ``parts`` shares that differ by at most one and add up to ``total``."""
    share, rest = divmod(total, parts)
    return [share + (1 if index < rest else 0) for index in range(parts)]


def charged_rows(rows: Iterable[TurnTodo]) -> list[str]:
    """Ids of the rows a call made now is charged to: those in progress."""
    return [row.id for row in rows if row.status == "in_progress"]


def usage_after_call(
    state_usage: TurnUsage,
    row_usage: Mapping[str, RowUsage],
    call: CallUsage,
    row_ids: Sequence[str],
) -> dict[str, Any]:
    """The state update that adds ``call`` to the turn and to the rows ``row_ids``."""
    rows = {row_id: dict(usage) for row_id, usage in row_usage.items()}
    if row_ids:
        prompt_shares = split_evenly(call.prompt_tokens, len(row_ids))
        completion_shares = split_evenly(call.completion_tokens, len(row_ids))
        for row_id, prompt, completion in zip(
            row_ids, prompt_shares, completion_shares, strict=True
        ):
            usage = rows.setdefault(row_id, empty_row_usage())
            usage["llmCalls"] += 1
            usage["promptTokens"] += prompt
            usage["completionTokens"] += completion
    return {
        "promptTokens": state_usage.prompt_tokens + call.prompt_tokens,
        "completionTokens": state_usage.completion_tokens + call.completion_tokens,
        "usageEstimated": state_usage.estimated or call.estimated,
        "rowUsage": rows,
    }


def empty_row_usage() -> RowUsage:
    return {"llmCalls": 0, "promptTokens": 0, "completionTokens": 0}


def todos_with_usage(
    todos: Iterable[dict[str, Any]], row_usage: Mapping[str, RowUsage]
) -> list[dict[str, Any]]:
    """The plan snapshot with each row's ``usage`` (zeros for a row no call was charged to)."""
    return [
        {**todo, "usage": dict(row_usage.get(str(todo.get("id")), empty_row_usage()))}
        for todo in todos
    ]
