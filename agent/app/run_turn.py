"""``turnplan run``: one turn of the supervisor from the command line, the plan shown as it moves.

It is the same graph the dev server serves, driven through LangGraph's public streaming API: the
custom ``turnplan.todo`` events draw the plan, the final state gives the answer. Nothing here is
specific to the local model; ``--model`` (or ``TURNPLAN_MODEL``) picks any supported one.
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal, TextIO

from langchain_core.callbacks import AsyncCallbackHandler
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolCall, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.types import Command, StreamMode

from agent.app.checkpoints import open_checkpointer
from agent.context import Context, ToolsetName
from agent.graph import SupervisorGraph, build_graph
from agent.state import InputState
from agent.tools.mcp import McpTools
from agent.turn.approval import decision_from_message
from agent.turn.plan_rows import TurnPlan
from agent.turn.progress import EVENT_TYPE
from agent.turn.usage import TurnUsage, turn_usage
from storage import Database
from storage.repositories import TurnScope

MCP_LOG_DIR = Path(".turnplan") / "logs"
"""Where MCP stdio servers' stderr goes (``mcp-<server>.log``), so it does not mix into the
turn's output."""

STREAM_MODES: list[StreamMode] = ["custom", "updates", "values"]
EVENT_MARKS = {
    "planned": "+",
    "started": ">",
    "completed": "✓",
    "cancelled": "✗",
    "delegated": "→",
    "returned": "←",
}


@dataclass
class TurnReport:
    """What a finished CLI turn returns (the exit status is derived from it)."""

    status: str
    answer: str
    llm_calls: int
    """Steps the turn took against its budget (``llmCalls``: model calls, and the steps the
    compact profile's harness answers itself)."""
    open_items: int
    model_calls: int = 0
    """Requests that really went to the chat model."""
    prompt_tokens: int = 0
    """Prompt tokens of the turn's LLM calls (``agent.turn.usage``)."""
    completion_tokens: int = 0
    """Completion tokens of the turn's LLM calls."""
    usage_estimated: bool = False
    """The model server reported no usage for some call: the tokens are estimated."""


class ModelCallCounter(AsyncCallbackHandler):
    """Counts the chat model requests of a turn, so the CLI reports real LLM calls, not the
    budget's steps (a compact-profile step the harness answers calls no model)."""

    def __init__(self) -> None:
        self.calls = 0

    async def on_chat_model_start(self, *args: Any, **kwargs: Any) -> None:
        self.calls += 1


def _format_event(event: dict[str, Any]) -> str:
    mark = EVENT_MARKS.get(event["event"], "?")
    line = f"  {mark} {event['event']:<9} {event['title']}"
    if event.get("outcome") and event["event"] in ("completed", "cancelled"):
        line += f" — {event['outcome']}"
    if event.get("agentType"):
        line += f" [{event['agentType']}]"
    if event.get("error"):
        line += f" — failed: {event['error']}"
    return line


def _format_tool_call(call: ToolCall) -> str:
    args = ", ".join(f"{key}={value!r}" for key, value in call["args"].items())
    if len(args) > 120:
        args = args[:119] + "…"
    return f"    · {call['name']}({args})"


def _print_tool_activity(update: Any, out: TextIO) -> None:
    """The tool calls a node's update carries, and the errors tools returned. A tools step whose
    calls changed the plan streams a list of updates (one carries the plan snapshot)."""
    parts = update if isinstance(update, list) else [update]
    messages = [
        message for part in parts if isinstance(part, dict) for message in part.get("messages", [])
    ]
    for message in messages:
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                print(_format_tool_call(call), file=out, flush=True)
        elif isinstance(message, ToolMessage) and message.status == "error":
            print(f"    ! {message.name}: {message.content}", file=out, flush=True)


