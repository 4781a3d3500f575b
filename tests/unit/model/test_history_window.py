"""The history window leaves out the turn's steps the plan view already reports, and nothing
the model still needs: the step that opened the current item, what came after it, the request
and earlier turns."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage

from agent.prompting.builder import COMPACT, model_messages, without_reported_steps
from storage.models import TurnTodo
from tests.fakes import plan_rows, plan_view, tool_call, window_of

REQUEST = "Please do one, two and three."


def step(*calls: dict[str, Any], errors: frozenset[str] = frozenset()) -> list[AnyMessage]:
    """An AI message with ``calls`` and one result for each (an error for names in ``errors``)."""
    results: list[AnyMessage] = [
        ToolMessage(
            content="failed" if call["name"] in errors else "ok",
            tool_call_id=call["id"],
            name=call["name"],
            status="error" if call["name"] in errors else "success",
        )
        for call in calls
    ]
    return [AIMessage(content="", tool_calls=list(calls)), *results]


EARLIER = [HumanMessage("hello", id="h0"), AIMessage("hi")]
OPENING = HumanMessage(REQUEST, id="h1")
PLANNED = step(tool_call("create_todo", items=[]), tool_call("act", item="one"))
CLOSED_ONE = step(
    tool_call("complete_todo", todoId="1", outcome="ok"), tool_call("act", item="two")
)


def test_the_window_starts_again_at_the_step_that_opened_the_current_item() -> None:
    window = [*EARLIER, OPENING, *PLANNED, *CLOSED_ONE]

    assert without_reported_steps(window, "h1") == [*EARLIER, OPENING, *CLOSED_ONE]


def test_what_came_after_that_step_stays() -> None:
    answered = [AIMessage("done?"), HumanMessage("You answered, but ...", name="reminder")]
    window = [OPENING, *PLANNED, *CLOSED_ONE, *answered]

    assert without_reported_steps(window, "h1") == [OPENING, *CLOSED_ONE, *answered]


def test_a_failed_close_changed_nothing_so_the_work_before_it_stays() -> None:
    failed = step(
        tool_call("complete_todo", todoId="bad", outcome="x"), errors=frozenset({"complete_todo"})
    )
    window = [OPENING, *PLANNED, *failed]

    assert without_reported_steps(window, "h1") == window


def test_with_the_request_out_of_the_window_everything_in_it_is_this_turn() -> None:
    assert without_reported_steps([*PLANNED, *CLOSED_ONE], "h1") == CLOSED_ONE


def test_without_a_turn_id_nothing_is_dropped() -> None:
    window = [*EARLIER, OPENING, *PLANNED, *CLOSED_ONE]

    assert without_reported_steps(window, None) == window


def test_with_a_plan_the_prompt_has_the_request_the_plan_then_the_work_it_does_not_report() -> None:
    """The plan view follows the request; of the step that closed item one, the close (the view
    shows it) is left out and the work on item two stays, with its result."""
    rows = [
        TurnTodo(id="1" * 36, title="one", status="completed", outcome="ok"),
        TurnTodo(id="2" * 36, title="two", status="in_progress"),
    ]
    history = [OPENING, *PLANNED, *CLOSED_ONE]

    prompt = model_messages(
        base_prompt="stable",
        history=history,
        history_limit=10,
        rows=rows,
        turn_request=REQUEST,
        turn_message_id="h1",
    )

    act_two = CLOSED_ONE[0].tool_calls[1]
    window = window_of(prompt)
    assert window[0] == OPENING and window[2:] == [CLOSED_ONE[2]]
    assert isinstance(window[1], AIMessage) and window[1].tool_calls == [act_two]
    assert str(prompt[1].content) == f"{REQUEST}\n\n{plan_view(prompt)}"
    assert REQUEST not in plan_view(prompt)  # the request is sent once, as the user wrote it
    assert [row.mark for row in plan_rows(plan_view(prompt))] == ["x", ">"]
    kept_all = model_messages(
        base_prompt="stable",
        history=history,
        history_limit=10,
        rows=rows,
        turn_request=REQUEST,
        turn_message_id="h1",
        profile=COMPACT,  # its window was measured with the small model as it is
    )
    assert kept_all[1:-1] == history


def test_the_prompt_never_sends_two_user_messages_in_a_row() -> None:
    """Chat templates that insist on alternating roles reject that: a user message that would
    follow another (a note after the request, the plan view after a reminder) joins it, and the
    history keeps its messages as they were."""
    rows = [TurnTodo(id="1" * 36, title="one", status="in_progress")]
    note = HumanMessage("The user approved the plan.", name="note", id="n1")
    prompt = model_messages(
        base_prompt="stable",
        history=[OPENING, note],
        history_limit=10,
        rows=rows,
        turn_request=REQUEST,
        turn_message_id="h1",
    )

    assert [message.type for message in prompt] == ["system", "human"]
    assert plan_rows(plan_view(prompt))
    assert str(prompt[-1].content) == f"{REQUEST}\n\n{plan_view(prompt)}\n\n{note.content}"
    assert window_of(prompt)[-1].content == f"{REQUEST}\n\n{note.content}"
    assert OPENING.content == REQUEST and note.content == "The user approved the plan."


def test_a_tool_group_longer_than_the_window_is_sent_whole_and_old_history_is_not_sent() -> None:
    """The newest step made more tool calls than the window holds: it goes from its AI message
    with every result (a result without its call is rejected by OpenAI-compatible servers);
    an earlier step whose call never got a result is older than the window and is not sent."""
    broken = [AIMessage(content="", tool_calls=[tool_call("act", item="lost")])]
    wide = step(*(tool_call("act", item=str(number)) for number in range(5)))
    history = [*EARLIER, *broken, HumanMessage("next", id="h2"), *wide]

    prompt = model_messages(
        base_prompt="stable",
        history=history,
        history_limit=3,
        rows=[],
        turn_request="next",
        turn_message_id="h2",
    )

    assert window_of(prompt)[: len(wide)] == wide
    assert all(
        message.tool_call_id != broken[0].tool_calls[0]["id"]
        for message in prompt
        if isinstance(message, ToolMessage)
    )
