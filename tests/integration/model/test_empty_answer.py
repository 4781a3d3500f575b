"""A reply with no text and no tool call is no answer: asked again once (one more call), and a
second empty reply ends the turn ``no_answer`` with the plan's state, on every path a model can
answer from; ``turnplan run`` exits non-zero for it and says why."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from agent.app.cli import main, run_exit_status
from agent.context import Context
from agent.graph import build_graph
from agent.llm.chat_models import clear_model_cache
from agent.state import TurnStatus
from agent.turn.empty_answer import is_empty_reply, is_written_tool_call
from prompts import load_prompt
from storage import Database
from tests.fakes import PlanOracle, ScriptedChatModel, ai, plan_rows, plan_view, tool_call
from tests.scripted_openai import Reply, ScriptedOpenAIServer, text

EMPTY_REPLIES: list[Any] = [
    "",
    "  \n\t",
    [{"type": "reasoning", "reasoning": "thinking it over"}],
    [{"type": "text", "text": "   "}],
]
"""What models send that holds no answer: nothing, whitespace, blocks with no text."""

ASKED = load_prompt("answer_required")


@tool
def record(note: str) -> str:
    """Record a note (the domain action of these tests)."""
    return f"recorded {note}"


def empty(number: int = 0) -> AIMessage:
    return AIMessage(content=EMPTY_REPLIES[number % len(EMPTY_REPLIES)])


@dataclass
class EmptyAnswers:
    """The inner model, except that its first ``times`` answers (replies without a tool call)
    come back empty."""

    inner: Callable[[list[BaseMessage]], AIMessage]
    times: int
    sent: int = field(default=0)

    def __call__(self, messages: list[BaseMessage]) -> AIMessage:
        reply = self.inner(messages)
        if reply.tool_calls or self.sent >= self.times:
            return reply
        self.sent += 1
        return empty(self.sent)


def action(title: str) -> dict[str, Any]:
    return tool_call("record", note=title)


def make_graph(model: ScriptedChatModel, database: Database, **kwargs: Any) -> Any:
    return build_graph(
        model, tools=[record], database=database, include_default_tools=False, **kwargs
    )


async def run(graph: Any, request: str, context: Context | None = None) -> Any:
    return await graph.ainvoke(
        {"messages": [HumanMessage(content=request)]}, context=context or Context()
    )


def query(database: Database, sql: str) -> list[tuple[Any, ...]]:
    path = database.url.split("///", 1)[1]
    with closing(sqlite3.connect(path)) as connection:
        return connection.execute(sql).fetchall()


def rows_in_db(database: Database) -> list[tuple[str, str]]:
    return [
        (title, status)
        for title, status in query(
            database, "SELECT title, status FROM turn_todos ORDER BY priority"
        )
    ]


def final_text(result: dict[str, Any]) -> str:
    return str(result["messages"][-1].content)


def asked_again_in(prompt: list[BaseMessage]) -> bool:
    """The prompt asks for a reply, and no empty reply is sent back to the model with it."""
    asked = any(ASKED in str(message.content) for message in prompt)
    return asked and not any(is_empty_reply(message) for message in prompt)


# --- what counts as empty ---------------------------------------------------------------------


@pytest.mark.parametrize("content", EMPTY_REPLIES)
def test_no_text_and_no_tool_call_is_empty(content: Any) -> None:
    assert is_empty_reply(AIMessage(content=content))


@pytest.mark.parametrize(
    "message",
    [
        AIMessage(content="Done."),
        AIMessage(content=[{"type": "text", "text": "Done."}]),
        ai(tool_call("record", note="x")),
        AIMessage(
            content="",
            invalid_tool_calls=[
                {
                    "type": "invalid_tool_call",
                    "name": "record",
                    "args": "{",
                    "id": "c1",
                    "error": "x",
                }
            ],
        ),
        HumanMessage(content=""),
    ],
)
def test_words_or_a_tool_call_are_not_empty(message: BaseMessage) -> None:
    assert not is_empty_reply(message)


# --- plan: a direct answer --------------------------------------------------------------------


async def test_an_empty_direct_answer_is_asked_again_once_and_the_real_one_is_the_answer(
    database: Database,
) -> None:
    model = ScriptedChatModel(script=[empty(), AIMessage(content="Hello! How can I help?")])

    result = await run(make_graph(model, database), "hi")

    assert result["turnStatus"] == "answered"
    assert final_text(result) == "Hello! How can I help?"
    assert model.calls == result["llmCalls"] == 2
    assert asked_again_in(model.prompts[1])


async def test_two_empty_direct_answers_end_the_turn_without_an_answer(database: Database) -> None:
    model = ScriptedChatModel(script=[empty(1), empty(2)])

    result = await run(make_graph(model, database), "hi")

    assert result["turnStatus"] == "no_answer"
    assert model.calls == result["llmCalls"] == 2
    message = final_text(result)
    assert "I have no answer to this request" in message
    assert "twice in a row" in message and "made no plan" in message


# --- a tool call written as text ---------------------------------------------------------------

WRITTEN_CALLS = [
    '<tool_call>{"name": "record", "arguments": {"note": "milk"}}</tool_call>',
    "<tools><create_todo items=[{'title': 'milk'}]></tools>",
    '{"name": "record", "arguments": {"note": "milk"}}',
    '```json\n[{"name": "record", "parameters": {"note": "milk"}}]\n```',
]
"""Replies that only write a call out: what packaged instruct models sent when the server did
not parse their format (Qwen2.5-Coder 1.5B wrote the second)."""


@pytest.mark.parametrize("content", WRITTEN_CALLS)
def test_a_tool_call_written_as_text_is_no_answer(content: str) -> None:
    assert is_written_tool_call(AIMessage(content=content))
    assert not is_empty_reply(AIMessage(content=content))


@pytest.mark.parametrize(
    "content",
    ["Done: I recorded milk.", 'The JSON was {"a": 1}.', "Use <b>bold</b> for titles."],
)
def test_an_answer_in_words_is_not_a_written_tool_call(content: str) -> None:
    assert not is_written_tool_call(AIMessage(content=content))


async def test_a_written_tool_call_is_asked_again_once_and_the_real_answer_is_taken(
    database: Database,
) -> None:
    model = ScriptedChatModel(
        script=[AIMessage(content=WRITTEN_CALLS[0]), AIMessage(content="Hello! How can I help?")]
    )

    result = await run(make_graph(model, database), "hi")

    assert result["turnStatus"] == "answered"
    assert final_text(result) == "Hello! How can I help?"
    assert any(
        load_prompt("tool_call_as_text") in str(message.content) for message in model.prompts[1]
    )


async def test_two_written_tool_calls_end_the_turn_saying_nothing_was_run(
    database: Database,
) -> None:
    model = ScriptedChatModel(
        script=[AIMessage(content=WRITTEN_CALLS[1]), AIMessage(content=WRITTEN_CALLS[0])]
    )

    result = await run(make_graph(model, database), "add milk")

    assert result["turnStatus"] == "no_answer"
    message = final_text(result)
    assert "wrote a tool call as text" in message and "nothing was run" in message
    assert run_exit_status(result["turnStatus"]) != 0


# --- execute: the answer after the plan -------------------------------------------------------


async def test_an_empty_answer_after_the_plan_costs_one_more_call(database: Database) -> None:
    model = ScriptedChatModel(responder=EmptyAnswers(PlanOracle(["one", "two"], action), 1))

    result = await run(make_graph(model, database), "one and two")

    assert result["turnStatus"] == "answered"
    assert final_text(result) == "Done: 2 items."
    assert model.calls == result["llmCalls"] == 2 + 2 + 1  # N + 2, and the one asked again
    assert asked_again_in(model.prompts[-1])


async def test_two_empty_answers_after_the_plan_report_what_was_done(database: Database) -> None:
    model = ScriptedChatModel(responder=EmptyAnswers(PlanOracle(["one", "two"], action), 2))

    result = await run(make_graph(model, database), "one and two")

    assert result["turnStatus"] == "no_answer"
    assert model.calls == 2 + 2 + 1
    message = final_text(result)
    assert "I have no answer to this request" in message
    assert "0 of 2 planned item(s) are still open" in message
    assert "Done:\n- one: did one\n- two: did two" in message
    assert rows_in_db(database) == [("one", "completed"), ("two", "completed")]


# --- drain: the reply to a reminder -----------------------------------------------------------


def after_a_reminder(*replies: AIMessage) -> Callable[[list[BaseMessage]], AIMessage]:
    """Plans one item; then answers too early (a reminder follows), then ``replies`` in turn;
    then follows the plan."""
    oracle = PlanOracle(["one"], action)
    queue = [AIMessage(content="All done!"), *replies]
    calls = {"n": 0}

    def respond(messages: list[BaseMessage]) -> AIMessage:
        calls["n"] += 1
        if calls["n"] > 1 and queue:
            return queue.pop(0)
        return oracle(messages)

    return respond


async def test_an_empty_reply_to_a_reminder_is_asked_again_and_the_plan_finishes(
    database: Database,
) -> None:
    model = ScriptedChatModel(responder=after_a_reminder(empty()))

    result = await run(make_graph(model, database), "one")

    assert result["turnStatus"] == "answered"
    assert final_text(result) == "Done: 1 items."
    # plan, too early, empty, close, answer: the one item's N + 2, the reminded answer and one
    # more call for the empty reply.
    assert model.calls == result["llmCalls"] == 5
    assert "Do not answer yet" in str(model.prompts[2][-1].content)
    assert asked_again_in(model.prompts[3])
    assert rows_in_db(database) == [("one", "completed")]


async def test_two_empty_replies_to_a_reminder_leave_the_open_item_listed(
    database: Database,
) -> None:
    model = ScriptedChatModel(responder=after_a_reminder(empty(2), empty(3)))

    result = await run(make_graph(model, database), "one")

    assert result["turnStatus"] == "no_answer"
    assert model.calls == 4
    message = final_text(result)
    assert "1 of 1 planned item(s) are still open" in message
    assert "Not done:\n- one (was in progress)" in message
    assert rows_in_db(database) == [("one", "in_progress")]


# --- the compact profile (the embedded local model's) -----------------------------------------

COMPACT = Context(prompt_profile="compact")


async def test_compact_profile_asks_an_empty_direct_answer_again(database: Database) -> None:
    model = ScriptedChatModel(script=[empty(), AIMessage(content="Hi there.")])

    result = await run(make_graph(model, database), "hi", COMPACT)

    assert result["turnStatus"] == "answered"
    assert final_text(result) == "Hi there."
    assert model.calls == 2
    assert asked_again_in(model.prompts[1])


async def test_compact_profile_ends_two_empty_direct_answers_as_no_answer(
    database: Database,
) -> None:
    model = ScriptedChatModel(script=[empty(), empty(1)])

    result = await run(make_graph(model, database), "hi", COMPACT)

    assert result["turnStatus"] == "no_answer"
    assert "I have no answer to this request" in final_text(result)


@tool
def rate(note: str, mood: Literal["good", "bad"]) -> str:
    """Rate a note."""
    return f"rated {note} {mood}"


async def test_compact_profile_asks_an_empty_step_again_and_finishes_the_item(
    database: Database,
) -> None:
    """An item whose action leaves the model a choice (``mood``): its empty reply is asked
    again, and the item is closed by the harness from the action's result."""
    script = [
        ai(tool_call("plan_steps", one="rate")),  # the plan: which tool does "one"
        empty(),  # the item's action step
        ai(tool_call("rate", note="one", mood="good")),
    ]
    model = ScriptedChatModel(script=script)
    graph = build_graph(model, tools=[rate], database=database, include_default_tools=False)

    result = await run(graph, "one", COMPACT)

    assert result["turnStatus"] == "answered"  # the closing answer is built from the rows
    assert model.calls == 3
    assert asked_again_in(model.prompts[2])
    [(status, outcome)] = query(database, "SELECT status, outcome FROM turn_todos")
    assert (status, outcome) == ("completed", "rate succeeded")
    assert rows_in_db(database) == [("one", "completed")]


