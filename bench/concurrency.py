"""``python -m bench.concurrency``: many turns at once on one database, counting tool errors.

Each turn has its own graph and its own ``Database`` object (so its own engine and connection
pool), as separate workers of a server would; they share one database: a SQLite file, or the
PostgreSQL server named by ``--url``. The model is the instant in-process oracle of the N-item
benchmark (``bench.wire.InstantChatModel`` with ``HttpPlanOracle``), so what is measured is the
store under contention, not a model.

Reported: turns that answered, tool calls that returned an error (any code), rows written and
completed, and wall time. The goal is zero tool errors and every row completed.

    python -m bench.concurrency                      # 48 turns of 20 items on a fresh SQLite file
    python -m bench.concurrency --turns 16 --items 3
    python -m bench.concurrency --url postgresql+asyncpg://user@/db?host=/tmp
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from langchain_core.messages import HumanMessage, ToolMessage

from agent.context import Context
from agent.graph import build_graph
from agent.state import InputState
from bench.scenario import ActionLog, action, request_for, titles_for
from bench.systems import RECURSION_LIMIT
from bench.wire import InstantChatModel
from storage import Database
from tests.http_oracle import HttpPlanOracle


@dataclass
class LoadResult:
    """What one concurrent run did."""

    backend: str
    turns: int
    items: int
    answered: int
    tool_errors: int
    rows: int
    rows_completed: int
    seconds: float

    @property
    def ok(self) -> bool:
        return (
            self.answered == self.turns
            and self.tool_errors == 0
            and self.rows_completed == self.turns * self.items
        )


async def one_turn(url: str, index: int, items: int) -> tuple[str, int, int, int]:
    """Run one turn on its own graph; (status, tool errors, rows, rows completed)."""
    database = Database(url)
    titles = [f"t{index:03d} {title}" for title in titles_for(items)]
    log = ActionLog()
    model = InstantChatModel(oracle=HttpPlanOracle(titles, action))
    graph = build_graph(model, tools=[log.tool()], database=database, include_default_tools=False)
    try:
        state = await graph.ainvoke(
            InputState(messages=[HumanMessage(content=request_for(titles))]),
            config={"recursion_limit": RECURSION_LIMIT},
            context=Context(max_iterations=1_000, max_batch_items=max(50, items)),
        )
    finally:
        await database.dispose()
    errors = sum(1 for m in state["messages"] if isinstance(m, ToolMessage) and m.status == "error")
    todos = state.get("todos", [])
    completed = sum(1 for todo in todos if todo["status"] == "completed")
    return str(state["turnStatus"]), errors, len(todos), completed


async def run_load(url: str, turns: int, items: int) -> LoadResult:
    """``turns`` turns of ``items`` items, all started at once on ``url``."""
    setup = Database(url)
    await setup.create_schema()  # measure contention on rows, not the first schema creation
    await setup.dispose()
    started = time.perf_counter()
    outcomes = await asyncio.gather(*(one_turn(url, i, items) for i in range(turns)))
    seconds = time.perf_counter() - started
    return LoadResult(
        backend=url.split(":", 1)[0],
        turns=turns,
        items=items,
        answered=sum(1 for status, *_ in outcomes if status == "answered"),
        tool_errors=sum(errors for _, errors, _, _ in outcomes),
        rows=sum(rows for _, _, rows, _ in outcomes),
        rows_completed=sum(done for *_, done in outcomes),
        seconds=round(seconds, 2),
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.concurrency", description=__doc__)
    parser.add_argument("--turns", type=int, default=48)
    parser.add_argument("--items", type=int, default=20)
    parser.add_argument("--url", help="database URL (default: a fresh SQLite file)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="turnplan-load-") as folder:
        url = args.url or f"sqlite+aiosqlite:///{Path(folder) / 'load.db'}"
        result = asyncio.run(run_load(url, args.turns, args.items))
    report: dict[str, Any] = {**asdict(result), "ok": result.ok}
    print(json.dumps(report, indent=2))
    return 0 if result.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
