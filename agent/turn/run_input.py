"""Checks of a run's own input, made before it can start any work.

LangGraph takes a run's input into the state as it comes (a dataclass state schema converts
nothing), so a client of the server may send any JSON: ``continuePlan: "yes"``, a message of
megabytes. Everything a run's input makes the server do grows with it (every byte of the
message is sent with each of the turn's LLM calls; a continuation copies rows), so each input
has a cap, and an input past it, or of the wrong type, is refused before a turn starts: the
update says why in ``inputError`` (``VALIDATION_ERROR``), removes the run's message from the
thread and writes nothing to the database. ``planEdits`` are checked where they are applied
(``agent.turn.plan_edits``), and refused in ``planEditResult``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AnyMessage, HumanMessage, RemoveMessage

from agent.context import Context
from agent.errors import ErrorCode, ToolFailure
from agent.turn.continuation import open_titles_elsewhere
from agent.turn.plan_rows import PlanLimits, check_plan_size
from storage import Database
from storage.repositories import TurnScope


def message_size(message: AnyMessage) -> int:
    """The characters of a message's content: its text, or the JSON of its content blocks
    (an image sent as base64 costs its size like any text)."""
    content = message.content
    if isinstance(content, str):
        return len(content)
    return len(json.dumps(content, ensure_ascii=False, default=str))


def run_messages(messages: Sequence[AnyMessage], turn_message_id: str) -> list[AnyMessage]:
    """The human messages at the end of the thread, after its last message of another kind
    (and after the current turn's own message): the request this run sends, in one message or
    split into several. Their size is counted together; each is kept in the thread and may be
    sent with the turn's LLM calls. (A run's whole input is bounded by the server's request
    body cap, ``agent.server``.)"""
    added: list[AnyMessage] = []
    for message in reversed(messages):
        if not isinstance(message, HumanMessage) or message.id == turn_message_id:
            break
        added.append(message)
    return added[::-1]


def input_problem(
    continue_plan: object, new_messages: Sequence[AnyMessage], context: Context
) -> ToolFailure | None:
    """What is wrong with a run's ``continuePlan`` and its new messages, if anything."""
    if not isinstance(continue_plan, bool):
        return ToolFailure(
            ErrorCode.VALIDATION_ERROR,
            f"continuePlan must be true or false, not {json.dumps(continue_plan, default=str)}.",
            "Send continuePlan as a JSON boolean, or leave it out.",
            field="continuePlan",
        )
    size = sum(message_size(message) for message in new_messages)
    if size > context.max_message_chars:
        return ToolFailure(
            ErrorCode.VALIDATION_ERROR,
            f"This run's new messages hold {size} characters; a run may send at most "
            f"{context.max_message_chars}.",
            "Shorten the message, or split the request into several turns.",
            field="messages",
            limit=context.max_message_chars,
        )
    return None


async def continuation_problem(
    database: Database, scope: TurnScope, limits: PlanLimits
) -> ToolFailure | None:
    """Whether continuing the open rows of the conversation's other turns into ``scope``'s
    new turn would pass ``max_plan_rows`` (checked before the turn is begun; the copy checks
    again in its own transaction, ``agent.turn.continuation``)."""
    waiting = await open_titles_elsewhere(database, scope)
    try:
        check_plan_size(0, len(waiting), limits, "Continuing the open plan")
    except ToolFailure as failure:
        failure.extra["field"] = "continuePlan"
        return failure
    return None


def refused_input(failure: ToolFailure, messages: Sequence[AnyMessage]) -> dict[str, Any]:
    """The update of a run whose input was refused: ``inputError`` says why, and the run's
    ``messages`` are removed, so the thread is as it was before the run."""
    update: dict[str, Any] = {
        "inputError": failure.envelope(),
        "planEditResult": None,
        "continuePlan": False,
    }
    removed = [RemoveMessage(id=message.id) for message in messages if message.id]
    if removed:
        update["messages"] = removed
    return update