# --- the budget -------------------------------------------------------------------------------


async def test_an_empty_reply_on_the_last_allowed_call_is_no_answer(database: Database) -> None:
    model = ScriptedChatModel(script=[empty()])

    result = await run(
        make_graph(model, database), "hi", Context(base_iterations=1, max_iterations=1)
    )

    assert result["turnStatus"] == "no_answer"
    assert model.calls == 1
    assert "on the last model call this turn was allowed" in final_text(result)


async def test_asking_again_is_counted_against_the_budget(database: Database) -> None:
    model = ScriptedChatModel(script=[empty(), empty(1)])

    result = await run(
        make_graph(model, database), "hi", Context(base_iterations=2, max_iterations=2)
    )

    assert result["turnStatus"] == "no_answer"
    assert result["llmCalls"] == 2 and model.calls == 2


async def test_an_empty_reply_with_the_budget_spent_and_items_open_is_budget_exhausted(
    database: Database,
) -> None:
    model = ScriptedChatModel(
        script=[ai(tool_call("create_todo", items=[{"title": "one"}, {"title": "two"}])), empty()]
    )

    result = await run(
        make_graph(model, database), "one and two", Context(base_iterations=2, max_iterations=2)
    )

    assert result["turnStatus"] == "budget_exhausted"
    assert "Not done:\n- one (was in progress)\n- two" in final_text(result)


