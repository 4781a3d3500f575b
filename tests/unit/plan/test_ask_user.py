"""``ask_user``: the model asks mid-plan, the run pauses at an interrupt with the plan kept, and
the answer (``Command(resume=...)`` or the user's next message) continues the same turn."""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from agent.context import Context
from agent.graph import build_graph
from storage import Database
from storage.repositories.tasks import TaskRepository
from tests.fakes import ScriptedChatModel, ai, plan_rows, plan_view, tool_call, window_of

CONFIG: RunnableConfig = {"configurable": {"thread_id": "ask"}}


def results_of_last_step(messages: list[BaseMessage]) -> list[ToolMessage]:
    """The tool messages after the newest AI message."""
    results: list[ToolMessage] = []
    for message in reversed(window_of(messages)):
        if not isinstance(message, ToolMessage):
            break
        results.append(message)
    return results


class AmbiguousTitleModel:
    """Plans one item, tries ``complete_task("call")``, asks which task on the ambiguity error,
    completes the one named by the answer, closes the item and answers."""

    def __init__(self, *, also: dict[str, Any] | None = None) -> None:
        self.also = also

    def __call__(self, messages: list[BaseMessage]) -> AIMessage:
        rows = plan_rows(plan_view(messages))
        last = window_of(messages)[-1]
        if not rows:
            return ai(
                tool_call("create_todo", items=[{"title": "Complete the call task"}]),
                tool_call("complete_task", task_identifier="call"),
            )
        current = next((row for row in rows if row.mark == ">"), None)
        if current is None:
            return AIMessage(content="Done: I completed it.")
        if isinstance(last, ToolMessage) and last.name == "complete_task":
            if "VALIDATION_ERROR" in str(last.content):
                question = tool_call(
                    "ask_user", question="Which call task?", options=["call mom", "call dad"]
                )
                return ai(question, *([self.also] if self.also else []))
            return ai(tool_call("complete_todo", todoId=current.id, outcome="completed"))
        answer = next((m for m in results_of_last_step(messages) if m.name == "ask_user"), None)
        if answer is not None:
            return ai(tool_call("complete_task", task_identifier=str(answer.content)))
        return ai(tool_call("complete_todo", todoId=current.id, outcome="completed"))


async def setup(database: Database, model: AmbiguousTitleModel, **context: Any) -> Any:
    await database.create_schema()
    async with database.session() as session:
        for title in ("call mom", "call dad"):
            await TaskRepository(session, "local-user").add(title, "")
    graph = build_graph(
        ScriptedChatModel(responder=model), database=database, checkpointer=InMemorySaver()
    )
    paused = await graph.ainvoke(
        {"messages": [HumanMessage(content="complete my call task", id="ask-turn")]},
        CONFIG,
        context=Context(**context),
    )
    return graph, paused


async def done_tasks(database: Database) -> dict[str, bool]:
    async with database.session() as session:
        tasks = await TaskRepository(session, "local-user").find()
    return {task.title: task.completed for task in tasks}


async def test_the_question_pauses_the_turn_with_its_plan_and_the_answer_continues_it(
    database: Database,
) -> None:
    graph, paused = await setup(database, AmbiguousTitleModel())

    (pause,) = paused["__interrupt__"]
    assert pause.value["type"] == "question"
    assert pause.value["question"] == "Which call task?"
    assert pause.value["options"] == ["call mom", "call dad"]
    assert pause.value["todo"]["title"] == "Complete the call task"
    assert pause.value["todo"]["status"] == "in_progress"
    state = await graph.aget_state(CONFIG)
    assert state.next == ("tools",)
    assert state.values["turnStatus"] == "running"
    assert state.values["remindersInARow"] == 0

    result = await graph.ainvoke(Command(resume="call mom"), CONFIG)

    assert result["turnStatus"] == "answered"
    assert result["turnId"] == "ask-turn"
    (answer,) = [
        m for m in result["messages"] if isinstance(m, ToolMessage) and m.name == "ask_user"
    ]
    assert answer.content == "call mom"
    assert [row["status"] for row in result["todos"]] == ["completed"]
    assert await done_tasks(database) == {"call mom": True, "call dad": False}


async def test_a_new_message_while_the_question_is_pending_is_the_answer(
    database: Database,
) -> None:
    graph, _ = await setup(database, AmbiguousTitleModel())

    result = await graph.ainvoke({"messages": [HumanMessage(content="call dad")]}, CONFIG)

    assert result["turnStatus"] == "answered"
    assert result["turnId"] == "ask-turn"  # the same turn, not a new one
    humans = [m.content for m in result["messages"] if isinstance(m, HumanMessage)]
    assert humans == ["complete my call task"]
    (answer,) = [
        m for m in result["messages"] if isinstance(m, ToolMessage) and m.name == "ask_user"
    ]
    assert answer.content == "call dad"
    assert await done_tasks(database) == {"call mom": False, "call dad": True}


