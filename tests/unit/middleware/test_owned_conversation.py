"""Under ``TurnPlanMiddleware`` a tool call acts only on a conversation its user owns: a paused
turn's state edited to name another user's conversation gets its calls refused, as in the
supervisor graph's tools step (``agent.turn.ownership``)."""

from __future__ import annotations

from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from agent.context import Context
from agent.middleware import TurnPlanMiddleware
from agent.turn.plan_rows import TurnPlan
from storage import Database
from storage.repositories import TurnScope
from tests.fakes import (
    ScriptedChatModel,
    act,
    answer_with,
    plan_items,
    record,
    scripted_turn,
    tool_call,
)


async def test_a_call_on_another_users_conversation_is_refused_and_nothing_runs(
    database: Database, recorded_notes: list[str]
) -> None:
    alices = create_agent(
        scripted_turn(database, answer_with("Hello, Alice.")),
        [record],
        middleware=[TurnPlanMiddleware(database, context=Context(user_id="alice"))],
        checkpointer=InMemorySaver(),
    )
    alice: Any = {"configurable": {"thread_id": "alice-thread"}}
    done = await alices.ainvoke({"messages": [HumanMessage(content="hi")]}, alice)
    alices_conversation = done["conversationId"]

    bobs = create_agent(
        scripted_turn(
            database,
            plan_items({"title": "Note milk"}),
            act(tool_call("record", note="milk")),
            answer_with("Noted."),
        ),
        [record],
        middleware=[
            TurnPlanMiddleware(database, context=Context(user_id="bob")),
            HumanInTheLoopMiddleware(interrupt_on={"record": True}),
        ],
        checkpointer=InMemorySaver(),
    )
    bob: Any = {"configurable": {"thread_id": "bob-thread"}}
    paused = await bobs.ainvoke({"messages": [HumanMessage(content="note milk")]}, bob)
    assert paused["__interrupt__"]

    await bobs.aupdate_state(bob, {"conversationId": alices_conversation})
    resumed = await bobs.ainvoke(Command(resume={"decisions": [{"type": "approve"}]}), bob)

    assert recorded_notes == []
    refused = [m for m in resumed["messages"] if isinstance(m, ToolMessage) and m.name == "record"]
    assert refused and refused[0].status == "error" and "NOT_RUN" in str(refused[0].content)


@pytest.mark.parametrize("as_node", ["model", "tools", "TurnPlanMiddleware.before_model"])
async def test_a_state_edited_to_name_another_users_turn_shows_bob_nothing_of_it(
    database: Database, as_node: str
) -> None:
    """Bob edits his own thread's state to name Alice's conversation and open turn, then
    resumes: the run ends saying the conversation is another user's, his model never sees her
    plan, and her rows stay as they were (as in the supervisor graph's steps)."""
    budget = Context(user_id="alice", base_iterations=2, max_iterations=2)
    alices = create_agent(
        scripted_turn(database, plan_items({"title": "Alice's secret"}), answer_with("Later.")),
        [record],
        middleware=[TurnPlanMiddleware(database, context=budget)],
        checkpointer=InMemorySaver(),
    )
    alice: Any = {"configurable": {"thread_id": "alice-thread"}}
    hers = await alices.ainvoke({"messages": [HumanMessage(content="plan it")]}, alice)
    assert [todo["status"] for todo in hers["todos"]] == ["in_progress"]

    bob_model = ScriptedChatModel(script=[AIMessage(content="Hello, Bob.")] * 3)
    bobs = create_agent(
        bob_model,
        [record],
        middleware=[TurnPlanMiddleware(database, context=Context(user_id="bob"))],
        checkpointer=InMemorySaver(),
    )
    bob: Any = {"configurable": {"thread_id": "bob-thread"}}
    await bobs.ainvoke({"messages": [HumanMessage(content="hi")]}, bob)
    calls_before = bob_model.calls
    edit = {"conversationId": hers["conversationId"], "turnId": hers["turnId"]}
    await bobs.aupdate_state(bob, {**edit, "turnStatus": "running"}, as_node=as_node)

    resumed = await bobs.ainvoke(None, bob)

    assert resumed["turnStatus"] == "failed"
    assert "belongs to another user" in str(resumed["messages"][-1].content)
    shown = [str(m.content) for prompt in bob_model.prompts[calls_before:] for m in prompt]
    assert not any("Alice's secret" in text for text in shown)
    rows, _ = await TurnPlan(database, TurnScope(hers["conversationId"], hers["turnId"])).rows()
    assert [(row.title, row.status) for row in rows] == [("Alice's secret", "in_progress")]
