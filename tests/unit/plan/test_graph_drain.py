"""The supervisor graph with a scripted model: planning, draining, budget, reminders, errors."""

from __future__ import annotations

import itertools
import json
import sqlite3
from contextlib import closing
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from agent.context import Context
from agent.graph import build_graph
from storage import Database
from tests.fakes import (
    PlanOracle,
    ScriptedChatModel,
    ai,
    plan_rows,
    plan_view,
    tool_call,
    window_of,
)

DONE: list[str] = []


@tool
def record(note: str) -> str:
    """Record a note (the domain action of these tests)."""
    DONE.append(note)
    return json.dumps({"recorded": note})


@pytest.fixture(autouse=True)
def _clear_done() -> None:
    DONE.clear()


def rows_in_db(database: Database) -> list[tuple[str, str, str | None]]:
    path = database.url.split("///", 1)[1]
    with closing(sqlite3.connect(path)) as connection:
        return connection.execute(
            "SELECT title, status, outcome FROM turn_todos ORDER BY priority"
        ).fetchall()


def make_graph(model: ScriptedChatModel, database: Database, **kwargs: Any) -> Any:
    return build_graph(
        model, tools=[record], database=database, include_default_tools=False, **kwargs
    )


async def run(graph: Any, text: str, context: Context | None = None, **config: Any) -> Any:
    return await graph.ainvoke(
        {"messages": [HumanMessage(content=text)]},
        config={"configurable": config} if config else None,
        context=context or Context(),
    )


def action(title: str) -> dict[str, Any]:
    return tool_call("record", note=title)


# --- simple requests --------------------------------------------------------------------------


async def test_simple_request_is_one_llm_call_and_writes_no_rows(database: Database) -> None:
    model = ScriptedChatModel(script=[AIMessage(content="Hello! How can I help?")])
    result = await run(make_graph(model, database), "hi")
    assert model.calls == 1
    assert result["messages"][-1].content == "Hello! How can I help?"
    assert result["turnStatus"] == "answered"
    await database.create_schema()
    assert rows_in_db(database) == []


async def test_planning_section_is_in_the_prompt_when_create_todo_is_bound(
    database: Database,
) -> None:
    model = ScriptedChatModel(script=[AIMessage(content="ok")])
    await run(make_graph(model, database), "hi")
    assert "create_todo" in model.bound_tool_names
    assert "## Task planning and execution" in model.system_prompt(0)


# --- draining ---------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 5, 20])
async def test_n_item_plan_drains_in_n_plus_2_llm_calls(database: Database, n: int) -> None:
    titles = [f"item {i}" for i in range(1, n + 1)]
    model = ScriptedChatModel(responder=PlanOracle(titles, action))
    result = await run(make_graph(model, database), f"do {n} things")
    assert model.calls == n + 2
    assert titles == DONE
    assert result["turnStatus"] == "answered"
    assert rows_in_db(database) == [(t, "completed", f"did {t}") for t in titles]


async def test_the_graph_starts_the_next_row_by_priority(database: Database) -> None:
    model = ScriptedChatModel(
        script=[
            ai(
                tool_call(
                    "create_todo", items=[{"title": "b", "order": 2}, {"title": "a", "order": 1}]
                )
            ),
        ]
    )

    def respond(messages: list[Any]) -> AIMessage:
        rows = plan_rows(plan_view(messages))
        current = next((r for r in rows if r.mark == ">"), None)
        if current is None:
            return AIMessage(content="all done")
        return ai(tool_call("complete_todo", todoId=current.id, outcome=f"{current.title} ok"))

    first = model.script.pop(0)
    model.responder = lambda messages: first if model.calls == 1 else respond(messages)
    await run(make_graph(model, database), "two things")
    order = [plan_rows(model.plan_view(i)) for i in range(1, 3)]
    assert [next(r.title for r in rows if r.mark == ">") for rows in order] == ["a", "b"]


async def test_answering_with_open_rows_gets_a_reminder_and_the_loop_continues(
    database: Database,
) -> None:
    oracle = PlanOracle(["x", "y"], action)
    premature = {"sent": False}

    def respond(messages: list[Any]) -> AIMessage:
        if len(plan_rows(plan_view(messages))) and not premature["sent"]:
            premature["sent"] = True
            return AIMessage(content="All done!")  # a lie: nothing is closed yet
        return oracle(messages)

    model = ScriptedChatModel(responder=respond)
    # First call plans; the second answers too early; the oracle then finishes the plan.
    model.responder = lambda m: oracle(m) if model.calls == 1 else respond(m)
    result = await run(make_graph(model, database), "x and y")
    reminders = [
        m for m in result["messages"] if isinstance(m, HumanMessage) and m.name == "turnplan"
    ]
    assert len(reminders) == 1
    assert '"x"' in str(reminders[0].content) and "Do not answer yet" in str(reminders[0].content)
    assert result["turnStatus"] == "answered"
    assert [r[1] for r in rows_in_db(database)] == ["completed", "completed"]


