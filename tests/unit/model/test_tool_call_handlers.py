"""How a Qwen model's reply becomes OpenAI tool calls on the embedded server (the handler's
parsing, without a model): every shape the real models were seen to answer in is understood,
and text that is not a call stays the answer."""

from __future__ import annotations

import json

import pytest

from agent.llm.tool_call_handlers import parse_tool_calls

ADD_MILK = {"name": "add_task", "arguments": {"title": "buy milk"}}


def _calls(text: str) -> tuple[str | None, list[tuple[str, object]]]:
    content, calls = parse_tool_calls(text)
    return content, [
        (call["function"]["name"], json.loads(call["function"]["arguments"])) for call in calls
    ]


@pytest.mark.parametrize(
    "reply",
    [
        # llama.cpp drops the special <tool_call> tokens from the text (Qwen2.5-Coder 0.5B)
        json.dumps(ADD_MILK),
        # the template's own example, braces doubled (Qwen2.5-Coder 1.5B copies it)
        "{" + json.dumps(ADD_MILK) + "}",
        # a fenced block (Qwen2.5-Coder 1.5B)
        "```json\n" + json.dumps(ADD_MILK, indent=2) + "\n```",
        # the tags, when they survive
        "<tool_call>\n" + json.dumps(ADD_MILK) + "\n</tool_call>",
    ],
    ids=["bare", "doubled-braces", "fenced", "tagged"],
)
def test_each_shape_of_a_call_becomes_a_tool_call(reply: str) -> None:
    assert _calls(reply) == (None, [("add_task", {"title": "buy milk"})])


def test_several_calls_and_a_sentence_before_them() -> None:
    reply = (
        "I'll add both.\n"
        + json.dumps(ADD_MILK)
        + "\n"
        + json.dumps({"name": "add_task", "arguments": {"title": "do laundry"}})
    )

    assert _calls(reply) == (
        "I'll add both.",
        [("add_task", {"title": "buy milk"}), ("add_task", {"title": "do laundry"})],
    )


def test_each_call_gets_its_own_id() -> None:
    _, calls = parse_tool_calls(json.dumps(ADD_MILK) + json.dumps(ADD_MILK))

    assert len({call["id"] for call in calls}) == 2


def test_a_call_with_broken_json_is_kept_with_its_raw_text() -> None:
    """Not lost and not shown as an answer: the client reports it as an invalid tool call."""
    content, calls = parse_tool_calls('<tool_call>\n{"name": "add_task", "arguments": {"title": ')

    assert content is None
    assert calls[0]["function"]["name"] == "add_task"
    assert calls[0]["function"]["arguments"].endswith('{"title":')


@pytest.mark.parametrize(
    "reply",
    ["You have 2 open tasks.", 'The result is {"total": 2}.', '{"name": "Ann", "age": 3}'],
)
def test_an_answer_that_is_not_a_call_stays_the_answer(reply: str) -> None:
    assert parse_tool_calls(reply) == (reply, [])
