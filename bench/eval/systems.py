"""The systems the evaluation compares: one model, one set of domain tools, four agents.

- ``turnplan-auto``, ``turnplan-always``, ``turnplan-off``: ``agent.graph.build_graph`` with the
  run's ``Context.planning`` (``off`` binds no plan tools and asks for no plan), the model given
  as its setting string, so it is resolved (and its prompt profile chosen) as in any deployment;
- ``turnplan-audit``: ``turnplan-auto`` with ``Context.audit_model`` the same model, or the one
  ``--audit-model`` names (run only when named);
- ``todolist``: LangChain's ``create_agent`` with ``TodoListMiddleware`` (``write_todos``), the
  same domain tools and turnplan's base prompt with the same toolset sections, on the chat model
  ``agent.llm.chat_models.resolve_chat_model`` builds for the same setting.

A request with earlier ``turns`` sends each as its own turn on the same thread (same
checkpointer and thread id) before the measured one, as a user typing them would; only the last
turn's answer, tool calls and pause are the outcome. A turn that pauses on ``ask_user`` returns
from ``ainvoke`` with the interrupt pending; the runner records the question as the answer and
never resumes it, so a pause cannot hang a run (a later turn on the thread is then the user's
reply, as in the app).

Every run gets a fresh folder (SQLite database, conversation task files) and the same user and
conversation id, so the checks read the end state from the same places for every system. A
request with ``workers`` lets turnplan delegate (the worker's toolset is then *not* bound to the
supervisor, so the work must go through ``delegate``); a system that cannot delegate
(``turnplan-off``: delegation hands over a plan item; ``todolist``) gets the worker's toolset
itself, so it can still do the request.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NotRequired, Protocol

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.outputs import LLMResult
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.checkpoint.memory import InMemorySaver

from agent.context import Context
from agent.errors import ToolFailure
from agent.graph import build_graph
from agent.llm.chat_models import resolve_chat_model
from agent.state import InputState
from agent.tools.conversation_tasks import CONVERSATION_TASKS_PROMPT, build_conversation_task_tools
from agent.tools.personal_tasks import build_task_tools
from agent.tools.task_worker import build_task_worker
from agent.turn.identity import REMINDER_NAME
from agent.turn.plan_rows import TurnPlan
from bench.eval.checks import RunOutcome, TaskState
from bench.eval.requests import EvalRequest
from bench.wire import text_of
from prompts import load_prompt
from storage import Database
from storage.repositories import TaskRepository, TurnScope
from storage.task_files import TaskFiles, TaskList

USER = Context().user_id
CONVERSATION = "eval-conversation"
RECURSION_LIMIT = 200
"""LangGraph super-steps per run: far above what a turn within turnplan's call cap takes; it
stops a system that loops (todolist has no call cap of its own)."""


class UsageCounter(BaseCallbackHandler):
    """LLM calls and tokens of a run, from the chat model's ``usage_metadata`` (the same
    callback for every system, passed in the run's config, so worker calls count too)."""

    run_inline = True

    def __init__(self) -> None:
        self.calls = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.calls_without_usage = 0

    def on_chat_model_start(self, serialized: Any, messages: Any, **kwargs: Any) -> None:
        self.calls += 1

    def on_llm_end(self, response: LLMResult, **kwargs: Any) -> None:
        for generations in response.generations:
            for generation in generations:
                usage = getattr(getattr(generation, "message", None), "usage_metadata", None)
                if usage is None:
                    self.calls_without_usage += 1
                    continue
                self.prompt_tokens += int(usage["input_tokens"])
                self.completion_tokens += int(usage["output_tokens"])


class EvalSystem(Protocol):
    """A system under evaluation."""

    @property
    def name(self) -> str:
        """The system's name in the results."""
        ...

    async def run(
        self, request: EvalRequest, model: str, workdir: Path, usage: UsageCounter
    ) -> RunOutcome:
        """Run ``request`` as one turn with the model setting ``model`` in the fresh folder
        ``workdir``; the end state is read after the turn."""
        ...


def _config(usage: UsageCounter) -> RunnableConfig:
    return {
        "callbacks": [usage],
        "recursion_limit": RECURSION_LIMIT,
        "configurable": {"thread_id": uuid.uuid4().hex},
    }


def _database(workdir: Path) -> Database:
    return Database(f"sqlite+aiosqlite:///{workdir / 'eval.db'}")


async def seed(request: EvalRequest, database: Database, tasks_dir: Path) -> None:
    """The tasks that exist before the turn."""
    if request.setup_personal:
        async with database.session() as session:
            tasks = TaskRepository(session, USER)
            for item in request.setup_personal:
                task = await tasks.add(item.title)
                if item.done:
                    await tasks.mark_completed(task)
    if request.setup_conversation:

        def write(task_list: TaskList) -> None:
            for item in request.setup_conversation:
                task_list.add(item.title).done = item.done

        await asyncio.to_thread(TaskFiles(tasks_dir).update, CONVERSATION, write)


