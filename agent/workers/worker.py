"""What a worker is: a named, compiled LangGraph graph the supervisor can hand a plan item to.

A worker sees one item (as a human message) and answers it with its own tools and prompt. It
never sees the plan and gets no todo tools (seed 004, issue 4): the supervisor alone opens and
closes rows, so the outcome of a delegated item stays the supervisor's judgement. ``Worker``
refuses a graph whose tools nodes hold a todo tool or ``delegate`` (a worker delegating onwards
would be a second supervisor with no plan).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any

from langchain_core.messages import AnyMessage
from langgraph.graph.message import add_messages
from langgraph.graph.state import CompiledStateGraph
from langgraph.prebuilt import ToolNode

from agent.state import extend_or_reset
from agent.tool_names import TODO_TOOL_NAMES

DELEGATE_TOOL_NAME = "delegate"
FORBIDDEN_WORKER_TOOLS = TODO_TOOL_NAMES | {DELEGATE_TOOL_NAME}
"""Tools a worker must not hold: the plan belongs to the supervisor."""

WorkerGraph = CompiledStateGraph[Any, Any, Any, Any]


@dataclass(kw_only=True)
class WorkerState:
    """State of the built-in workers. Only ``messages`` is required of a worker's graph; the
    other fields let the personal-task tools audit under the supervisor's turn and report
    changes, which ``delegate`` passes back to the supervisor's state."""

    messages: Annotated[list[AnyMessage], add_messages] = field(default_factory=list)
    """The hand-over message, then the worker's own calls and results."""
    conversationId: str = ""
    """The supervisor's conversation (for audit rows)."""
    turnId: str = ""
    """The supervisor's turn (for audit rows)."""
    modifiedTasks: Annotated[list[dict[str, Any]], extend_or_reset] = field(default_factory=list)
    """Personal tasks the worker changed (seed 003), merged into the supervisor's list."""


def worker_tool_names(graph: WorkerGraph) -> set[str]:
    """Names of the tools held by the ``ToolNode``s of ``graph`` (what its model can call)."""
    names: set[str] = set()
    for node in graph.get_graph().nodes.values():
        if isinstance(node.data, ToolNode):
            names.update(node.data.tools_by_name)
    return names


@dataclass(frozen=True)
class Worker:
    """A specialist the supervisor delegates plan items to.

    ``name`` is the ``agentType`` it serves; ``description`` is one line for the supervisor's
    prompt; ``graph`` takes ``{"messages": [...]}`` and returns ``{"messages": [...]}`` ending
    with its answer. Compile it with ``checkpointer=False``: each delegation is a fresh,
    self-contained run, not a thread. ``recursion_limit`` bounds its steps per delegation.
    """

    name: str
    description: str
    graph: WorkerGraph
    recursion_limit: int = 25

    def __post_init__(self) -> None:
        if not self.name.strip() or self.name != self.name.strip():
            raise ValueError(f"A worker needs a name without surrounding spaces: {self.name!r}.")
        if not self.description.strip() or "\n" in self.description.strip():
            raise ValueError(f"Worker {self.name!r} needs a one-line description.")
        if self.recursion_limit < 2:
            raise ValueError(f"Worker {self.name!r}: recursion_limit must be at least 2.")
        forbidden = worker_tool_names(self.graph) & FORBIDDEN_WORKER_TOOLS
        if forbidden:
            raise ValueError(
                f"Worker {self.name!r} must not hold the supervisor's plan tools: "
                f"{sorted(forbidden)}."
            )

    @property
    def tool_names(self) -> set[str]:
        """The tools this worker's model can call."""
        return worker_tool_names(self.graph)
