"""``python -m bench.share_profile [--n 20] [--top 25]``: where turnplan's own share of a turn goes,
in figures that do not move with the machine's load.

The wall-time share (``bench.share``) is what a user feels, but on a shared machine it moves by
a point or more from run to run. This runs the same turn (the sequential N-item turn with a
SQLite checkpointer on a file, the second turn of a freshly built agent) with the instant model
and prints, per item: SQL statements and transactions of turnplan's database, checkpoints, the
channel writes and bytes the checkpointer serialised; the bytes of each state channel in the
turn's last checkpoint (what every SQLite checkpoint of the turn re-serialises); the CPU seconds
of the turn (``time.process_time``, a run of its own, without the profiler); and, from one more
run under ``cProfile``, the Python calls per item and turnplan's own functions (``agent/``,
``storage/``, ``prompts/``) by own time and by calls, with the own time by package.

Counts are exact; CPU seconds and profile times are for comparing two trees on one machine.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.tools import BaseTool
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.types import Checkpointer

from bench.measure import _instant_run
from bench.overhead import DEFAULT_N, _CountedTurnplan, _hooks, _Tally
from bench.systems import PreparedTurn, TurnResult

ROOT = Path(__file__).resolve().parents[1]
"""The repository's root (turnplan's own packages are under it)."""
OWN_FOLDERS = ("/agent/", "/storage/", "/prompts/")
"""Where turnplan's own functions live (the repository's packages)."""


@dataclass(frozen=True)
class ShareProfile:
    """One turn's deterministic figures per item, and its CPU seconds."""

    n: int
    statements: float
    transactions: float
    thread_trips: float
    """Trips to aiosqlite's threads (turnplan's database and the SQLite checkpointer's)."""
    checkpoints: float
    channel_writes: float
    serialized_kb: float
    cpu_seconds: float
    """CPU seconds of the whole timed turn (``time.process_time``), the fewest of the runs."""
    channel_bytes: dict[str, int]
    """Serialised bytes of each channel in the turn's last checkpoint, largest first."""
    problem: str = ""


class _CpuTimed(_CountedTurnplan):
    """The counted turnplan whose timed turn also records its CPU seconds, and which reads the
    sizes of the turn's last checkpoint before the agent is closed."""

    def __init__(self, tally: _Tally) -> None:
        super().__init__(tally)
        self.cpu_seconds = 0.0
        self.channel_bytes: dict[str, int] = {}

    def prepare(
        self,
        model: BaseChatModel,
        tool: BaseTool,
        workdir: Path,
        n: int,
        checkpointer: Checkpointer = None,
        database_url: str | None = None,
    ) -> PreparedTurn:
        turn = super().prepare(model, tool, workdir, n, checkpointer, database_url)

        async def run(request: str) -> TurnResult:
            started = time.process_time()
            try:
                return await turn.run(request)
            finally:
                self.cpu_seconds = time.process_time() - started

        async def close() -> None:
            self.channel_bytes = await _last_checkpoint_bytes(checkpointer)
            await turn.close()

        return replace(turn, run=run, close=close)


async def _last_checkpoint_bytes(checkpointer: Any) -> dict[str, int]:
    """Bytes of each channel of the newest checkpoint the checkpointer holds (the timed turn's
    thread is the last one written)."""
    newest: Any = None
    async for saved in checkpointer.alist(None, limit=1):
        newest = saved
    if newest is None:
        return {}
    serde = JsonPlusSerializer()
    values = newest.checkpoint["channel_values"]
    sizes = {name: len(serde.dumps_typed(value)[1]) for name, value in values.items()}
    return dict(sorted(sizes.items(), key=lambda item: -item[1]))


async def _counted_run(n: int) -> tuple[_Tally, _CpuTimed, str]:
    tally = _Tally()
    system = _CpuTimed(tally)
    with _hooks(tally):
        _, problem = await _instant_run(system, n, checkpointed=True)
    return tally, system, problem