async def end_state(database: Database, tasks_dir: Path) -> tuple[list[TaskState], list[TaskState]]:
    """The user's personal tasks and the conversation's task list as they are now."""
    async with database.session(readonly=True) as session:
        rows = await TaskRepository(session, USER).find()
    personal = [TaskState(row.title, bool(row.completed)) for row in rows]
    task_list = await asyncio.to_thread(TaskFiles(tasks_dir).read, CONVERSATION)
    conversation = [TaskState(task.title, task.done) for task in task_list.tasks]
    return personal, conversation


def question_of(output: dict[str, Any]) -> str | None:
    """The question the turn paused on (``ask_user``'s interrupt), if it paused on one."""
    for pending in output.get("__interrupt__") or ():
        value = getattr(pending, "value", None)
        if isinstance(value, dict) and value.get("question"):
            return str(value["question"])
    return None


def this_turn(output: dict[str, Any]) -> list[Any]:
    """The messages of the last turn: those after the last human message the user sent (a
    thread's earlier turns stay in its state; turnplan's own reminders, named
    ``REMINDER_NAME``, open no turn)."""
    messages = list(output.get("messages") or [])
    starts = [
        i
        for i, message in enumerate(messages)
        if isinstance(message, HumanMessage) and message.name != REMINDER_NAME
    ]
    return messages[starts[-1] + 1 :] if starts else messages


def answer_of(output: dict[str, Any]) -> str:
    """The turn's reply to the user: its last AI message, or the question it paused on (an
    earlier turn's answer never counts)."""
    question = question_of(output)
    if question is not None:
        return question
    for message in reversed(this_turn(output)):
        if isinstance(message, AIMessage) and not message.tool_calls:
            return text_of(message.content).strip()
    return ""


def tools_called(output: dict[str, Any]) -> tuple[str, ...]:
    """The names of the tools the last turn called, in order."""
    return tuple(
        str(call["name"])
        for message in this_turn(output)
        if isinstance(message, AIMessage)
        for call in message.tool_calls
    )


def _tools_for(request: EvalRequest, delegating: bool) -> list[str]:
    toolsets = list(request.toolsets)
    if request.workers and not delegating and "personal_tasks" not in toolsets:
        toolsets.append("personal_tasks")  # the tasks worker's own toolset, bound directly
    return toolsets


@dataclass
class TurnplanEval:
    """turnplan's graph with one ``Context.planning`` setting; with ``audit``, each planned
    answer is audited (``Context.audit_model``: ``audit_model``, else the run's model), as
    ``turnplan-audit``."""

    planning: str
    audit: bool = False
    audit_model: str | None = None
    profile: str = "auto"
    """``Context.prompt_profile`` (``--profile``): auto is what a deployment gets."""

    @property
    def name(self) -> str:
        return "turnplan-audit" if self.audit else f"turnplan-{self.planning}"

    async def run(
        self, request: EvalRequest, model: str, workdir: Path, usage: UsageCounter
    ) -> RunOutcome:
        database = _database(workdir)
        tasks_dir = workdir / "tasks"
        delegating = bool(request.workers) and self.planning != "off"
        try:
            await database.create_schema()
            await seed(request, database, tasks_dir)
            graph = build_graph(
                model,
                database=database,
                tasks_dir=tasks_dir,
                workers=[build_task_worker(model, database)] if delegating else [],
                checkpointer=InMemorySaver(),
            )
            context = Context(
                planning=self.planning,  # type: ignore[arg-type]
                toolsets=_tools_for(request, delegating),  # type: ignore[arg-type]
                conversation_id=CONVERSATION,
                user_id=USER,
                audit_model=(self.audit_model or model) if self.audit else None,
                prompt_profile=self.profile,  # type: ignore[arg-type]
            )
            config = _config(usage)
            before = None
            for index, text in enumerate((*request.turns, request.text)):
                if index == len(request.turns) and request.turns:
                    before = await end_state(database, tasks_dir)
                output = await graph.ainvoke(
                    InputState(messages=[HumanMessage(content=text)]),
                    config=config,
                    context=context,
                )
            rows = 0
            if output.get("turnId"):
                scope = TurnScope(output["conversationId"], output["turnId"])
                rows = (await TurnPlan(database, scope).rows())[1].total
            personal, conversation = await end_state(database, tasks_dir)
        finally:
            await database.dispose()
        return RunOutcome(
            answer=answer_of(output),
            personal=personal,
            conversation=conversation,
            plan_items=rows,
            chooses_plan=self.planning == "auto",
            turn_status=str(output.get("turnStatus") or ""),
            audit_calls=int(output.get("auditCalls") or 0),
            audit_tokens=int(output.get("auditTokens") or 0),
            paused=question_of(output) is not None,
            tool_calls=tools_called(output),
            before_personal=before[0] if before else None,
            before_conversation=before[1] if before else None,
        )