async def test_calls_after_the_question_wait_for_the_answer_and_then_run_once(
    database: Database,
) -> None:
    model = AmbiguousTitleModel(also=tool_call("add_task", title="buy a card"))
    graph, paused = await setup(database, model)

    assert paused["__interrupt__"]
    assert "buy a card" not in await done_tasks(database)

    await graph.ainvoke(Command(resume="call mom"), CONFIG)

    async with database.session() as session:
        titles = [t.title for t in await TaskRepository(session, "local-user").find()]
    assert sorted(titles) == ["buy a card", "call dad", "call mom"]


async def test_asking_is_not_a_premature_answer_even_with_no_reminders_allowed(
    database: Database,
) -> None:
    graph, paused = await setup(database, AmbiguousTitleModel(), max_reminders=0)
    assert paused["__interrupt__"]
    result = await graph.ainvoke(Command(resume="call mom"), CONFIG)
    assert result["turnStatus"] == "answered"


@pytest.mark.parametrize(
    ("args", "problem"),
    [({"question": "  "}, "question"), ({"question": "Which?", "options": [""]}, "options")],
)
async def test_an_empty_question_or_option_is_refused_without_pausing(
    database: Database, args: dict[str, Any], problem: str
) -> None:
    model = ScriptedChatModel(
        script=[ai(tool_call("ask_user", **args)), AIMessage(content="Never mind.")]
    )
    graph = build_graph(model, database=database, checkpointer=InMemorySaver())
    result = await graph.ainvoke({"messages": [HumanMessage(content="hm")]}, CONFIG)
    assert "__interrupt__" not in result
    (refusal,) = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    envelope = json.loads(str(refusal.content))
    assert envelope["error"] == "VALIDATION_ERROR" and problem in envelope["message"]
    assert result["turnStatus"] == "answered"


async def test_a_message_answer_runs_the_calls_that_waited_and_does_not_ask_again(
    database: Database,
) -> None:
    model = AmbiguousTitleModel(also=tool_call("add_task", title="buy a card"))
    graph, _ = await setup(database, model)

    result = await graph.ainvoke({"messages": [HumanMessage(content="call mom")]}, CONFIG)

    assert "__interrupt__" not in result
    assert result["turnStatus"] == "answered"
    assert await done_tasks(database) == {"call mom": True, "call dad": False, "buy a card": False}


async def test_a_second_question_in_one_message_is_not_asked(database: Database) -> None:
    model = ScriptedChatModel(
        script=[
            ai(tool_call("ask_user", question="First?"), tool_call("ask_user", question="Second?")),
            AIMessage(content="Thanks."),
        ]
    )
    graph = build_graph(model, database=database, checkpointer=InMemorySaver())
    paused = await graph.ainvoke({"messages": [HumanMessage(content="hm")]}, CONFIG)
    assert [p.value["question"] for p in paused["__interrupt__"]] == ["First?"]

    result = await graph.ainvoke(Command(resume="one"), CONFIG)

    assert "__interrupt__" not in result
    first, second = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    assert first.content == "one"
    assert json.loads(str(second.content))["error"] == "NOT_RUN"
    assert result["turnStatus"] == "answered"


async def test_a_question_never_shown_is_not_answered_by_the_next_message(
    database: Database,
) -> None:
    """A run that stopped before the question was put (here: before the tools step, as a crash
    or a cancel would) leaves an ask_user call without a result; the user never saw it, so their
    next message is a new request, not its answer."""
    model = ScriptedChatModel(
        script=[
            ai(tool_call("ask_user", question="Which call task?")),
            AIMessage(content="Here is the weather."),
        ]
    )
    graph = build_graph(model, database=database, checkpointer=InMemorySaver())
    first = await graph.ainvoke(
        {"messages": [HumanMessage(content="complete my call task", id="first-turn")]},
        CONFIG,
        interrupt_before=["tools"],
    )
    assert "__interrupt__" not in first or not first["__interrupt__"]

    result = await graph.ainvoke(
        {"messages": [HumanMessage(content="what is the weather?", id="second-turn")]}, CONFIG
    )

    assert result["turnId"] == "second-turn"
    humans = [m.content for m in result["messages"] if isinstance(m, HumanMessage)]
    assert humans == ["complete my call task", "what is the weather?"]
    assert not [m for m in result["messages"] if isinstance(m, ToolMessage)]
    last_prompt = model.prompts[-1]
    (orphan,) = [m for m in last_prompt if isinstance(m, ToolMessage)]
    assert json.loads(str(orphan.content))["error"] == "NOT_RUN"
