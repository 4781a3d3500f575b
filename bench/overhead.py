"""``python -m bench.overhead [--n 20] [--repeats 5]``: where turnplan's framework overhead per
plan item goes (issue 12, overhead).

The turn is the benchmark's sequential N-item turn (``bench.systems.turnplan``: N + 2 calls to
``bench.wire.InstantChatModel``, so no time is spent in a model). Besides the wall time per item
(best of ``repeats``), it counts what the database work costs, per item:

- **transactions**: SQLite transactions begun (each takes the write lock, or a read snapshot);
- **statements**: SQL statements sent, ``BEGIN`` included;
- **thread trips**: handoffs to aiosqlite's thread (SQLAlchemy's aiosqlite adapter makes three
  per write statement: open a cursor, execute, close it; four per query: and fetch the rows;
  plus one per commit or rollback), each a thread switch and an event-loop wake-up, counted on
  the public aiosqlite calls that make them (``THREAD_CALLS``);
- the wall time spent in the three places that run them: the step claims of ``execute`` and
  ``drain`` (``agent.turn.lineage.claim_next_step``), closing a row (``TurnPlan.close``), and
  recording the results of the other tool calls (``RecordBatch.record``).

With ``--checkpointed`` it also counts what the SQLite checkpointer is given, per item: the
checkpoints it saves (one per superstep), the channel writes it stores (one per key of each
node's update, plus LangGraph's own routing writes), and the bytes serialised for both.

With ``--calls`` it also counts the Python function calls of the timed turn per item
(``cProfile``, in one more run, so the timings are not slowed by it): machine-independent and
steady to about 1 % where the times on a shared machine move by a fifth, the figure to compare
two commits by (``bench/RESULTS.md``, "where the gap is").

With ``--floor`` it also replays the timed turn's transactions below turnplan, through
SQLAlchemy Core and through raw aiosqlite (``bench.db_floor``), to say how much of the database
time each layer costs.

What is left of the wall time is the graph (three steps per item), the prompt, the model and
tool plumbing of LangChain, and turnplan's own Python. Counts are exact and machine-independent;
times are for comparing runs on one machine.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from unittest.mock import patch

import aiosqlite
from langchain_core.language_models import BaseChatModel
from langchain_core.tools import BaseTool
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.types import Checkpointer
from sqlalchemy import event
from sqlalchemy.engine import Engine

from agent.turn.call_ledger import RecordBatch
from agent.turn.lineage import claim_next_step
from agent.turn.plan_rows import TurnPlan
from bench.db_floor import DatabaseFloor, TransactionRecorder, measure_floor, report_floor
from bench.measure import _instant_run
from bench.systems import PreparedTurn, TurnResult
from bench.systems.turnplan import TurnplanSystem

DEFAULT_N = 20
TIMED = ("step claims", "closing rows", "recording results")
THREAD_CALLS = (
    (aiosqlite.Connection, ("cursor", "commit", "rollback", "execute", "executemany")),
    (aiosqlite.Cursor, ("execute", "executemany", "fetchone", "fetchmany", "fetchall", "close")),
)
"""The public aiosqlite calls that each run once on the connection's thread (SQLAlchemy's
adapter uses these; none of them calls another of them)."""


@dataclass(frozen=True)
class OverheadProfile:
    """One turn's overhead per item, and the database work behind it."""

    n: int
    overhead_ms: float
    transactions: float
    statements: float
    thread_trips: float
    timed_ms: dict[str, float]
    """Wall time per item in each of ``TIMED``."""
    problem: str = ""
    checkpointed: bool = False
    """Run with a SQLite checkpointer (its own writes are not among the counts: they do not go
    through turnplan's database)."""
    checkpoints: float = 0.0
    """Checkpoints saved per item (checkpointed runs only): the graph's supersteps."""
    channel_writes: float = 0.0
    """Channel writes stored per item (checkpointed runs only), routing writes included."""
    serialized_kb: float = 0.0
    """Kilobytes the checkpointer serialised per item (checkpoints and writes)."""
    python_calls: float = 0.0
    """Python function calls per item in the timed turn (``calls`` runs only; 0 otherwise)."""
    floor: DatabaseFloor | None = None
    """The timed turn's transactions replayed below turnplan (``floor`` runs only)."""

    @property
    def rest_ms(self) -> float:
        """Overhead per item outside the timed database work."""
        return self.overhead_ms - sum(self.timed_ms.values())


