"""Wiring of the ``supervisor`` graph: nodes, edges, compile. Logic lives in the node modules.

    START -> plan -> (tools | drain | END)
    tools -> (execute | drain)
    drain -> (execute | END)
    execute -> (tools | drain | END)

Nodes return state updates; the branches (``agent.nodes.routing``) read the next node off the state,
so an edit made in Studio as any node continues the turn.

``build_graph`` compiles a supervisor for Python callers, who pass their own model, tools,
checkpointer, store or database; ``agent.server`` builds the one ``langgraph.json`` serves, on
the server's first access. Importing this module builds nothing and touches no file: the
served graph, its database and MCP servers are made only when the server asks for them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import get_runtime
from langgraph.store.base import BaseStore
from langgraph.types import Checkpointer

from agent.calls.catalog import ToolCatalog, Toolset
from agent.calls.completion import CompletionCheck
from agent.context import BUILTIN_TOOLSETS, Context, ContextDefaults, run_settings
from agent.nodes import SupervisorNode
from agent.nodes.deps import SupervisorDeps
from agent.nodes.drain import make_drain_node
from agent.nodes.execute import make_execute_node
from agent.nodes.plan import make_plan_node
from agent.nodes.routing import after_drain, after_model_step, after_plan, after_tools
from agent.nodes.tools_node import build_supervisor_tools_node
from agent.state import InputState, OutputState, SupervisorState
from agent.tools.ask_user import build_ask_user_tool
from agent.tools.continue_plan import build_continue_tool
from agent.tools.conversation_tasks import CONVERSATION_TASKS_PROMPT, build_conversation_task_tools
from agent.tools.delegate import delegation_tools
from agent.tools.mcp import McpTools
from agent.tools.personal_tasks import build_task_tools
from agent.tools.todos import build_todo_tools
from agent.turn.superseded import RunFates
from agent.workers import Worker, WorkerRegistry
from prompts import Prompts
from storage import Database

if TYPE_CHECKING:  # `mcp` takes ~0.5 s to import: only a run that lists MCP tools needs it
    from langchain_mcp_adapters.sessions import Connection

SupervisorGraph = CompiledStateGraph[SupervisorState, Context, InputState, OutputState]


def builtin_toolsets(database: Database, tasks_dir: str | Path | None = None) -> dict[str, Toolset]:
    """The built-in domain toolsets a run picks from with ``Context.toolsets``, in the order
    their tools and prompt sections are bound."""
    toolsets = [
        Toolset("personal_tasks", tuple(build_task_tools(database)), "personal_tasks"),
        Toolset(
            "conversation_tasks",
            tuple(build_conversation_task_tools(tasks_dir)),
            CONVERSATION_TASKS_PROMPT,
        ),
    ]
    assert tuple(toolset.name for toolset in toolsets) == BUILTIN_TOOLSETS
    return {toolset.name: toolset for toolset in toolsets}


SYNC_INVOKE_MESSAGE = (
    "The turnplan supervisor is async (its database and model clients are): call "
    "`await graph.ainvoke(...)` or iterate `graph.astream(...)`; from synchronous code, "
    "`asyncio.run(graph.ainvoke(...))`."
)


class AsyncOnlyNode(Runnable[SupervisorState, Any]):
    """A supervisor node for LangGraph: async, with a sync side that says how to call the graph
    instead of LangGraph's generic "No synchronous function provided".

    A plain ``Runnable`` (langchain-core's public base class) rather than a ``RunnableLambda``:
    LangGraph already traces each node as a run of its own, and a ``RunnableLambda`` opened a
    second, nested one on every step (its callback manager, config and context copies: about a
    twentieth of the Python work of a plan item). The run's ``Runtime`` comes from
    ``get_runtime``, as LangGraph documents for code that is not handed one; the node sees
    turnplan's settings as the runtime's context whatever the run's context is
    (``agent.context.run_settings``): inside a user's graph it is the parent's."""

    def __init__(
        self,
        node: SupervisorNode,
        name: str,
        defaults: ContextDefaults | None = None,
    ) -> None:
        self._node = node
        self._defaults = defaults
        self.name = name

    def invoke(
        self, input: SupervisorState, config: RunnableConfig | None = None, **kwargs: Any
    ) -> NoReturn:
        raise TypeError(SYNC_INVOKE_MESSAGE)

    async def ainvoke(
        self, input: SupervisorState, config: RunnableConfig | None = None, **kwargs: Any
    ) -> Any:
        runtime = get_runtime(Context)
        settings = run_settings(runtime.context, self._defaults)
        if settings is not runtime.context:
            runtime = runtime.override(context=settings)
        return await self._node(input, runtime=runtime)


def build_graph(
    model: BaseChatModel | str | None = None,
    *,
    tools: Sequence[BaseTool] | None = None,
    checkpointer: Checkpointer = None,
    store: BaseStore | None = None,
    database: Database | str | None = None,
    include_default_tools: bool = True,
    workers: Sequence[Worker] | None = None,
    tasks_dir: str | Path | None = None,
    mcp_servers: Mapping[str, Connection] | McpTools | None = None,
    context: ContextDefaults | None = None,
    prompts_dir: str | Path | None = None,
    completion_checks: Mapping[str, CompletionCheck] | None = None,
    run_fates: RunFates | None = None,
) -> SupervisorGraph:
    """Compile the supervisor.

    ``model``: a chat model instance, a ``"provider:model"`` string, or None (the run's context,
    then ``TURNPLAN_MODEL``, then the embedded local model). ``tools``: your own domain tools,
    added to the todo tools and the built-in ones. ``store``: a LangGraph ``BaseStore``
    compiled into the graph, for your tools' long-term memory across threads and turns: they
    reach it through ``ToolRuntime.store`` or an ``InjectedStore`` argument (the LangGraph
    server gives the served graph its own store; turnplan's plan rows live in ``database``).
    ``database``: a ``Database`` or URL (default:
    ``TURNPLAN_DATABASE_URL``, else ``.turnplan/turnplan.db``). ``workers``: specialists plan
    items are delegated to by ``agentType`` (e.g. ``agent.tools.task_worker.build_task_worker``);
    with none, no ``delegate`` tool is bound and the graph is the plain supervisor.
    ``include_default_tools``: False leaves out the built-in toolsets (``Context.toolsets`` is
    then ignored). ``tasks_dir``: where the conversation task files go (default:
    ``TURNPLAN_TASKS_DIR``, else the working directory). ``mcp_servers``: MCP servers whose
    tools are bound, as ``MultiServerMCPClient`` connections by name (default: the file
    ``TURNPLAN_MCP_SERVERS`` names, if set), or an ``McpTools`` whose sessions you close.
    ``context``: the defaults of every run's settings, a ``Context`` or a function from the
    run's context to one. A run's own settings override them field by field: the ``Context``
    fields it names, or turnplan's keys in a dict context. Inside a user's graph, whose context
    is the user's own (or none), these defaults are turnplan's settings
    (``agent.context.run_settings``).
    ``prompts_dir``: a folder of prompt files that replace the shipped ones file by file
    (default: ``TURNPLAN_PROMPTS_DIR``, else none); checked here, so a file the code could not
    fill in fails the build with ``prompts.PromptFolderError`` (docs/prompts.md).
    ``completion_checks``: ``{agentType or "*": check}``; ``check(row, evidence)``, sync or
    async, returns None to let a row close as completed or a reason to keep it open
    (``COMPLETION_REFUSED``); see ``agent.calls.completion``.
    ``run_fates``: how a run asks the LangGraph Server it runs in about the thread's other runs,
    so a new turn closes the rows of turns a newer run rolled back or interrupted
    (``agent.turn.superseded``); the served ``graph`` has it, Python callers need none.
    """
    prompts = Prompts.at(prompts_dir)
    prompts.check()
    db = database if isinstance(database, Database) else Database(database)
    registry = WorkerRegistry(workers or ())
    catalog = tool_catalog(
        db,
        registry,
        tools,
        include_default_tools,
        tasks_dir,
        mcp_servers,
        completion_checks,
        prompts,
    )
    saved = checkpointer if isinstance(checkpointer, BaseCheckpointSaver) else None
    deps = SupervisorDeps(
        database=db,
        catalog=catalog,
        model=model,
        agent_types=registry.descriptions(),
        checkpoints=saved,
        run_fates=run_fates,
        prompts=prompts,
    )
    builder = supervisor_builder(deps, context)
    return builder.compile(checkpointer=checkpointer, store=store, name="supervisor")


def tool_catalog(
    db: Database,
    registry: WorkerRegistry,
    tools: Sequence[BaseTool] | None,
    include_default_tools: bool,
    tasks_dir: str | Path | None,
    mcp_servers: Mapping[str, Connection] | McpTools | None,
    completion_checks: Mapping[str, CompletionCheck] | None,
    prompts: Prompts | None = None,
) -> ToolCatalog:
    """Every tool the supervisor can bind: the plan tools (always), the built-in toolsets
    (unless left out), the caller's own tools and the MCP servers' (see ``build_graph``);
    ``prompts``: the graph's texts, for the tools that write one."""
    return ToolCatalog(
        core=[
            *build_todo_tools(db, completion_checks, prompts),
            build_continue_tool(db, prompts),
            build_ask_user_tool(db),
            *delegation_tools(registry, db, prompts),
        ],
        toolsets=builtin_toolsets(db, tasks_dir) if include_default_tools else {},
        extra=list(tools or []),
        mcp=mcp_servers if isinstance(mcp_servers, McpTools) else McpTools(mcp_servers),
    )


def supervisor_builder(
    deps: SupervisorDeps, context: ContextDefaults | None
) -> StateGraph[SupervisorState, Context, InputState, OutputState]:
    """The supervisor's four nodes and the edges between them; each edge's target is read from
    the state by ``agent.nodes.routing``."""
    builder = StateGraph(
        SupervisorState, context_schema=Context, input_schema=InputState, output_schema=OutputState
    )
    saved = deps.checkpoints
    builder.add_node("plan", AsyncOnlyNode(make_plan_node(deps), "plan", context))
    builder.add_node("execute", AsyncOnlyNode(make_execute_node(deps), "execute", context))
    tools = build_supervisor_tools_node(deps.catalog, deps.database, saved, context)
    builder.add_node("tools", tools)
    builder.add_node("drain", AsyncOnlyNode(make_drain_node(deps), "drain", context))
    builder.add_edge(START, "plan")
    builder.add_conditional_edges("plan", after_plan, ["tools", "drain", END])
    builder.add_conditional_edges("execute", after_model_step, ["tools", "drain", END])
    builder.add_conditional_edges("tools", after_tools, ["execute", "drain"])
    builder.add_conditional_edges("drain", after_drain, ["execute", END])
    return builder
