"""Which tools a run binds: the plan tools always, the toolsets its context picks, the caller's
own tools, and the tools of configured MCP servers.

A graph is compiled once, but ``Context.toolsets`` changes per run, so the tools node knows every
tool the graph has while each LLM call binds (and each prompt describes) only the run's
selection. A call to a tool outside the selection is refused like an unknown one.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from langchain_core.tools import BaseTool

from agent.context import Context

logger = logging.getLogger("agent.tools")

MCP_PROMPT = "mcp_tools"
"""The prompt section sent when a run binds any MCP tool."""


class ToolSource(Protocol):
    """Tools found at run time rather than at build time: the tools of MCP servers
    (``agent.tools.mcp.McpTools``). A protocol, so the catalog stays below the toolsets."""

    async def tools(self) -> list[BaseTool]: ...


@dataclass(frozen=True)
class Toolset:
    """A named group of domain tools and the prompt section that explains them."""

    name: str
    tools: tuple[BaseTool, ...]
    prompt_section: str | None = None
    records_itself: bool = True
    """Its tools record each call's result with their effect (exactly-once replay)."""


@dataclass(frozen=True)
class RunTools:
    """The tools one run binds, and the prompt sections that go with them."""

    tools: tuple[BaseTool, ...]
    prompt_sections: tuple[str, ...]
    names: frozenset[str] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "names", frozenset(tool.name for tool in self.tools))

    @property
    def key(self) -> tuple[str, ...]:
        """Identifies the selection (bound models are cached by it)."""
        return tuple(tool.name for tool in self.tools)

    def without(self, name: str) -> RunTools:
        """The selection less the tool ``name`` (itself when it has none by that name)."""
        if name not in self.names:
            return self
        return RunTools(tuple(t for t in self.tools if t.name != name), self.prompt_sections)


@dataclass
class ToolCatalog:
    """Every tool a graph can run, and the selection of each run.

    ``core``: always bound (plan tools, ``delegate``). ``toolsets``: the built-in toolsets a
    run may pick by name (empty when the graph was built without them; ``Context.toolsets``
    is then ignored). ``extra``: the caller's own tools, always bound. ``mcp``: tools of MCP
    servers, listed on first use.
    """

    core: Sequence[BaseTool]
    toolsets: Mapping[str, Toolset] = field(default_factory=dict)
    extra: Sequence[BaseTool] = ()
    mcp: ToolSource | None = None
    _warned: set[str] = field(default_factory=set, init=False)

    def records_itself(self, name: str) -> bool:
        """Whether the tool of that name records its own results (core and built-in toolset
        tools do); the tools node records the others' results after the call."""
        if any(tool.name == name for tool in self.core):
            return True
        return any(
            toolset.records_itself and any(tool.name == name for tool in toolset.tools)
            for toolset in self.toolsets.values()
        )

    @property
    def static_tools(self) -> list[BaseTool]:
        """Tools known when the graph is compiled (the tools node's list)."""
        tools = [*self.core]
        for toolset in self.toolsets.values():
            tools.extend(toolset.tools)
        tools.extend(self.extra)
        return tools

    async def for_run(self, context: Context) -> RunTools:
        """The run's tools: core, its toolsets in catalog order, extra, then MCP tools whose
        names do not clash with any of those."""
        tools = [*self.core]
        sections: list[str] = []
        for name, toolset in self.toolsets.items():
            if name in context.toolsets:
                tools.extend(toolset.tools)
                if toolset.prompt_section:
                    sections.append(toolset.prompt_section)
        tools.extend(self.extra)
        if self.mcp is not None:
            taken = {tool.name for tool in self.static_tools}
            for tool in await self.mcp.tools():
                if tool.name in taken:
                    self._warn_clash(tool.name)
                    continue
                taken.add(tool.name)
                tools.append(tool)
            if len(taken) > len(self.static_tools):
                sections.append(MCP_PROMPT)
        return RunTools(tuple(tools), tuple(sections))

    async def mcp_tool(self, name: str) -> BaseTool | None:
        """An MCP tool by name (MCP tools are not in the compiled tools node)."""
        if self.mcp is None:
            return None
        static = {tool.name for tool in self.static_tools}
        if name in static:
            return None
        return next((tool for tool in await self.mcp.tools() if tool.name == name), None)

    def _warn_clash(self, name: str) -> None:
        if name not in self._warned:
            self._warned.add(name)
            logger.warning(
                "MCP tool %r is not bound: a built-in or caller tool has the same name", name
            )