# --- the reply to a plan decision -------------------------------------------------------------

THREAD: RunnableConfig = {"configurable": {"thread_id": "empty-after-approval"}}


def plans_one_then_answers(messages: list[BaseMessage]) -> AIMessage:
    if not plan_rows(plan_view(messages)):
        return ai(tool_call("create_todo", items=[{"title": "one"}]))
    return AIMessage(content="Understood, nothing was done.")


@pytest.mark.parametrize(("empties", "status"), [(1, "answered"), (2, "no_answer")])
async def test_an_empty_reply_after_a_rejected_plan_is_asked_again(
    database: Database, empties: int, status: str
) -> None:
    model = ScriptedChatModel(responder=EmptyAnswers(plans_one_then_answers, empties))
    graph = make_graph(model, database, checkpointer=InMemorySaver())
    context = Context(approve_plan=True)
    paused = await graph.ainvoke(
        {"messages": [HumanMessage(content="one")]}, THREAD, context=context
    )
    assert paused["__interrupt__"]

    done = await graph.ainvoke(
        Command(resume={"action": "reject", "reason": "not today"}), THREAD, context=context
    )

    assert done["turnStatus"] == status
    assert model.calls == 3
    assert asked_again_in(model.prompts[2])
    if status == "no_answer":
        assert "Done:\n- one (cancelled: Rejected by the user: not today)" in final_text(done)


