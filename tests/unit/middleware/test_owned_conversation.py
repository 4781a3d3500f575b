"""Under ``TurnPlanMiddleware`` a tool call acts only on a conversation its user owns: a paused
turn's state edited to name another user's conversation gets its calls refused, as in the
supervisor graph's tools step (``agent.turn.ownership``)."""

from __future__ import annotations

from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.messages import HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from agent.context import Context
from agent.middleware import TurnPlanMiddleware
from storage import Database
from tests.fakes import act, answer_with, plan_items, record, scripted_turn, tool_call


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
