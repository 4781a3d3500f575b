"""A new message on a thread paused at ``ask_user`` is the answer, not a new turn.

A user who types into the chat box while the agent waits for their answer means it as the
answer, and a client that does not know about interrupts can only send messages. So when a turn
is still running, and the message before the new one is an AI message whose ``ask_user`` call
has no result, the ``plan`` node turns the new message into that call's result and the turn
goes on; the new message itself leaves the history, because a tool result must follow the AI
message that asked for it.

Only a question the user was shown counts: ``ask_user`` records it (``asked_questions``) just
before the run pauses. A call left without a result by a run that stopped before asking (a
crash, a cancelled run) was never seen, so the next message starts a new turn, and the call is
answered ``NOT_RUN`` like any other orphan (``agent.prompting.builder``).

agent-chat-ui sends a reply as a new run whose input first closes every open tool call with a
placeholder ``ToolMessage`` (id ``do-not-render-...``, content "Successfully handled tool
call.") and then the human message. A placeholder is no result: it is looked through when the
pending question is found, and removed with the message that answers it, so the question is
answered by the user's words and the other calls of that message still run.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    HumanMessage,
    RemoveMessage,
    ToolCall,
    ToolMessage,
)
from sqlalchemy.exc import SQLAlchemyError

from agent.errors import database_failure
from agent.tool_names import ASK_USER
from agent.turn.identity import call_record_id, message_text
from agent.turn.review import (
    DecisionType,
    hitl_request,
    is_hitl_response,
    parse_hitl_response,
)
from storage import Database
from storage.repositories import AskedQuestionRepository, ToolCallKey

NO_ANSWER = "(the user gave no answer)"
PLACEHOLDER_PREFIX = "do-not-render-"
"""agent-chat-ui's id prefix for the tool messages it adds to close open calls."""
QUESTION_DECISIONS: tuple[DecisionType, ...] = ("respond", "edit", "reject")
DECLINED = "The user declined to answer"


def is_placeholder(message: AnyMessage) -> bool:
    """A tool message a client added only to close an open call (not a tool result)."""
    return isinstance(message, ToolMessage) and (message.id or "").startswith(PLACEHOLDER_PREFIX)


def question_request(
    question: str, options: list[str] | None, todo: dict[str, Any] | None, error: str = ""
) -> dict[str, Any]:
    """The interrupt value of ``ask_user``: the short form's keys and a ``HITLRequest``."""
    description = question if not options else f"{question}\nOptions: " + "; ".join(options)
    if error:
        description = f"{error}\n\n{description}"
    args: dict[str, Any] = {"question": question, "options": options or [], "answer": ""}
    payload: dict[str, Any] = {
        "type": "question",
        "question": question,
        "options": options,
        "todo": todo,
        **hitl_request(ASK_USER, args, description, QUESTION_DECISIONS),
    }
    if error:
        payload["error"] = error
    return payload


def answer_of(value: Any) -> str:
    """The resume value of a question as the tool's result (``ValueError``: a malformed
    ``{"decisions": [...]}``, asked again)."""
    if not is_hitl_response(value):
        return answer_text(value)
    decision = parse_hitl_response(value, ASK_USER, QUESTION_DECISIONS)
    if decision.type == "respond":
        return decision.message
    if decision.type == "reject":
        return f"{DECLINED}: {decision.message}" if decision.message else f"{DECLINED}."
    answer = decision.args.get("answer")
    if not isinstance(answer, str) or not answer.strip():
        raise ValueError('"edit" needs the answer in the "answer" argument.')
    return answer.strip()


def answer_text(answer: Any) -> str:
    """An answer as the question's result: text as given, anything else as JSON."""
    if answer is None or (isinstance(answer, str) and not answer.strip()):
        return NO_ANSWER
    if isinstance(answer, str):
        return answer
    return json.dumps(answer, ensure_ascii=False)


@dataclass(frozen=True)
class PendingQuestion:
    """An ``ask_user`` call without a result, and the id it is recorded under
    (``agent.turn.identity.call_record_id``)."""

    call: ToolCall
    record_id: str
    placeholders: tuple[str, ...] = ()
    """Ids of client placeholders closing the call (``is_placeholder``), to remove."""


async def mark_question_asked(database: Database, key: ToolCallKey) -> None:
    """Note that the question of call ``key`` is being put to the user (the run pauses next)."""
    if not key.conversation_id or not key.tool_call_id:
        return
    try:
        async with database.session() as session:
            await AskedQuestionRepository(session).mark_asked(key)
    except (SQLAlchemyError, OSError) as error:
        raise database_failure(error, "question record") from error


async def question_was_asked(database: Database, conversation_id: str, record_id: str) -> bool:
    """Whether the user was shown this question (``mark_question_asked``)."""
    try:
        async with database.session(readonly=True) as session:
            return await AskedQuestionRepository(session).was_asked(conversation_id, record_id)
    except (SQLAlchemyError, OSError) as error:
        raise database_failure(error, "question record") from error


def pending_question(messages: Sequence[AnyMessage], human: HumanMessage) -> PendingQuestion | None:
    """The unanswered ``ask_user`` call the new ``human`` message would answer, if any."""
    try:
        position = next(i for i, m in enumerate(messages) if m is human)
    except StopIteration:
        return None
    answered: set[str] = set()
    placeholders: list[str] = []
    for message in reversed(messages[:position]):
        if is_placeholder(message):
            placeholders.append(message.id or "")
        elif isinstance(message, ToolMessage):
            answered.add(message.tool_call_id)
        elif isinstance(message, AIMessage):
            call = next(
                (
                    call
                    for call in message.tool_calls
                    if call["name"] == ASK_USER and call["id"] not in answered
                ),
                None,
            )
            if call is None:
                return None
            record_id = call_record_id(message.id, call["id"] or "")
            return PendingQuestion(call, record_id, tuple(placeholders))
        else:
            return None
    return None


def answer_with_message(question: PendingQuestion, human: HumanMessage) -> dict[str, Any]:
    """The state update that makes ``human`` the result of the question's call (a client's
    placeholders closing that message's calls leave the history with it)."""
    assert human.id, "add_messages gives every message an id"
    call = question.call
    return {
        "messages": [
            *(RemoveMessage(id=placeholder) for placeholder in question.placeholders),
            RemoveMessage(id=human.id),
            ToolMessage(
                content=answer_text(message_text(human)),
                tool_call_id=call["id"] or "",
                name=ASK_USER,
            ),
        ]
    }
