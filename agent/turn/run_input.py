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
from typing import Any

from langchain_core.messages import AnyMessage, RemoveMessage

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


def input_problem(
    continue_plan: object, new_message: AnyMessage | None, context: Context
) -> ToolFailure | None:
    """What is wrong with a run's ``continuePlan`` and new human message, if anything."""
    if not isinstance(continue_plan, bool):
        return ToolFailure(
            ErrorCode.VALIDATION_ERROR,
            f"continuePlan must be true or false, not {json.dumps(continue_plan, default=str)}.",
            "Send continuePlan as a JSON boolean, or leave it out.",
            field="continuePlan",
        )
    if new_message is not None:
        size = message_size(new_message)
        if size > context.max_message_chars:
            return ToolFailure(
                ErrorCode.VALIDATION_ERROR,
                f"The message is {size} characters long; a message may have at most "
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


def refused_input(failure: ToolFailure, message: AnyMessage | None) -> dict[str, Any]:
    """The update of a run whose input was refused: ``inputError`` says why, and the run's
    message (if it is in the thread) is removed, so the thread is as it was before the run."""
    update: dict[str, Any] = {
        "inputError": failure.envelope(),
        "planEditResult": None,
        "continuePlan": False,
    }
    if message is not None and message.id:
        update["messages"] = [RemoveMessage(id=message.id)]
    return update
