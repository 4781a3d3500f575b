"""A small ReAct worker: model node, tools node, and an edge back until the model answers.

Our own graph rather than ``create_react_agent`` (deprecated in langgraph 1.x): it reuses the
supervisor's tools node (error envelope, calls applied in the order written) and its model
resolution, so a worker behaves like the supervisor minus the plan. A tool that raises comes
back to the worker's model as ``TOOL_ERROR`` too (``Context.handle_tool_errors``), so it can try
again or say what it could not do, rather than failing the whole delegation.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any, Literal

from langchain_core.messages import AIMessage, SystemMessage
from langchain_core.tools import BaseTool
from langgraph.config import get_config
from langgraph.errors import GraphBubbleUp, is_invalid_resume
from langgraph.graph import END, START, StateGraph
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.runtime import Runtime
from langgraph.types import Command

from agent.calls.ordering import CallPlace, Execute, ToolResult, build_tools_node
from agent.calls.tool_schemas import model_tool_schemas
from agent.context import Context, run_settings
from agent.errors import ToolFailure, raised_failure
from agent.llm.chat_models import (
    ModelSetting,
    invalid_tool_call_messages,
    model_setting_of,
    resolve_chat_model,
)
from agent.prompting.builder import COMPACT, prompt_profile
from agent.workers.worker import Worker, WorkerState
from prompts import Prompts, prompts_in

WorkerTarget = Literal["model", "tools", "__end__"]

logger = logging.getLogger("agent.tools")


async def raised_as_failure(
    request: ToolCallRequest, execute: Execute, _place: CallPlace
) -> ToolResult:
    """A worker's call whose tool raised, answered ``TOOL_ERROR`` (the tools node turns the
    ``ToolFailure`` into the error result) unless the run's ``Context.handle_tool_errors`` is
    false; interrupts, cancellation and a refused resume value pass through."""
    try:
        return await execute(request)
    except (GraphBubbleUp, asyncio.CancelledError, ToolFailure):
        raise
    except Exception as error:
        settings = run_settings(request.runtime.context if request.runtime else None)
        if is_invalid_resume(error) or not settings.handle_tool_errors:
            raise
        name = request.tool_call.get("name", "?")
        logger.warning("worker tool %s raised", name, exc_info=error)
        raise raised_failure(name, error) from error


def build_worker(
    name: str,
    description: str,
    *,
    model: ModelSetting,
    tools: Sequence[BaseTool],
    prompt_sections: Sequence[str],
    recursion_limit: int = 25,
) -> Worker:
    """A worker whose model works with ``tools`` under the prompt files ``prompt_sections``
    (names under ``prompts/``, joined in order). ``model`` is resolved like the supervisor's:
    an instance, a ``"provider:model"`` string, or None for the run's context model."""
    tool_list = list(tools)
    # The prompt sets already read; a run's is the delegating graph's, in its config.
    prompts_read: set[Prompts] = set()

    async def call_model(state: WorkerState, *, runtime: Runtime[Context]) -> Command[WorkerTarget]:
        prompts = prompts_in(get_config())
        if prompts not in prompts_read:  # read prompt files off the event loop, once
            await asyncio.to_thread(prompts.load_all)
            prompts_read.add(prompts)
        settings = run_settings(runtime.context)
        if prompt_profile(settings, model_setting_of(model, settings)) is COMPACT:
            # A small model: the harness does the item's planned action (issue 27). The
            # compact profile is a plug-in, loaded only when used.
            from agent.prompting.compact_worker import worker_step

            reply = worker_step(tool_list, state.messages, prompts=prompts)
            if reply is not None:
                target: WorkerTarget = "tools" if reply.tool_calls else "__end__"
                return Command(goto=target, update={"messages": [reply]})
        system = "\n\n".join(prompts.load(section) for section in prompt_sections)
        chat = await resolve_chat_model(model, settings)
        bound = chat.bind_tools(model_tool_schemas(tool_list)) if tool_list else chat
        response = await bound.ainvoke([SystemMessage(content=system), *state.messages])
        if not isinstance(response, AIMessage):
            raise TypeError(f"worker {name!r}: the model returned {type(response).__name__}")
        repairs = invalid_tool_call_messages(response)
        update: dict[str, Any] = {"messages": [response, *repairs]}
        if response.tool_calls:
            return Command(goto="tools", update=update)
        # Malformed calls were answered with an error: let the model try again.
        if repairs:
            return Command(goto="model", update=update)
        return Command(goto="__end__", update=update)

    builder = StateGraph(WorkerState, context_schema=Context)
    builder.add_node("model", call_model, destinations=("model", "tools", END))
    builder.add_node("tools", build_tools_node(tool_list, inner=raised_as_failure))
    builder.add_edge(START, "model")
    builder.add_edge("tools", "model")
    # No checkpointer, ever: each delegation is a fresh run, even under a checkpointed parent.
    graph = builder.compile(checkpointer=False, name=f"worker:{name}")
    return Worker(name=name, description=description, graph=graph, recursion_limit=recursion_limit)
