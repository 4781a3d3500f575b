"""Run tool calls through the real tools node, inside a one-node graph, as the supervisor would.

Tests of a toolset use this so they exercise the same injection (``ToolRuntime`` with state and
context), ordering and error handling the supervisor graph uses, without a model.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool
from langgraph.graph import END, START, StateGraph

from agent.calls.ordering import build_tools_node
from agent.context import Context
from agent.state import SupervisorState

ToolCallSpec = tuple[str, dict[str, Any]]


async def run_tool_calls(
    tools: Sequence[BaseTool],
    calls: Sequence[ToolCallSpec],
    *,
    conversation_id: str = "conv-1",
    turn_id: str = "turn-1",
    context: Context | None = None,
    message_id: str | None = None,
) -> tuple[list[ToolMessage], dict[str, Any]]:
    """Issue ``calls`` as one AI message; return the tool messages and the final state.

    ``message_id`` fixes the AI message's id (else LangGraph gives it a new one), so running the
    same calls again is what LangGraph does when it resumes an interrupted tools step."""
    builder = StateGraph(SupervisorState, context_schema=Context)
    builder.add_node("tools", build_tools_node(tools))
    builder.add_edge(START, "tools")
    builder.add_edge("tools", END)
    graph = builder.compile()
    ai = AIMessage(
        content="",
        id=message_id,
        tool_calls=[
            {"name": name, "args": args, "id": f"call_{index}", "type": "tool_call"}
            for index, (name, args) in enumerate(calls)
        ],
    )
    state = await graph.ainvoke(
        {
            "messages": [HumanMessage(content="test request", id=turn_id), ai],
            "conversationId": conversation_id,
            "turnId": turn_id,
        },
        context=context or Context(),
    )
    tool_messages = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    return tool_messages, state
