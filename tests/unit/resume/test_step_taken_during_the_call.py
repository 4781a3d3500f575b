"""A run that goes straight on from a step of its own claims the next step with the model
answer's record (``agent.turn.lineage.DeferredClaim``), after the call. When another run took
that step while the model was answering, the answer is dropped before any of its calls runs, and
the claim is settled as any other: the turn is caught up with or forked, and every action still
happens once."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from sqlalchemy import select

from agent.context import Context
from agent.graph import build_graph
from storage import Database
from storage.models import ModelAnswer
from storage.repositories import TurnScope, claim_step_with_answer
from tests.fakes import PlanOracle, ScriptedChatModel, tool_call

TITLES = ["first", "second", "third"]
DONE: list[str] = []


@tool
async def record(note: str) -> str:
    """Record a note (the domain action of these tests)."""
    DONE.append(note)
    return json.dumps({"recorded": note})


class TakenDuringCall:
    """The plan oracle, except that while it answers its ``at``-th call another run (``task``,
    ``run``) takes the turn's next step; the answer it gave then is kept to be checked."""

    def __init__(self, database: Database, at: int, task: str, run: str = "") -> None:
        self.oracle = PlanOracle(TITLES, lambda title: tool_call("record", note=title))
        self.path = database.url.split("///", 1)[1]
        self.at, self.task, self.run = at, task, run
        self.calls = 0
        self.dropped: AIMessage | None = None

    def __call__(self, messages: list[BaseMessage]) -> AIMessage:
        self.calls += 1
        answer = self.oracle(messages)
        if self.calls == self.at:
            self.dropped = answer
            self._take_next_step()
        return answer

    def _take_next_step(self) -> None:
        with closing(sqlite3.connect(self.path)) as connection:
            conversation, turn, step = connection.execute(
                'SELECT "conversationId", "turnId", max(step) FROM turn_steps'
            ).fetchone()
            connection.execute(
                'INSERT INTO turn_steps ("conversationId", "turnId", step, "taskId", "runId", '
                '"claimedAt") VALUES (?, ?, ?, ?, ?, ?)',
                (conversation, turn, step + 1, self.task, self.run, "2026-01-01T00:00:00Z"),
            )
            connection.commit()


def recorded_call_ids(database: Database) -> set[str]:
    path = database.url.split("///", 1)[1]
    with closing(sqlite3.connect(path)) as connection:
        return {row[0] for row in connection.execute('SELECT "toolCallId" FROM tool_results')}


async def run_turn(database: Database, model: TakenDuringCall, config: RunnableConfig) -> Any:
    DONE.clear()
    graph = build_graph(
        ScriptedChatModel(responder=model),
        tools=[record],
        database=database,
        include_default_tools=False,
        checkpointer=InMemorySaver(),
    )
    request = {"messages": [HumanMessage(content="Do three things", id="m1")]}
    return await graph.ainvoke(request, config, context=Context())


async def test_an_answer_whose_step_was_taken_meanwhile_never_acts(database: Database) -> None:
    """A run without a run id whose step a task of its own took (its checkpoints show nothing
    newer): it catches up, asks the model again, and does each item once."""
    model = TakenDuringCall(database, at=2, task="a task of a lost process")
    config: RunnableConfig = {"configurable": {"thread_id": "python"}}

    result = await run_turn(database, model, config)

    assert result["turnStatus"] == "answered"
    assert DONE == TITLES
    assert model.dropped is not None and model.dropped.tool_calls
    assert not {call["id"] for call in model.dropped.tool_calls} & recorded_call_ids(database)
    assert model.calls == len(TITLES) + 3  # the plain turn's N + 2, and the dropped answer


async def test_a_server_run_that_lost_its_step_to_another_run_forks_and_acts_once(
    database: Database,
) -> None:
    model = TakenDuringCall(database, at=2, task="another run's task", run="run-2")
    config: RunnableConfig = {"configurable": {"thread_id": "server", "run_id": "run-1"}}

    result = await run_turn(database, model, config)

    assert model.dropped is not None
    assert not {call["id"] for call in model.dropped.tool_calls} & recorded_call_ids(database)
    assert "/fork-" in result["turnId"]
    assert result["turnStatus"] == "answered", result["messages"][-1].content
    assert DONE == TITLES


@pytest.mark.parametrize("database", ["sqlite", "postgres"], indirect=True)
async def test_a_claim_with_an_answer_records_it_only_for_a_step_this_run_took(
    database: Database,
) -> None:
    """One transaction on SQLite, one statement on PostgreSQL: an answer is never recorded for
    a step another run had, and a place of the turn keeps the first answer recorded there."""
    scope = TurnScope("conversation", "turn")

    async def claim(step: int, task: str, call_index: int, message: str) -> tuple[bool, bool]:
        return await claim_step_with_answer(
            database,
            scope,
            step=step,
            task_id=task,
            run_id="",
            call_index=call_index,
            history_length=3,
            message=message,
        )

    assert await claim(2, "mine", 1, "first") == (True, True)
    assert await claim(2, "another run", 2, "never") == (False, False)
    assert await claim(3, "mine", 1, "second") == (True, False)
    async with database.session(readonly=True) as session:
        answers = (await session.execute(select(ModelAnswer.callIndex, ModelAnswer.message))).all()
    assert [tuple(answer) for answer in answers] == [(1, "first")]
