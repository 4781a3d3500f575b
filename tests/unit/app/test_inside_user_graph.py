"""turnplan's compiled graph as a node of a user's own graph: a messages state, and a context
schema of the user's own (or none). LangGraph hands the subgraph the parent's context, so
turnplan takes its settings from ``build_graph(context=...)`` and from turnplan's keys in a
dict context (``agent.context.run_settings``)."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from dataclasses import dataclass
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.runtime import Runtime

from agent.context import Context, run_settings
from agent.graph import build_graph
from storage import Database
from tests.fakes import PlanOracle, ScriptedChatModel, tool_call

TITLES = ["buy milk", "call mom"]


@dataclass
class UserContext:
    """A user's own context schema, sharing no field with turnplan's."""

    account: str
    greeting: str = "Hello"


def add_task(title: str) -> dict[str, Any]:
    return tool_call("add_task", title=title)


def tasks_in_db(database: Database) -> list[tuple[str, str]]:
    path = database.url.split("///", 1)[1]
    with closing(sqlite3.connect(path)) as connection:
        return connection.execute("SELECT user_id, title FROM tasks ORDER BY title").fetchall()


def rows_in_db(database: Database, *columns: str) -> list[tuple[str, ...]]:
    path = database.url.split("///", 1)[1]
    named = ", ".join(columns or ("title", "status"))
    with closing(sqlite3.connect(path)) as connection:
        return connection.execute(f"SELECT {named} FROM turn_todos ORDER BY priority").fetchall()


def greet(state: MessagesState, runtime: Runtime[UserContext]) -> dict[str, Any]:
    """A node of the user's graph that reads the user's own context."""
    return {"messages": [AIMessage(f"{runtime.context.greeting}, {runtime.context.account}.")]}


async def test_a_turn_plans_and_answers_inside_a_graph_with_the_users_context_schema(
    database: Database,
) -> None:
    model = ScriptedChatModel(responder=PlanOracle(TITLES, add_task))
    turnplan = build_graph(
        model,
        database=database,
        # The user's context names the user; turnplan's settings are made from it per run.
        context=lambda context: Context(user_id=context.account, planning="always"),
    )
    builder = StateGraph(MessagesState, context_schema=UserContext)
    builder.add_node("greet", greet)
    builder.add_node("turnplan", turnplan)
    builder.add_edge(START, "greet")
    builder.add_edge("greet", "turnplan")
    builder.add_edge("turnplan", END)
    app = builder.compile(checkpointer=InMemorySaver())

    result = await app.ainvoke(
        {"messages": [HumanMessage("Add 'buy milk' and 'call mom' to my tasks")]},
        {"configurable": {"thread_id": "user-thread"}},
        context=UserContext(account="alice"),
    )

    messages = result["messages"]
    assert messages[1].content == "Hello, alice."  # the parent's node read its own context
    assert messages[-1].content == "Done: 2 items."  # turnplan's answer reached the parent
    assert model.calls == len(TITLES) + 2
    assert model.choices_seen[0] == "create_todo"  # planning="always", from the defaults
    assert rows_in_db(database) == [("buy milk", "completed"), ("call mom", "completed")]
    assert tasks_in_db(database) == [("alice", "buy milk"), ("alice", "call mom")]
    # The conversation is the parent's thread, kept by the parent's checkpointer.
    assert set(rows_in_db(database, "conversationId")) == {("user-thread",)}
    # The parent's state stays a messages state: turnplan's other output keys are not in it.
    assert set(result) == {"messages"}


async def test_a_graph_without_a_context_schema_passes_turnplans_keys_in_a_dict(
    database: Database,
) -> None:
    model = ScriptedChatModel(responder=PlanOracle(TITLES, add_task))
    builder = StateGraph(MessagesState)
    builder.add_node("turnplan", build_graph(model, database=database))
    builder.add_edge(START, "turnplan")
    app = builder.compile()

    result = await app.ainvoke(
        {"messages": [HumanMessage("Add 'buy milk' and 'call mom' to my tasks")]},
        # The parent has no schema, so its context is this dict; keys not turnplan's are the
        # parent's own and are left alone.
        context={"user_id": "bob", "account": "ignored by turnplan"},
    )

    assert result["messages"][-1].content == "Done: 2 items."
    assert rows_in_db(database) == [("buy milk", "completed"), ("call mom", "completed")]
    assert tasks_in_db(database) == [("bob", "buy milk"), ("bob", "call mom")]


async def test_a_graph_without_any_context_runs_on_the_defaults(database: Database) -> None:
    model = ScriptedChatModel(responder=PlanOracle(TITLES, add_task))
    builder = StateGraph(MessagesState)
    builder.add_node("turnplan", build_graph(model, database=database))
    builder.add_edge(START, "turnplan")
    app = builder.compile()

    result = await app.ainvoke({"messages": [HumanMessage("Add two tasks")]})

    assert result["messages"][-1].content == "Done: 2 items."
    assert tasks_in_db(database) == [("local-user", "buy milk"), ("local-user", "call mom")]


async def test_a_bad_turnplan_setting_in_a_parents_dict_fails_naming_it(
    database: Database,
) -> None:
    model = ScriptedChatModel()  # no script: any model call fails the test
    builder = StateGraph(MessagesState)
    builder.add_node("turnplan", build_graph(model, database=database))
    builder.add_edge(START, "turnplan")
    app = builder.compile()

    with pytest.raises(ValueError, match="max_iterations must be at least 1"):
        await app.ainvoke({"messages": [HumanMessage("hi")]}, context={"max_iterations": 0})
    assert model.calls == 0


def test_a_runs_own_settings_override_the_graphs_defaults_field_by_field() -> None:
    defaults = Context(user_id="graph-user", max_iterations=17)

    named = run_settings(Context(user_id="alice"), defaults)
    assert (named.user_id, named.max_iterations) == ("alice", 17)
    from_dict = run_settings({"max_iterations": 19, "other": 1}, defaults)
    assert (from_dict.user_id, from_dict.max_iterations) == ("graph-user", 19)
    assert run_settings(UserContext(account="x"), defaults) is defaults
    assert run_settings(None, None) == Context()
    own = Context(user_id="alice")
    assert run_settings(own, None) is own  # turnplan's own graph: the run's context as it is


def test_a_defaults_function_must_return_turnplans_context() -> None:
    with pytest.raises(TypeError, match=r"context=\.\.\.\) must return an agent\.context\.Context"):
        run_settings(UserContext(account="x"), lambda context: {"user_id": "x"})  # type: ignore[arg-type,return-value]


async def test_a_direct_run_keeps_the_graphs_defaults_it_does_not_name(
    database: Database,
) -> None:
    model = ScriptedChatModel(responder=PlanOracle(TITLES, add_task))
    graph = build_graph(model, database=database, context=Context(planning="always"))

    result = await graph.ainvoke(
        {"messages": [HumanMessage("Add two tasks")]}, context={"user_id": "carol"}
    )

    assert result["turnStatus"] == "answered"
    assert model.choices_seen[0] == "create_todo"  # the graph's default, not named by the run
    assert tasks_in_db(database) == [("carol", "buy milk"), ("carol", "call mom")]
