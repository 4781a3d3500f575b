"""``python -m bench [--quick]``: every system, N in (1, 5, 10, 20, 50), one table.

Run from the repository root (the scripted model server lives in ``tests/``). Writes
``bench/results/latest.md`` and ``latest.json`` (git-ignored) and prints the markdown.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

from bench.measure import measure
from bench.report import Report
from bench.systems import System
from bench.systems.deep_agents import DeepAgentsSystem
from bench.systems.dependency_graph import ReactDepsSystem, TodoListDepsSystem, TurnplanDepsSystem
from bench.systems.naive_loop import NaiveLoopSystem
from bench.systems.react import ReactSystem
from bench.systems.todolist import TodoListSystem
from bench.systems.turnplan import TurnplanSystem
from bench.systems.turnplan_stages import TurnplanStagesSystem
from tests.scripted_openai import ScriptedOpenAIServer

FULL_NS = (1, 5, 10, 20, 50)
QUICK_NS = (1, 5)
RESULTS = Path(__file__).parent / "results"
PACKAGES = ("langgraph", "langchain-core", "langchain-openai", "langchain", "deepagents")


def all_systems() -> list[System]:
    """Every system, turnplan first (the reference of the ratios)."""
    return [
        TurnplanSystem(),
        TurnplanStagesSystem(),
        NaiveLoopSystem(),
        ReactSystem(),
        TodoListSystem(),
        TodoListSystem(sequential=True),
        DeepAgentsSystem(),
        DeepAgentsSystem(sequential=True),
        TurnplanDepsSystem(),
        TodoListDepsSystem(),
        ReactDepsSystem(),
    ]


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def machine_facts() -> dict[str, str]:
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{platform.platform()}, {os.cpu_count()} CPUs, {platform.machine()}",
        "python": platform.python_version(),
        "packages": ", ".join(f"{p} {_version(p)}" for p in PACKAGES),
    }


async def run_benchmark(
    ns: Sequence[int], systems: Sequence[System] | None = None, *, repeats: int = 3
) -> Report:
    """Measure every available system at every N; systems that cannot run are listed."""
    chosen = list(systems) if systems is not None else all_systems()
    report = Report(meta=machine_facts(), paths={s.name: s.path for s in chosen})
    with ScriptedOpenAIServer() as server:
        for system in chosen:
            reason = system.unavailable()
            if reason is not None:
                report.unavailable[system.name] = reason
                continue
            for n in ns:
                report.measurements.append(await measure(system, n, server, repeats=repeats))
    return report


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="N in (1, 5) only")
    parser.add_argument("--n", type=int, nargs="+", help="the N to measure (overrides --quick)")
    parser.add_argument("--systems", nargs="+", help="names of the systems to run (default: all)")
    parser.add_argument("--repeats", type=int, default=3, help="instant runs per figure (best)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="folder for latest.md/.json")
    args = parser.parse_args(argv)

    ns = tuple(args.n) if args.n else QUICK_NS if args.quick else FULL_NS
    systems = all_systems()
    if args.systems:
        unknown = set(args.systems) - {s.name for s in systems}
        if unknown:
            parser.error(f"unknown systems: {', '.join(sorted(unknown))}")
        systems = [s for s in systems if s.name in args.systems]
    report = asyncio.run(run_benchmark(ns, systems, repeats=args.repeats))

    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "latest.md").write_text(report.markdown(), encoding="utf-8")
    (args.out / "latest.json").write_text(report.as_json(), encoding="utf-8")
    print(report.markdown())
    print(f"written: {args.out / 'latest.md'}, {args.out / 'latest.json'}", file=sys.stderr)
    return 0 if all(m.ok for m in report.measurements) else 1