def _harness_middleware() -> Any:
    """A ``create_agent`` middleware for what the harness needs and the framework lacks:

    - a failed tool call's error envelope for the model, as turnplan's tools node gives it
      (``ToolFailure`` would otherwise end the whole run);
    - the conversation id in the state, where the conversation task tools read it;
    - the system message as plain text: ``TodoListMiddleware`` appends its prompt as content
      blocks, which llama.cpp's OpenAI server refuses (HTTP 500, "Input should be a valid
      string"), so without this the system could not run on the embedded model at all. The
      text is the same; only its JSON form changes. Listed after ``TodoListMiddleware`` so it
      sees the message that middleware built.
    """
    from langchain.agents.middleware import AgentMiddleware, AgentState

    class EvalState(AgentState[Any]):
        conversationId: NotRequired[str]

    class Harness(AgentMiddleware[EvalState, Any]):
        state_schema = EvalState

        async def awrap_model_call(self, request: Any, handler: Any) -> Any:
            system = request.system_message
            if system is not None and not isinstance(system.content, str):
                text = "\n\n".join(
                    block["text"] for block in system.content_blocks if block.get("type") == "text"
                )
                request = request.override(system_message=SystemMessage(content=text))
            return await handler(request)

        async def awrap_tool_call(self, request: Any, handler: Any) -> Any:
            try:
                return await handler(request)
            except ToolFailure as failure:
                return ToolMessage(
                    content=json.dumps(failure.envelope(), ensure_ascii=False),
                    tool_call_id=request.tool_call["id"] or "",
                    name=request.tool_call["name"],
                    status="error",
                )

    return Harness()


def todolist_tools(
    toolsets: Sequence[str], database: Database, tasks_dir: Path
) -> tuple[list[BaseTool], list[str]]:
    """The domain tools and their prompt sections, as turnplan binds them for ``toolsets``."""
    tools: list[BaseTool] = []
    sections: list[str] = []
    if "personal_tasks" in toolsets:
        tools.extend(build_task_tools(database))
        sections.append(load_prompt("personal_tasks"))
    if "conversation_tasks" in toolsets:
        tools.extend(build_conversation_task_tools(tasks_dir))
        sections.append(load_prompt(CONVERSATION_TASKS_PROMPT))
    return tools, sections


class TodoListEval:
    """``create_agent(model, tools, middleware=[TodoListMiddleware()])``."""

    name = "todolist"

    async def run(
        self, request: EvalRequest, model: str, workdir: Path, usage: UsageCounter
    ) -> RunOutcome:
        from langchain.agents import create_agent
        from langchain.agents.middleware import TodoListMiddleware

        database = _database(workdir)
        tasks_dir = workdir / "tasks"
        try:
            await database.create_schema()
            await seed(request, database, tasks_dir)
            chat_model = await resolve_chat_model(model, Context())
            tools, sections = todolist_tools(_tools_for(request, False), database, tasks_dir)
            agent = create_agent(
                chat_model,
                tools,
                system_prompt="\n\n".join([load_prompt("supervisor"), *sections]),
                middleware=[TodoListMiddleware(), _harness_middleware()],
                checkpointer=InMemorySaver(),
            )
            config = _config(usage)
            before = None
            for index, text in enumerate((*request.turns, request.text)):
                if index == len(request.turns) and request.turns:
                    before = await end_state(database, tasks_dir)
                state: Any = {
                    "messages": [HumanMessage(content=text)],
                    "conversationId": CONVERSATION,
                }
                output = await agent.ainvoke(state, config=config)
            personal, conversation = await end_state(database, tasks_dir)
        finally:
            await database.dispose()
        return RunOutcome(
            answer=answer_of(output),
            personal=personal,
            conversation=conversation,
            plan_items=len(output.get("todos") or []),
            chooses_plan=True,
            paused=question_of(output) is not None,
            tool_calls=tools_called(output),
            before_personal=before[0] if before else None,
            before_conversation=before[1] if before else None,
        )


def all_systems(audit_model: str | None = None, profile: str = "auto") -> list[EvalSystem]:
    """Every system, in the report's order; ``turnplan-audit``'s auditor is ``audit_model``,
    else the run's model; turnplan's systems use the prompt profile ``profile``."""
    return [
        TurnplanEval("auto", profile=profile),
        TurnplanEval("always", profile=profile),
        TurnplanEval("off", profile=profile),
        TodoListEval(),
        TurnplanEval("auto", audit=True, audit_model=audit_model, profile=profile),
    ]


SYSTEM_NAMES = tuple(system.name for system in all_systems())

DEFAULT_SYSTEMS = ("turnplan-auto",)
"""The system a suite runs unless ``--systems`` names others: the default as a user meets it
(``planning`` auto; with ``local``, the compact profile), the one issue 40's rules are judged
on. The comparison systems run when named (``turnplan-audit`` is ``turnplan-auto`` plus a
second model call per planned turn)."""

COMPARED_SYSTEMS = tuple(name for name in SYSTEM_NAMES if name != "turnplan-audit")
"""The four systems of the issue 27 comparison (``--systems`` with these names)."""