# --- budget -----------------------------------------------------------------------------------


WORK_STEPS = itertools.count()


def stubborn(messages: list[Any]) -> AIMessage:
    """Plans two items, then works forever without closing any: each call new (a repeated one
    would be stopped as no progress, ``tests/unit/budget/test_no_progress_stop.py``)."""
    if not plan_rows(plan_view(messages)):
        return ai(tool_call("create_todo", items=[{"title": "alpha"}, {"title": "beta"}]))
    return ai(tool_call("record", note=f"still working, step {next(WORK_STEPS)}"))


async def test_budget_extends_while_rows_remain_but_never_passes_the_cap(
    database: Database,
) -> None:
    model = ScriptedChatModel(responder=stubborn)
    result = await run(
        make_graph(model, database), "go", Context(base_iterations=3, max_iterations=7)
    )
    assert model.calls == 7
    assert result["turnStatus"] == "budget_exhausted"
    assert result["llmCalls"] == 7


async def test_budget_exhaustion_answers_honestly_and_leaves_rows_open(
    database: Database,
) -> None:
    def one_done_then_stuck(messages: list[Any]) -> AIMessage:
        rows = plan_rows(plan_view(messages))
        if not rows:
            return ai(
                tool_call(
                    "create_todo", items=[{"title": "alpha"}, {"title": "beta"}, {"title": "gamma"}]
                )
            )
        alpha = next(r for r in rows if r.title == "alpha")
        if alpha.mark == ">":
            return ai(tool_call("complete_todo", todoId=alpha.id, outcome="alpha shipped"))
        return ai(tool_call("record", note="spinning"))

    model = ScriptedChatModel(responder=one_done_then_stuck)
    result = await run(
        make_graph(model, database), "go", Context(base_iterations=2, max_iterations=5)
    )
    final = result["messages"][-1]
    assert isinstance(final, AIMessage) and not final.tool_calls
    text = str(final.content)
    done, not_done = text.split("Not done:")
    assert "alpha: alpha shipped" in done
    assert "beta (was in progress)" in not_done and "gamma" in not_done
    assert "5 model calls" in text
    assert rows_in_db(database) == [
        ("alpha", "completed", "alpha shipped"),
        ("beta", "in_progress", None),
        ("gamma", "pending", None),
    ]


async def test_without_a_plan_the_budget_does_not_extend(database: Database) -> None:
    model = ScriptedChatModel(responder=lambda m: ai(tool_call("record", note="again")))
    result = await run(make_graph(model, database), "loop", Context(base_iterations=4))
    assert model.calls == 4
    assert result["turnStatus"] == "budget_exhausted"


# --- turns and ids ----------------------------------------------------------------------------


async def test_ids_come_from_thread_and_message_metadata(database: Database) -> None:
    model = ScriptedChatModel(responder=PlanOracle(["one"], action))
    graph = make_graph(model, database, checkpointer=InMemorySaver())
    result = await graph.ainvoke(
        {
            "messages": [
                HumanMessage(content="one", additional_kwargs={"metadata": {"turnId": "t-42"}})
            ]
        },
        config={"configurable": {"thread_id": "thread-7"}},
        context=Context(),
    )
    assert (result["conversationId"], result["turnId"]) == ("thread-7", "t-42")
    path = database.url.split("///", 1)[1]
    with closing(sqlite3.connect(path)) as connection:
        assert connection.execute(
            "SELECT DISTINCT conversationId, turnId FROM turn_todos"
        ).fetchall() == [("thread-7", "t-42")]


async def test_turn_id_defaults_to_the_message_id_and_context_names_the_conversation(
    database: Database,
) -> None:
    model = ScriptedChatModel(script=[AIMessage(content="hi")])
    result = await make_graph(model, database).ainvoke(
        {"messages": [HumanMessage(content="hi", id="msg-1")]},
        context=Context(conversation_id="conv-explicit"),
    )
    assert (result["conversationId"], result["turnId"]) == ("conv-explicit", "msg-1")


