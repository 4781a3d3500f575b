"""Real turns of the packaged Qwen2.5-Coder models, replayed: a turn whose answer claims what
nothing did, or whose attempt at a change failed and was left, never ends ``answered``; a turn
that did what it says, answered a question or listed the tasks keeps ``answered``.

``qwen_turns.json`` holds the replies the models really gave (recorded with ``bench.eval
--profile full --every 8`` on the tuning part, and ``turnplan``-style turns for the true
answers; its ``about`` says when and on what). Each is replayed through the supervisor graph
with the full prompt profile and a scripted model that gives the recorded replies in order, on
the request's seeded tasks: the graph sends what it sent then (the replies are the model's
answers to it), so the turn goes the same way and only its ending is the code under test.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from agent.context import Context
from agent.graph import build_graph
from agent.state import InputState
from storage import Database
from storage.repositories import TaskRepository
from storage.task_files import TaskFiles, TaskList
from tests.fakes import ScriptedChatModel

TURNS = json.loads((Path(__file__).parent / "qwen_turns.json").read_text(encoding="utf-8"))
USER = "local-user"
CONVERSATION = "eval-conversation"


def replayed(replies: list[dict[str, Any]]) -> ScriptedChatModel:
    queue = list(replies)

    def respond(_: list[BaseMessage]) -> AIMessage:
        assert queue, "the graph asked the model more often than when the turn was recorded"
        reply = queue.pop(0)
        calls = [{**call, "type": "tool_call"} for call in reply.get("tool_calls", [])]
        return AIMessage(content=reply["content"], tool_calls=calls)

    return ScriptedChatModel(responder=respond)


async def seed(turn: dict[str, Any], database: Database, tasks_dir: Path) -> None:
    await database.create_schema()
    async with database.session() as session:
        tasks = TaskRepository(session, USER)
        for item in turn.get("setup", []):
            task = await tasks.add(item["title"])
            if item.get("done"):
                await tasks.mark_completed(task)
    if turn.get("setup_conversation"):

        def write(task_list: TaskList) -> None:
            for item in turn["setup_conversation"]:
                task_list.add(item["title"]).done = item.get("done", False)

        TaskFiles(tasks_dir).update(CONVERSATION, write)


async def replay(turn: dict[str, Any], database: Database, tasks_dir: Path) -> dict[str, Any]:
    await seed(turn, database, tasks_dir)
    graph = build_graph(
        replayed(turn["replies"]),
        database=database,
        tasks_dir=tasks_dir,
        checkpointer=InMemorySaver(),
    )
    context = Context(
        toolsets=turn["toolsets"],
        conversation_id=CONVERSATION,
        user_id=USER,
        prompt_profile="full",
    )
    config: Any = {"configurable": {"thread_id": "replay"}}
    output: dict[str, Any] = {}
    for text in (*turn.get("earlier_turns", []), turn["request"]):
        output = await graph.ainvoke(
            InputState(messages=[HumanMessage(content=text)]), config=config, context=context
        )
    return output


def _ids(kind: str) -> list[Any]:
    return [
        pytest.param(turn, id=turn["id"])
        for turn in TURNS["turns"]
        if (turn["expected_status"] == "answered") == (kind == "true")
    ]


@pytest.mark.parametrize("turn", _ids("false"))
async def test_a_recorded_turn_that_did_not_do_what_it_says_does_not_end_answered(
    turn: dict[str, Any], database: Database, tmp_path: Path
) -> None:
    output = await replay(turn, database, tmp_path)

    assert output.get("turnStatus") == turn["expected_status"]
    answer = str(output["messages"][-1].content)
    assert turn["expected_in_answer"] in answer


@pytest.mark.parametrize("turn", _ids("true"))
async def test_a_recorded_turn_that_did_what_it_says_stays_answered_word_for_word(
    turn: dict[str, Any], database: Database, tmp_path: Path
) -> None:
    output = await replay(turn, database, tmp_path)

    assert output.get("turnStatus") == "answered"
    assert str(output["messages"][-1].content) == turn["recorded_answer"]
    async with database.session(readonly=True) as session:
        titles = sorted(task.title for task in await TaskRepository(session, USER).find())
    assert titles == sorted(turn["expected_titles"])
