"""What the nodes share for the life of a compiled graph: database, tools, model, prompt.

``build_graph`` assembles one ``SupervisorDeps``; nodes are built from it by closure. Nothing
here does I/O when constructed: the database connects and the model is built on first use.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, AnyMessage
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langgraph.checkpoint.base import BaseCheckpointSaver

from agent.calls.catalog import RunTools, ToolCatalog
from agent.calls.tool_schemas import model_tool_schemas
from agent.context import Context
from agent.llm.chat_models import model_setting_of, resolve_chat_model
from agent.prompting.builder import (
    Phase,
    PromptProfile,
    history_limit,
    prompt_profile,
    step_phase,
    step_tools,
    system_prompt,
)
from agent.tool_names import CONTINUE_OPEN_TODOS
from agent.turn.superseded import RunFates
from prompts import Prompts, chosen
from storage import Database
from storage.loop_shutdown import call_at_loop_shutdown
from storage.models import TurnTodo

ModelWithTools = Runnable[LanguageModelInput, AIMessage]
BoundModels = dict[tuple[int, tuple[str, ...], str | None], tuple[BaseChatModel, ModelWithTools]]
"""Bound models of one loop, by (model instance id, bound tool names, forced tool)."""
BOUND_LIMIT = 64
"""Bound models kept per loop (one per model instance and forced tool)."""
NOTE_TITLES = 3
"""Titles of open rows the open-items note names (the count says how many there are)."""


def open_items_note(titles: Sequence[str], prompts: Prompts | None = None) -> str:
    """The one line telling the plan step that earlier turns left ``titles`` open."""
    named = ", ".join(f"'{title}'" for title in titles[:NOTE_TITLES])
    if len(titles) > NOTE_TITLES:
        named += ", …"
    return chosen(prompts).render("open_todos_note", count=len(titles), titles=named)


@dataclass(frozen=True)
class StepCall:
    """What one LLM call uses: the model with the step's tools bound, and what
    ``agent.prompting.builder.model_messages`` needs to build its messages."""

    model: ModelWithTools
    profile: PromptProfile
    base_prompt: str
    history_limit: int


@dataclass
class SupervisorDeps:
    """Process-wide collaborators of the supervisor's nodes."""

    database: Database
    catalog: ToolCatalog
    """Every tool of the graph; each run binds its own selection (``Context.toolsets``)."""
    model: BaseChatModel | str | None = None
    """A chat model instance (used for every run), a model string, or None to take the model
    from the run's context, then ``TURNPLAN_MODEL``, then the embedded default."""
    agent_types: Mapping[str, str] = field(default_factory=dict)
    """Registered workers as ``{agentType: description}``, listed in the delegation section."""
    checkpoints: BaseCheckpointSaver[Any] | None = None
    """The checkpointer the graph was compiled with (Python callers; a server brings its own):
    how a run without a server run id tells its own lost steps from a fork
    (``agent.turn.lineage.RunIdentity.lost_since``)."""
    run_fates: RunFates | None = None
    """How a run asks the LangGraph Server it runs in what became of the thread's other runs
    (``agent.turn.superseded``); None for Python callers, which have no server runs."""
    prompts: Prompts = field(default_factory=Prompts.at)
    """The graph's prompt texts (``build_graph(prompts_dir=...)``), passed to everything that
    renders one; default: the environment's."""
    _prompts_ready: bool = field(default=False, init=False)
    _bound: dict[asyncio.AbstractEventLoop, BoundModels] = field(default_factory=dict, init=False)
    """Bound models per event loop; a loop's entries go when ``asyncio.run`` ends it (the chat
    models of a finished loop are closed then too, so they must not stay reachable here)."""
    _loop_hooks: dict[asyncio.AbstractEventLoop, AsyncGenerator[None, None]] = field(
        default_factory=dict, init=False
    )
    _prompts: dict[tuple[str, ...], str] = field(default_factory=dict, init=False)

    async def prepare(self) -> None:
        """Read the prompt files once, off the event loop (the dev server rejects blocking
        file reads in async code); later prompt use is served from memory."""
        if not self._prompts_ready:
            await asyncio.to_thread(self.prompts.load_all)
            self._prompts_ready = True

    def base_prompt(
        self,
        run_tools: RunTools,
        profile: PromptProfile,
        phase: Phase = "planning",
        planning: str = "auto",
    ) -> str:
        """The system prompt of ``profile`` in ``phase`` for a run's tools: their sections, and
        only theirs (``planning``: ``Context.planning``)."""
        key = (profile.name, phase, planning, *run_tools.key)
        prompt = self._prompts.get(key)
        if prompt is None:
            sections = [self.prompts.load(name) for name in run_tools.prompt_sections]
            prompt = system_prompt(
                run_tools.names,
                sections,
                agent_types=self.agent_types,
                profile=profile,
                phase=phase,
                planning=planning,
                prompts=self.prompts,
            )
            if len(self._prompts) >= BOUND_LIMIT:
                self._prompts.pop(next(iter(self._prompts)))
            self._prompts[key] = prompt
        return prompt

    async def chat_model(self, context: Context) -> BaseChatModel:
        """The chat model for a run (instances are used as given)."""
        return await resolve_chat_model(self.model, context)

    async def model_with_tools(
        self, context: Context, tools: Sequence[BaseTool], *, required_tool: str | None = None
    ) -> ModelWithTools:
        """The run's chat model with ``tools`` bound; ``required_tool`` forces that call.
        Cached per model instance, tool selection and forced tool."""
        model = await self.chat_model(context)
        loop_bound = await self._loop_cache()
        key = (id(model), tuple(tool.name for tool in tools), required_tool)
        cached = loop_bound.get(key)
        if cached is not None and cached[0] is model:
            return cached[1]
        schemas = model_tool_schemas(tools)
        if required_tool is None:
            bound = model.bind_tools(schemas)
        else:
            bound = model.bind_tools(schemas, tool_choice=required_tool)
        if len(loop_bound) >= BOUND_LIMIT:
            loop_bound.pop(next(iter(loop_bound)))
        loop_bound[key] = (model, bound)
        return bound

    async def _loop_cache(self) -> BoundModels:
        """This loop's bound models, forgotten when ``asyncio.run`` ends the loop."""
        loop = asyncio.get_running_loop()
        cache = self._bound.get(loop)
        if cache is None:
            cache = self._bound[loop] = {}

            async def forget() -> None:
                self._bound.pop(loop, None)
                self._loop_hooks.pop(loop, None)

            self._loop_hooks[loop] = await call_at_loop_shutdown(forget)
        return cache

    @property
    def bound_loops(self) -> int:
        """Event loops holding bound models (one per live loop that ran a turn)."""
        return len(self._bound)

    def offers_continue(self, context: Context) -> bool:
        """Whether a plan step of this run can be told of rows earlier turns left open and
        offered ``continue_open_todos`` (with planning on: the full profile's model is told in
        a line and given the tool; the compact profile's harness calls it for a step that asks
        to continue)."""
        return context.planning != "off"

    async def step_call(
        self,
        context: Context,
        *,
        history: Sequence[AnyMessage],
        rows: Sequence[TurnTodo],
        required_tool: str | None = None,
        request: str = "",
        open_elsewhere: Sequence[str] = (),
        superseded: str = "",
    ) -> StepCall:
        """The model and prompt parts of one call under the run's prompt profile
        (``agent.prompting.builder.FULL`` or ``COMPACT``). ``open_elsewhere``: titles of the
        rows earlier turns left open, for a plan step: the full profile then says so in one
        line and binds ``continue_open_todos`` (never otherwise: its schema would be sent with
        every call for nothing); the compact profile offers it to its plan's verbs only
        (``agent.prompting.compact_plan_step.continues``), so a small model is told nothing.
        ``superseded``: the note on earlier turns a newer run stopped
        (``agent.turn.superseded.superseded_note``), added to the system prompt of every
        profile: what stays done is news the user must get whatever the model."""
        setting = model_setting_of(self.model, context)
        run_tools = await self.catalog.for_run(context)
        profile = prompt_profile(context, setting)
        offer_continue = bool(open_elsewhere) and self.offers_continue(context)
        if not offer_continue:
            run_tools = run_tools.without(CONTINUE_OPEN_TODOS)
        if profile.tools == "by_phase":
            tools = step_tools(run_tools.tools, rows, required_tool, context.planning)
            model = await self.model_with_tools(context, tools, required_tool=required_tool)
        elif context.planning == "off":
            # The compact profile is a plug-in: a deployment that never uses it never loads it.
            from agent.prompting import compact_no_plan

            binding = compact_no_plan.no_plan_binding(run_tools.tools, history, request)
            model = compact_no_plan.bind_no_plan(await self.chat_model(context), binding)
        else:
            from agent.prompting import compact_tools

            binding = compact_tools.step_binding(
                run_tools.tools, rows, history, required_tool, request, prompts=self.prompts
            )
            chat = await self.chat_model(context)
            model = compact_tools.bind_step(chat, binding, rows, prompts=self.prompts)
        base_prompt = self.base_prompt(
            run_tools, profile, step_phase(rows, required_tool), context.planning
        )
        if offer_continue and profile.tools == "by_phase":
            base_prompt = f"{base_prompt}\n\n{open_items_note(open_elsewhere, self.prompts)}"
        if superseded:
            base_prompt = f"{base_prompt}\n\n{superseded}"
        return StepCall(
            model=model,
            profile=profile,
            base_prompt=base_prompt,
            # The no-plan loop has no plan view to say what was done: it gets the configured
            # window, not the compact profile's cap (sized for a view that carries the turn).
            history_limit=(
                context.history_limit
                if context.planning == "off"
                else history_limit(profile, context.history_limit, rows)
            ),
        )