async def test_a_new_turn_does_not_resume_the_rows_of_an_earlier_one(database: Database) -> None:
    model = ScriptedChatModel(responder=stubborn)
    graph = make_graph(model, database, checkpointer=InMemorySaver())
    await run(graph, "first", Context(base_iterations=2, max_iterations=3), thread_id="t")
    calls_before = model.calls
    model.responder = lambda m: AIMessage(content="fresh turn")
    second = await run(graph, "second", Context(), thread_id="t")
    assert second["messages"][-1].content == "fresh turn"
    assert model.plan_view(calls_before) == ""
    assert second["turnStatus"] == "answered"
    assert {r[1] for r in rows_in_db(database)} == {"in_progress", "pending"}


# --- history window ---------------------------------------------------------------------------


async def test_long_turn_keeps_request_and_plan_in_a_prompt_that_does_not_grow(
    database: Database,
) -> None:
    titles = [f"step {i}" for i in range(1, 33)]
    model = ScriptedChatModel(responder=PlanOracle(titles, action))
    request = "Please work through thirty-two numbered steps for the quarterly audit."
    await run(make_graph(model, database), request, Context(max_iterations=50))
    assert model.calls >= 30
    prompt = model.prompts[29]
    view = plan_view(prompt)
    assert prompt[1].content == f"{request}\n\n{view}"  # the request, then the plan
    rows = plan_rows(view)
    assert len(rows) == 32 and sum(r.mark == "x" for r in rows) == 28
    window = window_of(prompt)
    assert 0 < len(window) <= 10 and len(prompt) == 1 + len(window)
    assert all(not isinstance(m, SystemMessage) for m in prompt[1:])
    assert window[0].content == request and isinstance(window[1], AIMessage)
    size = lambda p: sum(len(str(m.content)) for m in p)  # noqa: E731
    assert size(prompt) < size(model.prompts[9]) * 1.3


# --- errors -----------------------------------------------------------------------------------


async def test_tool_errors_reach_the_model_and_the_turn_continues(database: Database) -> None:
    model = ScriptedChatModel(
        script=[
            ai(tool_call("complete_todo", todoId="not-an-id", outcome="x")),
            AIMessage(content="Sorry, that id was wrong."),
        ]
    )
    result = await run(make_graph(model, database), "close something")
    errors = [m for m in result["messages"] if isinstance(m, ToolMessage) and m.status == "error"]
    assert json.loads(str(errors[0].content))["error"] == "INVALID_ID"
    assert result["messages"][-1].content == "Sorry, that id was wrong."
    assert model.calls == 2


async def test_malformed_tool_call_arguments_are_answered_and_the_turn_continues(
    database: Database,
) -> None:
    broken = AIMessage(
        content="",
        invalid_tool_calls=[
            {
                "name": "record",
                "args": "{note: oops",
                "id": "bad_1",
                "error": "bad JSON",
                "type": "invalid_tool_call",
            }
        ],
    )
    model = ScriptedChatModel(script=[broken, AIMessage(content="recovered")])
    result = await run(make_graph(model, database), "note it")
    reply = next(m for m in result["messages"] if isinstance(m, ToolMessage))
    assert reply.tool_call_id == "bad_1" and reply.status == "error"
    assert json.loads(str(reply.content))["error"] == "VALIDATION_ERROR"
    # The model answered without trying again: the note was never recorded, so the turn does
    # not end answered (agent.turn.claim_check) and the answer says which call failed.
    final = str(result["messages"][-1].content)
    assert final.startswith("recovered")
    assert "- record: VALIDATION_ERROR" in final
    assert result["turnStatus"] == "incomplete"


async def test_model_failure_ends_the_turn_clearly_and_leaves_rows_as_they_were(
    database: Database,
) -> None:
    model = ScriptedChatModel(
        script=[
            ai(tool_call("create_todo", items=[{"title": "alpha"}, {"title": "beta"}])),
            ConnectionError("model server unreachable"),
        ]
    )
    result = await run(make_graph(model, database), "two things")
    assert result["turnStatus"] == "failed"
    text = str(result["messages"][-1].content)
    assert "model server unreachable" in text
    assert "alpha (was in progress)" in text and "beta" in text
    assert rows_in_db(database) == [("alpha", "in_progress", None), ("beta", "pending", None)]


async def test_database_failure_ends_the_turn_clearly(database: Database) -> None:
    def drop_table_then_plan(messages: list[Any]) -> AIMessage:
        path = database.url.split("///", 1)[1]
        with closing(sqlite3.connect(path)) as connection:
            connection.execute("DROP TABLE turn_todos")
        return ai(tool_call("create_todo", items=[{"title": "alpha"}]))

    model = ScriptedChatModel(responder=drop_table_then_plan)
    result = await run(make_graph(model, database), "plan")
    assert result["turnStatus"] == "failed"
    assert "could not be saved or read" in str(result["messages"][-1].content)