class _Tally:
    """Counts and timings of one turn, gathered by the hooks of ``_hooks`` while ``counting``:
    the timed turn itself, not the schema created before it nor the untimed warm-up turn
    (``bench.measure._instant_run``; each turn starts the tally afresh)."""

    def __init__(
        self,
        profiler: cProfile.Profile | None = None,
        recorder: TransactionRecorder | None = None,
    ) -> None:
        self.counts: Counter[str] = Counter()
        self.seconds: dict[str, float] = dict.fromkeys(TIMED, 0.0)
        self.counting = False
        self.profiler = profiler
        """Enabled for the timed turn only, when the run counts Python calls."""
        self.recorder = recorder
        """Records the timed turn's transactions, when the run measures the database floor."""

    def count(self, label: str) -> None:
        if self.counting:
            self.counts[label] += 1

    def only_the_turn(self, turn: PreparedTurn) -> PreparedTurn:
        async def run(request: str) -> TurnResult:
            self.counts.clear()
            self.seconds = dict.fromkeys(TIMED, 0.0)
            self.counting = True
            if self.profiler is not None:
                self.profiler.clear()  # the warm-up turn's calls are not the turn's
                self.profiler.enable()
            if self.recorder is not None:
                self.recorder.clear()
                self.recorder.recording = True
            try:
                return await turn.run(request)
            finally:
                if self.profiler is not None:
                    self.profiler.disable()
                if self.recorder is not None:
                    self.recorder.recording = False
                self.counting = False

        return replace(turn, run=run)

    def timed(self, label: str, function: Callable[..., Awaitable[Any]]) -> Callable[..., Any]:
        async def run(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return await function(*args, **kwargs)
            finally:
                self.seconds[label] += time.perf_counter() - started

        return run


@contextmanager
def _hooks(tally: _Tally) -> Iterator[None]:
    """Count statements and thread trips, and time the database-bound calls, while inside."""

    def on_statement(*_: Any) -> None:
        tally.count("statements")

    def on_begin(*_: Any) -> None:
        tally.count("transactions")

    def counted_trip(call: Callable[..., Any]) -> Callable[..., Any]:
        # Not async: ``Connection.cursor`` returns an object that is both awaited and entered.
        def counted(*args: Any, **kwargs: Any) -> Any:
            tally.count("thread trips")
            return call(*args, **kwargs)

        return counted

    put, put_writes, dumps_typed = (
        AsyncSqliteSaver.aput,
        AsyncSqliteSaver.aput_writes,
        JsonPlusSerializer.dumps_typed,
    )

    async def counted_put(self: AsyncSqliteSaver, config: Any, checkpoint: Any, *rest: Any) -> Any:
        tally.count("checkpoints")
        return await put(self, config, checkpoint, *rest)

    async def counted_writes(
        self: AsyncSqliteSaver, config: Any, writes: Sequence[Any], *rest: Any
    ) -> Any:
        if tally.counting:
            tally.counts["channel writes"] += len(writes)
        return await put_writes(self, config, writes, *rest)

    def counted_dumps(self: JsonPlusSerializer, value: Any) -> tuple[str, bytes]:
        typed = dumps_typed(self, value)
        if tally.counting:
            tally.counts["serialized bytes"] += len(typed[1])
        return typed

    timed_claim = tally.timed("step claims", claim_next_step)
    event.listen(Engine, "before_cursor_execute", on_statement)
    event.listen(Engine, "begin", on_begin)
    try:
        with ExitStack() as patches:
            for owner, names in THREAD_CALLS:
                for name in names:
                    original = getattr(owner, name)
                    patches.enter_context(patch.object(owner, name, counted_trip(original)))
            patches.enter_context(patch.object(AsyncSqliteSaver, "aput", counted_put))
            patches.enter_context(patch.object(AsyncSqliteSaver, "aput_writes", counted_writes))
            patches.enter_context(patch.object(JsonPlusSerializer, "dumps_typed", counted_dumps))
            for node in ("execute", "drain"):
                patches.enter_context(patch(f"agent.nodes.{node}.claim_next_step", timed_claim))
            closing = tally.timed("closing rows", TurnPlan.close)
            recording = tally.timed("recording results", RecordBatch.record)
            patches.enter_context(patch.object(TurnPlan, "close", closing))
            patches.enter_context(patch.object(RecordBatch, "record", recording))
            yield
    finally:
        event.remove(Engine, "before_cursor_execute", on_statement)
        event.remove(Engine, "begin", on_begin)


class _CountedTurnplan(TurnplanSystem):
    """turnplan whose turn (and only its turn) is counted by ``tally``."""

    def __init__(self, tally: _Tally) -> None:
        self._tally = tally

    def prepare(
        self,
        model: BaseChatModel,
        tool: BaseTool,
        workdir: Path,
        n: int,
        checkpointer: Checkpointer = None,
        database_url: str | None = None,
    ) -> PreparedTurn:
        return self._tally.only_the_turn(
            super().prepare(model, tool, workdir, n, checkpointer, database_url)
        )


async def profile(
    n: int = DEFAULT_N,
    *,
    repeats: int = 5,
    checkpointed: bool = False,
    calls: bool = False,
    floor: bool = False,
) -> OverheadProfile:
    """The best of ``repeats`` instant runs of the sequential N-item turn, with its counts;
    ``checkpointed``: with a SQLite checkpointer (``bench.measure._instant_run``); ``calls``:
    also the Python calls per item, counted in one more run; ``floor``: also the database
    floor (``bench.db_floor``), the transactions of one more run replayed."""
    best: OverheadProfile | None = None
    for _ in range(max(1, repeats)):
        tally = _Tally()
        with _hooks(tally):
            overhead, problem = await _instant_run(
                _CountedTurnplan(tally), n, checkpointed=checkpointed
            )
        run = OverheadProfile(
            n=n,
            overhead_ms=1000 * overhead / n,
            transactions=tally.counts["transactions"] / n,
            statements=tally.counts["statements"] / n,
            thread_trips=tally.counts["thread trips"] / n,
            timed_ms={label: 1000 * tally.seconds[label] / n for label in TIMED},
            problem=problem,
            checkpointed=checkpointed,
            checkpoints=tally.counts["checkpoints"] / n,
            channel_writes=tally.counts["channel writes"] / n,
            serialized_kb=tally.counts["serialized bytes"] / 1000 / n,
        )
        if best is None or run.overhead_ms < best.overhead_ms:
            best = run
    assert best is not None
    if calls:
        best = replace(best, python_calls=await _python_calls(n, checkpointed))
    if floor:
        best = replace(best, floor=await _database_floor(n, checkpointed, repeats))
    return best


async def _database_floor(n: int, checkpointed: bool, repeats: int) -> DatabaseFloor:
    """The timed turn's transactions, recorded in one more run and replayed
    (``bench.db_floor``)."""
    recorder = TransactionRecorder()
    with recorder.installed():
        _, problem = await _instant_run(
            _CountedTurnplan(_Tally(recorder=recorder)), n, checkpointed=checkpointed
        )
    if problem:
        raise RuntimeError(f"the recorded turn went wrong: {problem}")
    return await measure_floor(n, recorder.transactions, repeats=repeats)


async def _python_calls(n: int, checkpointed: bool) -> float:
    """Python function calls per item of one timed turn (the event loop's thread)."""
    profiler = cProfile.Profile()
    tally = _Tally(profiler)
    with _hooks(tally):
        await _instant_run(_CountedTurnplan(tally), n, checkpointed=checkpointed)
    return sum(entry.callcount for entry in profiler.getstats()) / n


def report(result: OverheadProfile) -> str:
    lines = [
        f"turnplan, sequential N = {result.n}"
        + (", checkpointed" if result.checkpointed else "")
        + f": {result.overhead_ms:.2f} ms overhead per item"
        + (f" (NOT OK: {result.problem})" if result.problem else ""),
        f"  per item: {result.transactions:.2f} transactions, {result.statements:.2f} statements,"
        f" {result.thread_trips:.2f} trips to aiosqlite's thread",
    ]
    if result.checkpointed:
        lines.append(
            f"  checkpointer: {result.checkpoints:.2f} checkpoints, {result.channel_writes:.2f}"
            f" channel writes, {result.serialized_kb:.1f} kB serialised"
        )
    if result.python_calls:
        lines.append(f"  Python calls:      {result.python_calls:,.0f} per item (cProfile)")
    lines += [f"  {label:<18} {ms:6.2f} ms/item" for label, ms in result.timed_ms.items()]
    lines.append(f"  {'everything else':<18} {result.rest_ms:6.2f} ms/item")
    if result.floor is not None:
        lines.append(report_floor(result.floor))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=DEFAULT_N, help="plan items (default 20)")
    parser.add_argument("--repeats", type=int, default=5, help="runs; the fastest is shown")
    parser.add_argument(
        "--checkpointed",
        action="store_true",
        help="with a SQLite checkpointer, as langgraph dev runs the graph",
    )
    parser.add_argument(
        "--calls",
        action="store_true",
        help="also count the Python calls per item (one more run, under cProfile)",
    )
    parser.add_argument(
        "--floor",
        action="store_true",
        help="also replay the turn's transactions through SQLAlchemy Core and raw aiosqlite",
    )
    args = parser.parse_args()
    result = asyncio.run(
        profile(
            args.n,
            repeats=args.repeats,
            checkpointed=args.checkpointed,
            calls=args.calls,
            floor=args.floor,
        )
    )
    print(report(result))


if __name__ == "__main__":
    main()