async def run_turn(
    request: str | None,
    *,
    model: BaseChatModel | str | None = None,
    database_url: str | None = None,
    user_id: str = "local-user",
    conversation_id: str | None = None,
    thread_id: str | None = None,
    resume: bool = False,
    planning: Literal["auto", "always", "off"] = "auto",
    toolsets: Sequence[ToolsetName] | None = None,
    approve_plan: bool = False,
    out: TextIO | None = None,
    show_tool_calls: bool = True,
    ask: Ask | None = None,
) -> TurnReport:
    """Run one turn on a thread kept in the database and print the plan's progress, the tool
    calls and the final answer to ``out`` (default: the current ``sys.stdout``).

    ``thread_id`` continues that conversation (a new thread when None); ``resume`` finishes the
    thread's interrupted turn instead of starting one (``request`` is then not used).
    ``toolsets``: the built-in toolsets to bind (default: ``Context``'s). When the turn pauses
    with a question (``ask_user``), ``ask`` gets it and returns the answer, or None to leave the
    turn paused (default: ask in the terminal; no terminal input leaves it paused).
    """
    out = out or sys.stdout
    database = Database(database_url)
    thread = thread_id or str(uuid.uuid4())
    counter = ModelCallCounter()
    config: RunnableConfig = {"configurable": {"thread_id": thread}, "callbacks": [counter]}
    context = turn_context(user_id, conversation_id, planning, toolsets, approve_plan)
    print(f"turnplan · database {database.url} · thread {thread}", file=out)
    final: dict[str, Any] = {}
    # Ours to close when the turn ends: an HTTP server would otherwise keep the sessions open
    # until its idle timeout (cancelled at the loop's end, the client never says goodbye).
    mcp = McpTools(stderr_dir=MCP_LOG_DIR)
    try:
        async with open_checkpointer(database) as checkpointer:
            graph = build_graph(
                model, database=database, checkpointer=checkpointer, mcp_servers=mcp
            )
            if resume:
                pending = await graph.aget_state(config)
                if not pending.next:
                    print(f"Nothing to resume: thread {thread} has no unfinished turn.", file=out)
                    return TurnReport("failed", "", 0, 0)
                print(f"resuming: {pending.values.get('turnRequest', '')}\n", file=out)
                turn_input: InputState | None = None
            else:
                print(f"request: {request}\n", file=out, flush=True)
                turn_input = InputState(messages=[HumanMessage(content=request or "")])
            final = await _stream_turn(graph, turn_input, config, context, out, show_tool_calls)
            while (question := await _pending_interrupt(graph, config)) is not None:
                answer = await (ask or ask_in_terminal)(question, out)
                if answer is None:
                    print(
                        f"\nturn paused: it waits for your answer. Answer with "
                        f'turnplan run --thread {thread} "<your answer>".',
                        file=out,
                        flush=True,
                    )
                    steps = int(final.get("llmCalls", 0))
                    return TurnReport("paused", "", steps, 0, counter.calls)
                final = await _stream_turn(
                    graph, Command(resume=answer), config, context, out, show_tool_calls
                )
        rows_open = await _open_items(database, final)
    finally:
        await mcp.aclose()
        await database.dispose()

    return report_turn(final, counter.calls, rows_open, out)


def turn_context(
    user_id: str,
    conversation_id: str | None,
    planning: Literal["auto", "always", "off"],
    toolsets: Sequence[ToolsetName] | None,
    approve_plan: bool,
) -> Context:
    """The turn's run context from ``run_turn``'s options; an option left out keeps
    ``Context``'s default."""
    context = Context(user_id=user_id, conversation_id=conversation_id, planning=planning)
    if toolsets is not None:
        context = replace(context, toolsets=list(toolsets))
    if approve_plan:
        context = replace(context, approve_plan=True)
    return context


def report_turn(final: dict[str, Any], calls: int, rows_open: int, out: TextIO) -> TurnReport:
    """Print the ended turn's answer, status and usage to ``out``, and return them as the
    report the caller (the CLI, the tests) reads."""
    messages = final.get("messages", [])
    answer = str(messages[-1].content) if messages else ""
    status = str(final.get("turnStatus", "failed"))
    print(f"\nanswer:\n{answer}\n", file=out)
    steps = int(final.get("llmCalls", 0))
    print(
        f"turn {status} · {calls} LLM call(s) in {steps} step(s) · "
        f"{rows_open} plan item(s) left open",
        file=out,
        flush=True,
    )
    usage = turn_usage(final)
    print(usage_line(usage), file=out, flush=True)
    return TurnReport(
        status,
        answer,
        steps,
        rows_open,
        calls,
        usage.prompt_tokens,
        usage.completion_tokens,
        usage.estimated,
    )