# --- turnplan run: exit status, over HTTP through ChatOpenAI ----------------------------------


def test_every_status_but_answered_exits_non_zero_with_a_code_of_its_own() -> None:
    endings = [status for status in get_args(TurnStatus) if status != "running"] + ["paused"]
    codes = {status: run_exit_status(status) for status in endings}
    assert codes["answered"] == 0
    others = [code for status, code in codes.items() if status != "answered"]
    assert 0 not in others and 2 not in others  # 2 is a usage error
    assert len(set(others)) == len(others)


def cli_run(server: ScriptedOpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    clear_model_cache()
    database = f"sqlite+aiosqlite:///{tmp_path / 'cli.db'}"
    return main(["run", "--model", "openai:scripted", "--database", database, "hello"])


def test_run_asks_an_empty_completion_again_and_exits_zero_on_the_real_answer(
    scripted_openai: ScriptedOpenAIServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    scripted_openai.reply(Reply(content=None), text("Hello there."))

    status = cli_run(scripted_openai, tmp_path, monkeypatch)

    out = capsys.readouterr().out
    assert status == 0
    assert "answer:\nHello there." in out
    assert "turn answered · 2 LLM call(s) in 2 step(s)" in out
    second = scripted_openai.requests[1]["messages"]
    assert ASKED in str(second[-1]["content"])
    assert not any(message["role"] == "assistant" for message in second)


def test_run_exits_no_answer_after_two_empty_completions_and_says_why(
    scripted_openai: ScriptedOpenAIServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    scripted_openai.reply(Reply(content=None), text(""))

    status = cli_run(scripted_openai, tmp_path, monkeypatch)

    captured = capsys.readouterr()
    assert status == run_exit_status("no_answer") == 5
    assert "I have no answer to this request" in captured.out
    assert "turn no_answer · 2 LLM call(s) in 2 step(s)" in captured.out
    assert captured.err.strip().splitlines()[-1] == (
        "turnplan run: turn no_answer (exit 5): the model replied with nothing, no text and no "
        "tool call, also when asked again (the message above gives the plan's state)."
    )
    assert len(scripted_openai.requests) == 2