async def profile(n: int = DEFAULT_N, repeats: int = 3) -> ShareProfile:
    """The counts of one turn, and the fewest CPU seconds of ``repeats`` turns."""
    cpu: list[float] = []
    tally, system, problem = await _counted_run(n)
    cpu.append(system.cpu_seconds)
    for _ in range(max(0, repeats - 1)):
        _, again, _ = await _counted_run(n)
        cpu.append(again.cpu_seconds)
    counts = tally.counts
    return ShareProfile(
        n=n,
        statements=counts["statements"] / n,
        transactions=counts["transactions"] / n,
        thread_trips=counts["thread trips"] / n,
        checkpoints=counts["checkpoints"] / n,
        channel_writes=counts["channel writes"] / n,
        serialized_kb=counts["serialized bytes"] / 1000 / n,
        cpu_seconds=min(cpu),
        channel_bytes=system.channel_bytes,
        problem=problem,
    )


async def python_profile(n: int = DEFAULT_N) -> pstats.Stats:
    """The timed turn of one more run under ``cProfile``."""
    profiler = cProfile.Profile()
    tally = _Tally(profiler)
    with _hooks(tally):
        await _instant_run(_CountedTurnplan(tally), n, checkpointed=True)
    return pstats.Stats(profiler)


def _package(filename: str) -> str:
    """The package a profiled function belongs to: turnplan's folder, or the installed
    distribution's top-level name, or ``~`` for built-ins."""
    for folder in OWN_FOLDERS:
        if folder in filename and "site-packages" not in filename:
            return folder.strip("/")
    if "site-packages/" in filename:
        return filename.split("site-packages/", 1)[1].split("/", 1)[0]
    if filename.startswith("~") or filename.startswith("<"):
        return "builtins"
    return "stdlib" if "/lib/python" in filename else "other"


def profile_report(stats: pstats.Stats, n: int, top: int) -> str:
    """Python calls per item, own time by package, and turnplan's top functions by own time and
    by calls (cumulative times are left out: coroutines and SQLAlchemy's greenlets make them
    count time spent waiting elsewhere)."""
    raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    calls = sum(entry[1] for entry in raw.values())
    by_package: Counter[str] = Counter()
    own: list[tuple[float, int, str]] = []
    for (filename, line, name), (_, ncalls, tottime, _, _) in raw.items():
        package = _package(filename)
        by_package[package] += tottime
        if package in ("agent", "storage", "prompts"):
            where = Path(filename).relative_to(ROOT) if filename.startswith(str(ROOT)) else filename
            own.append((tottime, ncalls, f"{where}:{line}({name})"))
    total = sum(by_package.values()) or 1.0
    lines = [f"Python calls: {calls / n:,.0f} per item (cProfile)", "", "own time by package:"]
    lines += [
        f"  {package:<28} {1000 * seconds / n:7.2f} ms/item  {100 * seconds / total:5.1f} %"
        for package, seconds in by_package.most_common(12)
    ]
    for title, ranked in (
        ("own time", sorted(own, key=lambda entry: -entry[0])),
        ("calls", sorted(own, key=lambda entry: -entry[1])),
    ):
        lines += ["", f"turnplan's functions by {title} (ms/item, calls/item):"]
        lines += [
            f"  {1000 * seconds / n:6.2f} ms {ncalls / n:7.1f}  {where}"
            for seconds, ncalls, where in ranked[:top]
        ]
    return "\n".join(lines)


def report(result: ShareProfile) -> str:
    lines = [
        f"turnplan, sequential N = {result.n}, SQLite checkpointer"
        + (f" (NOT OK: {result.problem})" if result.problem else ""),
        f"  per item: {result.statements:.2f} SQL statements, {result.transactions:.2f} "
        f"transactions, {result.thread_trips:.2f} trips to aiosqlite's threads; "
        f"{result.checkpoints:.2f} checkpoints, {result.channel_writes:.2f} "
        f"channel writes, {result.serialized_kb:.1f} kB serialised",
        f"  CPU of the turn: {result.cpu_seconds:.3f} s (process_time, fewest of the runs)",
        "  the last checkpoint's channels (bytes): "
        + ", ".join(f"{name} {size:,}" for name, size in result.channel_bytes.items() if size),
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=DEFAULT_N, help="plan items (default 20)")
    parser.add_argument("--repeats", type=int, default=3, help="runs for the CPU seconds")
    parser.add_argument("--top", type=int, default=25, help="turnplan functions listed")
    args = parser.parse_args(argv)
    print(report(asyncio.run(profile(args.n, args.repeats))))
    if args.top > 0:
        print()
        print(profile_report(asyncio.run(python_profile(args.n)), args.n, args.top))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
