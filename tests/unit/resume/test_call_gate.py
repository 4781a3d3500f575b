"""The call gate's shortcut: only the very message a model step of this run just wrote, at the
step that run claimed, skips the read; anything loaded from a checkpoint reads, and after its
tools step nothing is fresh."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage

from agent.calls.gate import FRESH_MESSAGE, NOT_FRESH, fresh_message, is_fresh
from agent.state import SupervisorState
from storage.repositories import TurnScope
from tests.fakes import ai, tool_call

SCOPE = TurnScope("conversation", "turn")


def _state(update: dict[str, Any]) -> SupervisorState:
    return SupervisorState(freshMessage=update[FRESH_MESSAGE])


def test_the_message_just_written_skips_the_read() -> None:
    message = ai(tool_call("create_todo", items=[{"title": "one"}]))
    state = _state(fresh_message(message, SCOPE, 3))
    assert is_fresh(state, message, SCOPE, 3)
    assert is_fresh({FRESH_MESSAGE: state.freshMessage}, message, SCOPE, 3), "a dict state too"
    assert not is_fresh(_state(NOT_FRESH), message, SCOPE, 3), "after the tools step"


def test_a_copy_of_the_message_reads() -> None:
    """A message loaded from a checkpoint is another object, even with the same content."""
    message = ai(tool_call("create_todo", items=[{"title": "one"}]))
    state = _state(fresh_message(message, SCOPE, 3))
    assert not is_fresh(state, message.model_copy(deep=True), SCOPE, 3)


def test_another_step_or_turn_reads() -> None:
    message = ai(tool_call("create_todo", items=[{"title": "one"}]))
    state = _state(fresh_message(message, SCOPE, 3))
    assert not is_fresh(state, message, SCOPE, 4)
    assert not is_fresh(state, message, TurnScope("conversation", "turn/fork-1"), 3)


def test_an_answer_without_calls_or_a_step_not_claimed_is_not_fresh() -> None:
    answer = AIMessage(content="Done.")
    assert fresh_message(answer, SCOPE, 3) == NOT_FRESH
    message = ai(tool_call("create_todo", items=[{"title": "one"}]))
    assert fresh_message(message, SCOPE, None) == NOT_FRESH


def test_a_state_loaded_from_a_checkpoint_has_nothing_fresh() -> None:
    """The channel is never checkpointed: a state built from saved values has its default."""
    message = ai(tool_call("create_todo", items=[{"title": "one"}]))
    assert not is_fresh(SupervisorState(), message, SCOPE, 3)
