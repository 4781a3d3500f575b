"""Token usage of a turn and of each of its rows (issue 29 §5).

Every LLM call's usage comes from the answer's ``usage_metadata``; a server that reports none
(llama.cpp builds, some proxies) gets an estimate from the characters sent and received, and the
turn is marked ``usageEstimated`` so nobody takes the figure for a bill. A call is charged to the
rows in progress when it was made: a stage of rows started together shares it evenly (the
remainder of the division goes to the first rows, so the rows add up to what the calls cost);
calls made with no row in progress (the planning call, the closing answer) count for the turn
only. The totals live in graph state, so they are checkpointed and survive a resume; per-row
figures are written to ``turn_row_usage`` when the turn ends (``store_row_usage``).

``turn_usage(state)`` is the one reader of a turn's totals (workers that share the turn's budget
read it too); ``tokens_exhausted`` is the one rule of ``Context.max_turn_tokens``.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import LLMResult
from sqlalchemy.exc import SQLAlchemyError

from storage import Database
from storage.models import TurnTodo
from storage.repositories import TurnScope, save_row_usage_alone

logger = logging.getLogger(__name__)

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


def _reported(message: object) -> tuple[int, int] | None:
    usage = message.usage_metadata if isinstance(message, AIMessage) else None
    if usage and (usage.get("input_tokens") or usage.get("output_tokens")):
        return int(usage.get("input_tokens") or 0), int(usage.get("output_tokens") or 0)
    return None


class UsageRecorder(BaseCallbackHandler):
    """Watches the chat model requests one model step really makes: a step of the compact
    profile may make none (the harness answers) or two (a plan, then a free answer), and its
    result message may be rebuilt without the server's figures.

    A plain handler run inline: it only counts, and an async handler costs a task and a gather
    per event on every model call."""

    run_inline = True
    ignore_chain = True
    ignore_retriever = True
    ignore_agent = True

    def __init__(self) -> None:
        self.requests = 0
        self.reported: list[tuple[int, int]] = []

    def on_chat_model_start(self, *args: Any, **kwargs: Any) -> None:
        self.requests += 1

    def on_llm_end(self, response: LLMResult, **kwargs: Any) -> None:
        for generations in response.generations:
            for generation in generations:
                figures = _reported(getattr(generation, "message", None))
                if figures is not None:
                    self.reported.append(figures)


def call_usage(
    answer: AIMessage,
    prompt: Sequence[BaseMessage] | None,
    recorder: UsageRecorder | None = None,
) -> CallUsage:
    """The usage of the model step that produced ``answer`` (sent ``prompt``).

    With a ``recorder``: nothing for a step that made no request; the servers' figures when every
    request reported them; else an estimate from characters (the prompt once per request). A
    replayed answer (``prompt`` None: this run did not send it) is counted from its recorded
    figures, else estimated from its own text, the prompt counted as 0."""
    if recorder is not None:
        if recorder.requests == 0:
            return CallUsage(0, 0, False)
        if len(recorder.reported) >= recorder.requests:
            return CallUsage(
                sum(figures[0] for figures in recorder.reported),
                sum(figures[1] for figures in recorder.reported),
                False,
            )
    else:
        figures = _reported(answer)
        if figures is not None:
            return CallUsage(*figures, False)
    requests = recorder.requests if recorder is not None else 1
    sent = sum(_message_chars(message) for message in prompt or ()) * requests
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


async def store_row_usage(
    database: Database, scope: TurnScope, row_usage: Mapping[str, RowUsage], estimated: bool
) -> None:
    """Write the turn's per-row usage to ``turn_row_usage`` as the turn ends (one statement).
    A database that fails here costs the answer nothing: the figures stay in the turn's state
    (``rowUsage``, ``todos[i].usage``), and the failure is logged for the operator."""
    if not row_usage or not scope.turn_id:
        return
    try:
        await save_row_usage_alone(database, scope, row_usage, estimated=estimated)
    except (SQLAlchemyError, OSError) as error:
        logger.warning(
            "row usage of turn %s (conversation %s) not stored: %r; it stays in the state",
            scope.turn_id,
            scope.conversation_id,
            error,
        )


def usage_after_workers(
    state_usage: TurnUsage,
    row_usage: Mapping[str, RowUsage],
    spent: Iterable[Mapping[str, Any]],
) -> tuple[TurnUsage, dict[str, RowUsage]]:
    """The turn's usage and rows' usage once the workers of a round (``workerUsage`` entries,
    one per delegation) are added: every token a worker spent is the turn's and its row's, so
    ``max_turn_tokens`` sees it (issue 30 §4). Several delegations of one round add up."""
    rows = {row_id: dict(usage) for row_id, usage in row_usage.items()}
    prompt, completion = state_usage.prompt_tokens, state_usage.completion_tokens
    estimated = state_usage.estimated
    for entry in spent:
        prompt += int(entry.get("promptTokens", 0))
        completion += int(entry.get("completionTokens", 0))
        estimated = estimated or bool(entry.get("estimated", False))
        row_id = str(entry.get("todoId") or "")
        if row_id:
            usage = rows.setdefault(row_id, empty_row_usage())
            usage["llmCalls"] += int(entry.get("llmCalls", 0))
            usage["promptTokens"] += int(entry.get("promptTokens", 0))
            usage["completionTokens"] += int(entry.get("completionTokens", 0))
    return TurnUsage(state_usage.llm_calls, prompt, completion, estimated), rows
