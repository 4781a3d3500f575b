"""The call gate's shortcut: only the very message a model step of this run just wrote, once,
at the step that run claimed, skips the read; anything loaded from a checkpoint reads."""

from __future__ import annotations

from langchain_core.messages import AIMessage

from agent.calls.gate import note_fresh_message, take_fresh_message
from storage.repositories import TurnScope
from tests.fakes import ai, tool_call

SCOPE = TurnScope("conversation", "turn")


def test_the_message_just_written_skips_the_read_once() -> None:
    message = ai(tool_call("create_todo", items=[{"title": "one"}]))
    note_fresh_message(message, SCOPE, 3)
    assert take_fresh_message(message, SCOPE, 3)
    assert not take_fresh_message(message, SCOPE, 3), "a tools step run again must read"


def test_a_copy_of_the_message_reads() -> None:
    """A message loaded from a checkpoint is another object, even with the same content."""
    message = ai(tool_call("create_todo", items=[{"title": "one"}]))
    note_fresh_message(message, SCOPE, 3)
    assert not take_fresh_message(message.model_copy(deep=True), SCOPE, 3)


def test_another_step_or_turn_reads() -> None:
    message = ai(tool_call("create_todo", items=[{"title": "one"}]))
    note_fresh_message(message, SCOPE, 3)
    assert not take_fresh_message(message, SCOPE, 4)
    note_fresh_message(message, SCOPE, 3)
    assert not take_fresh_message(message, TurnScope("conversation", "turn/fork-1"), 3)


def test_an_answer_without_calls_is_not_kept() -> None:
    message = AIMessage(content="Done.")
    note_fresh_message(message, SCOPE, 3)
    assert not take_fresh_message(message, SCOPE, 3)
