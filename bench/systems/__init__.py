"""One adapter per system under test, behind the small ``System`` protocol.

An adapter knows three things: whether its framework is installed (``unavailable``), the
oracle that drives it along its cheapest legal path (``oracle``), and how to build and run one
turn with a given chat model and domain tool (``prepare``). Building is kept out of the timed
part: the overhead figure is the turn itself.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.types import Checkpointer

from bench.wire import Oracle

RECURSION_LIMIT = 10_000
"""LangGraph super-step limit for every system: far above what any N here needs, so no run is
cut short by the default of 25 (a framework setting, not a property of the system)."""


def turn_config() -> RunnableConfig:
    """The config of one benchmark turn: a thread of its own, which a checkpointer needs (and
    which is what a deployed agent runs every turn in)."""
    return {"recursion_limit": RECURSION_LIMIT, "configurable": {"thread_id": uuid.uuid4().hex}}


@dataclass
class TurnResult:
    """What the benchmark checks after a turn."""

    answer: str
    rows_total: int | None = None
    """Plan rows stored for the turn (turnplan systems only)."""
    rows_completed: int | None = None
    count_rows: Callable[[], Awaitable[tuple[int, int]]] | None = None
    """How to read (total, completed) rows after the turn, outside its timed part (turnplan
    systems); ``settled`` fills the two fields above from it."""

    async def settled(self) -> TurnResult:
        """This result with its rows counted (a check of the benchmark, not part of the turn)."""
        if self.count_rows is None:
            return self
        total, completed = await self.count_rows()
        return replace(self, rows_total=total, rows_completed=completed, count_rows=None)


@dataclass
class PreparedTurn:
    """A built agent, ready to run one turn; ``close`` releases what ``prepare`` opened."""

    run: Callable[[str], Awaitable[TurnResult]]
    warm: Callable[[], Awaitable[None]] = field(default=lambda: _nothing())
    """One-time setup a deployed agent would already have done (e.g. creating the schema);
    awaited before the timed turn."""
    close: Callable[[], Awaitable[None]] = field(default=lambda: _nothing())


async def _nothing() -> None:
    return None


class System(Protocol):
    """A system under test."""

    name: str
    path: str
    """The oracle's path in one line, with the calls it needs (shown in the report)."""

    def unavailable(self) -> str | None:
        """Why the system cannot run here (a missing package), or None."""
        ...

    def oracle(self, titles: list[str]) -> Oracle:
        """A fresh oracle for one turn over ``titles``."""
        ...

    def prepare(
        self,
        model: BaseChatModel,
        tool: BaseTool,
        workdir: Path,
        n: int,
        checkpointer: Checkpointer = None,
        database_url: str | None = None,
    ) -> PreparedTurn:
        """Build the agent around ``model`` and ``tool``; ``workdir`` is a fresh folder;
        ``checkpointer``, if any, is compiled into the agent (the durable runs);
        ``database_url``: where a system with a database of its own keeps it (None: a SQLite
        file in ``workdir``)."""
        ...
