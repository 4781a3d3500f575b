"""A user's own tool may take what LangGraph injects in any of its documented ways (a plain
``ToolRuntime`` from langchain or langgraph, ``InjectedState``, ``InjectedStore``) and the
``store`` given to ``build_graph``, across the turns of one thread, with warnings as errors."""

from __future__ import annotations

import json
from typing import Annotated, Any

import pytest
from langchain.tools import ToolRuntime as LangchainToolRuntime
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import BaseTool, InjectedToolCallId, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt import InjectedState, InjectedStore
from langgraph.prebuilt import ToolRuntime as LanggraphToolRuntime
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore

from agent.context import Context
from agent.graph import build_graph
from storage import Database
from tests.fakes import PlanOracle, ScriptedChatModel, tool_call, tool_results

NAMESPACE = ("notes",)


def _count(store: BaseStore | None, key: str) -> int:
    """Bump the counter ``key`` in ``store`` and return its new value."""
    assert store is not None, "the tool was given no store"
    item = store.get(NAMESPACE, key)
    count = (item.value["count"] if item is not None else 0) + 1
    store.put(NAMESPACE, key, {"count": count})
    return count


@tool
def note_langchain_runtime(title: str, runtime: LangchainToolRuntime) -> str:
    """Note an item (sees the run through langchain's ToolRuntime)."""
    user = getattr(runtime.context, "user_id", None)
    turn = runtime.state["turnId"] if isinstance(runtime.state, dict) else runtime.state.turnId
    return json.dumps({"count": _count(runtime.store, title), "user": user, "turn": bool(turn)})


@tool
def note_langgraph_runtime(title: str, runtime: LanggraphToolRuntime) -> str:
    """Note an item (sees the run through langgraph's ToolRuntime)."""
    user = getattr(runtime.context, "user_id", None)
    return json.dumps({"count": _count(runtime.store, title), "user": user, "turn": True})


@tool
def note_injected_store(title: str, store: Annotated[Any, InjectedStore()]) -> str:
    """Note an item (gets the store injected)."""
    return json.dumps({"count": _count(store, title), "user": "alice", "turn": True})


@tool
def note_injected_state(
    title: str,
    state: Annotated[Any, InjectedState],
    store: Annotated[Any, InjectedStore()],
) -> str:
    """Note an item (gets the graph's state and the store injected)."""
    turn = state["turnId"] if isinstance(state, dict) else state.turnId
    return json.dumps({"count": _count(store, title), "user": "alice", "turn": bool(turn)})


@tool
def note_with_call_id(
    title: str, runtime: LangchainToolRuntime, call_id: Annotated[str, InjectedToolCallId]
) -> str:
    """Note an item (gets the runtime and the id of its own call)."""
    assert call_id and call_id == runtime.tool_call_id
    return json.dumps({"count": _count(runtime.store, title), "user": "alice", "turn": True})


@pytest.mark.parametrize(
    "user_tool",
    [
        note_langchain_runtime,
        note_langgraph_runtime,
        note_injected_store,
        note_injected_state,
        note_with_call_id,
    ],
    ids=[
        "langchain-ToolRuntime",
        "langgraph-ToolRuntime",
        "InjectedStore",
        "InjectedState",
        "InjectedToolCallId",
    ],
)
async def test_a_user_tool_keeps_its_own_store_across_two_turns_without_warnings(
    database: Database, user_tool: BaseTool
) -> None:
    store = InMemoryStore()

    def note(title: str) -> dict[str, Any]:
        return tool_call(user_tool.name, title=title)

    graph = build_graph(
        ScriptedChatModel(responder=_two_turns(note)),
        tools=[user_tool],
        database=database,
        checkpointer=InMemorySaver(),
        store=store,
    )
    config = {"configurable": {"thread_id": "t"}}
    context = Context(user_id="alice", planning="always")
    counts = []
    for _ in range(2):
        result = await graph.ainvoke(
            {"messages": [HumanMessage("Note 'milk' and 'eggs'.")]}, config, context=context
        )
        this_turn = {"messages": result["messages"][_last_human(result["messages"]) :]}
        answers = [json.loads(str(m.content)) for m in tool_results(this_turn, user_tool.name)]
        counts.append([answer["count"] for answer in answers])
        assert all(answer["user"] == "alice" and answer["turn"] for answer in answers)

    # The second turn found what the first one wrote in the store.
    assert counts == [[1, 1], [2, 2]]
    assert store.get(NAMESPACE, "milk").value == {"count": 2}  # type: ignore[union-attr]
    # The caller's own tool object is as it was given (the graph runs a copy).
    assert "PlainSerializer" not in repr(user_tool.args_schema.model_fields)  # type: ignore[union-attr]


def _two_turns(note: Any) -> Any:
    """A model that plays ``PlanOracle`` anew on each turn of the thread."""
    oracles: dict[int, PlanOracle] = {}

    def respond(messages: list[Any]) -> AIMessage:
        turn = sum(isinstance(m, HumanMessage) for m in messages)
        oracle = oracles.setdefault(turn, PlanOracle(["milk", "eggs"], note))
        return oracle([m for m in messages[_last_human(messages) :]])

    return respond


def _last_human(messages: list[Any]) -> int:
    return max(i for i, m in enumerate(messages) if isinstance(m, HumanMessage))