def usage_line(usage: TurnUsage) -> str:
    """The turn's tokens as ``turnplan run`` prints them last."""
    estimated = " (estimated from characters: the model server reported none)"
    return (
        f"tokens: {usage.prompt_tokens} prompt + {usage.completion_tokens} completion"
        f"{estimated if usage.estimated else ''}"
    )


async def _stream_turn(
    graph: SupervisorGraph,
    turn_input: InputState | Command[Any] | None,
    config: RunnableConfig,
    context: Context,
    out: TextIO,
    show_tool_calls: bool,
) -> dict[str, Any]:
    """Stream the run, printing plan events and tool activity; returns the final state."""
    final: dict[str, Any] = {}
    # "sync": each step's checkpoint is written before the next step starts. LangGraph's default
    # writes it while the next step runs, so a process killed during a model call could lose
    # the steps before it, and --resume would find no unfinished turn.
    async for mode, chunk in graph.astream(
        turn_input, config, context=context, stream_mode=STREAM_MODES, durability="sync"
    ):
        if mode == "custom" and isinstance(chunk, dict) and chunk.get("type") == EVENT_TYPE:
            print(_format_event(chunk), file=out, flush=True)
        elif mode == "updates" and show_tool_calls and isinstance(chunk, dict):
            for update in chunk.values():
                _print_tool_activity(update, out)
        elif mode == "values" and isinstance(chunk, dict):
            final = chunk
    return final


Ask = Callable[[dict[str, Any], TextIO], Awaitable[Any]]
"""Gets the value of a pending interrupt and returns the answer (None: leave it paused)."""


async def _pending_interrupt(
    graph: SupervisorGraph, config: RunnableConfig
) -> dict[str, Any] | None:
    """The value of the interrupt the run paused at, if it paused."""
    state = await graph.aget_state(config)
    for interrupt in state.interrupts:
        if isinstance(interrupt.value, dict):
            return interrupt.value
    return None


async def ask_in_terminal(pause: dict[str, Any], out: TextIO) -> Any:
    """Show what the run paused for and read the answer from standard input (None when there
    is nothing to read): a question, whose numbered options a number picks; or a plan to
    approve, which a plain yes approves and any other reply rejects, with it as the reason."""
    if pause.get("type") == "plan_approval":
        print("\n? Approve this plan? (yes, or say why not)", file=out)
        for number, item in enumerate(pause.get("items") or [], start=1):
            print(f"  {number}. {item.get('title', '')}", file=out)
        if pause.get("error"):
            print(f"  ({pause['error']})", file=out)
        line = await _read_line(out)
        if line is None:
            return None
        decision = decision_from_message(line)
        if decision.action == "approve":
            return {"action": "approve"}
        return {"action": "reject", "reason": decision.reason}
    print(f"\n? {pause.get('question', '')}", file=out)
    options = [str(option) for option in pause.get("options") or []]
    for number, option in enumerate(options, start=1):
        print(f"  {number}. {option}", file=out)
    answer = await _read_line(out)
    if answer is not None and answer.isdigit() and 1 <= int(answer) <= len(options):
        return options[int(answer) - 1]
    return answer


async def _read_line(out: TextIO) -> str | None:
    print("> ", end="", file=out, flush=True)
    try:
        line: str = await asyncio.to_thread(sys.stdin.readline)
    except (OSError, ValueError):
        return None
    if not line:
        print(file=out)
        return None
    return line.strip()


async def _open_items(database: Database, final: dict[str, Any]) -> int:
    """Rows of this turn still pending or in progress (0 when the turn made no plan)."""
    if not final.get("turnId"):
        return 0
    scope = TurnScope(final["conversationId"], final["turnId"])
    _, counts = await TurnPlan(database, scope).rows()
    return counts.remaining