# --- progress streaming -----------------------------------------------------------------------


async def test_every_row_change_is_a_custom_stream_event(database: Database) -> None:
    def respond(messages: list[Any]) -> AIMessage:
        rows = plan_rows(plan_view(messages))
        if not rows:
            return ai(tool_call("create_todo", items=[{"title": "a"}, {"title": "b"}]))
        current = next((r for r in rows if r.mark == ">"), None)
        if current is None:
            return AIMessage(content="done")
        status = "cancelled" if current.title == "b" else "completed"
        return ai(tool_call("complete_todo", todoId=current.id, outcome="ok", status=status))

    graph = make_graph(ScriptedChatModel(responder=respond), database)
    events = [
        chunk
        async for chunk in graph.astream(
            {"messages": [HumanMessage(content="a, b")]}, context=Context(), stream_mode="custom"
        )
    ]
    assert [(e["event"], e["title"], e["status"]) for e in events] == [
        ("planned", "a", "pending"),
        ("planned", "b", "pending"),
        ("started", "a", "in_progress"),
        ("completed", "a", "completed"),
        ("started", "b", "in_progress"),
        ("cancelled", "b", "cancelled"),
    ]
    assert all(e["id"] and "outcome" in e for e in events)


async def test_planning_always_forces_create_todo_on_the_first_call_only(
    database: Database,
) -> None:
    model = ScriptedChatModel(responder=PlanOracle(["a", "b"], action))
    result = await run(make_graph(model, database), "two things", Context(planning="always"))
    assert result["turnStatus"] == "answered"
    assert model.choices_seen[0] == "create_todo"
    assert set(model.choices_seen[1:]) == {None}


async def test_planning_auto_leaves_the_choice_to_the_model(database: Database) -> None:
    model = ScriptedChatModel(script=[AIMessage(content="hi")])
    await run(make_graph(model, database), "hi")
    assert model.choices_seen == [None]


async def test_a_model_that_keeps_answering_with_open_rows_is_stopped_honestly(
    database: Database,
) -> None:
    def plan_then_chat(messages: list[Any]) -> AIMessage:
        if not plan_rows(plan_view(messages)):
            return ai(tool_call("create_todo", items=[{"title": "alpha"}, {"title": "beta"}]))
        return AIMessage(content="Sure, all handled!")

    model = ScriptedChatModel(responder=plan_then_chat)
    result = await run(make_graph(model, database), "go", Context(max_reminders=2))
    assert model.calls == 4  # plan, then three answers: two reminded, the third stops the turn
    assert result["turnStatus"] == "stalled"
    text = str(result["messages"][-1].content)
    assert "3 times in a row" in text and "alpha (was in progress)" in text and "beta" in text
    assert [r[1] for r in rows_in_db(database)] == ["in_progress", "pending"]


async def test_with_no_reminders_allowed_the_stop_still_counts_the_answer(
    database: Database,
) -> None:
    model = ScriptedChatModel(
        script=[ai(tool_call("create_todo", items=[{"title": "alpha"}])), AIMessage(content="ok")]
    )
    result = await run(make_graph(model, database), "go", Context(max_reminders=0))
    assert result["turnStatus"] == "stalled"
    text = str(result["messages"][-1].content)
    assert "answered once without working" in text and "0 times" not in text


async def test_a_turn_without_a_plan_that_runs_out_of_calls_says_so_plainly(
    database: Database,
) -> None:
    model = ScriptedChatModel(responder=lambda _: ai(tool_call("record", note="again")))
    result = await run(
        make_graph(model, database), "loop", Context(base_iterations=2, max_iterations=2)
    )
    assert result["turnStatus"] == "budget_exhausted"
    text = str(result["messages"][-1].content)
    assert "0 of 0" not in text and "planned item" not in text
    assert "limit of 2 model calls" in text


async def test_reminders_in_a_row_reset_when_the_model_gets_back_to_work(
    database: Database,
) -> None:
    oracle = PlanOracle(["a", "b", "c"], action)
    calls = {"n": 0}

    def distracted(messages: list[Any]) -> AIMessage:
        calls["n"] += 1
        # Every other call after planning is a premature answer; the work still gets done.
        if calls["n"] > 1 and calls["n"] % 2 == 0:
            rows = plan_rows(plan_view(messages))
            if any(r.mark in (" ", ">") for r in rows):
                return AIMessage(content="done?")
        return oracle(messages)

    result = await run(
        make_graph(ScriptedChatModel(responder=distracted), database),
        "abc",
        Context(max_reminders=1),
    )
    assert result["turnStatus"] == "answered"
    assert [r[1] for r in rows_in_db(database)] == ["completed"] * 3
