"""``python -m bench [--quick]``: every system, N in (1, 5, 10, 20, 50), one table; then the
harness's share of a sequential 20-item turn's wall time against a model taking 300 ms a call
(``bench.share``), for turnplan and the systems beside it.

Run from the repository root (the scripted model server lives in ``tests/``). Writes
``bench/results/latest.md`` and ``latest.json`` (git-ignored) and prints the markdown.
``--share-only`` runs the share alone (about two minutes), ``--no-share`` skips it.
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
from bench.postgres import postgres_server
from bench.report import Report
from bench.share import DEFAULT_N as SHARE_N
from bench.share import MODEL_SECONDS, SHARE_SYSTEMS, measure_share, share_table
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


async def run_share(
    systems: Sequence[System] | None = None,
    *,
    n: int = SHARE_N,
    repeats: int = 3,
    model_seconds: float = MODEL_SECONDS,
    postgres: bool = False,
) -> str:
    """The share table (``bench.share``) of the installed ``systems`` (default
    ``SHARE_SYSTEMS``), with a line naming those that cannot run; ``postgres``: on a
    PostgreSQL server started for the run (``bench.postgres``), not SQLite files."""
    chosen = (
        list(systems)
        if systems is not None
        else [s for s in all_systems() if s.name in SHARE_SYSTEMS]
    )
    missing = {s.name: s.unavailable() for s in chosen if s.unavailable() is not None}
    runnable = [s for s in chosen if s.name not in missing]
    if postgres:
        with postgres_server() as server:
            runs = await measure_share(
                runnable, n, repeats=repeats, model_seconds=model_seconds, postgres=server
            )
    else:
        runs = await measure_share(runnable, n, repeats=repeats, model_seconds=model_seconds)
    table = share_table(runs, model_seconds, postgres=postgres)
    if missing:
        table += "\n\nNot run: " + "; ".join(f"{name} ({why})" for name, why in missing.items())
    return table


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="N in (1, 5) only")
    parser.add_argument("--n", type=int, nargs="+", help="the N to measure (overrides --quick)")
    parser.add_argument("--systems", nargs="+", help="names of the systems to run (default: all)")
    parser.add_argument("--repeats", type=int, default=3, help="instant runs per figure (best)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="folder for latest.md/.json")
    share = parser.add_mutually_exclusive_group()
    share.add_argument("--share-only", action="store_true", help="only the harness's share")
    share.add_argument("--no-share", action="store_true", help="skip the harness's share")
    parser.add_argument(
        "--postgres",
        action="store_true",
        help="the share on PostgreSQL (pgserver) instead of SQLite files",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)

    ns = tuple(args.n) if args.n else QUICK_NS if args.quick else FULL_NS
    systems = all_systems()
    if args.systems:
        unknown = set(args.systems) - {s.name for s in systems}
        if unknown:
            parser.error(f"unknown systems: {', '.join(sorted(unknown))}")
        systems = [s for s in systems if s.name in args.systems]
    share_systems = [s for s in systems if args.systems or s.name in SHARE_SYSTEMS]
    if args.share_only:
        print(asyncio.run(run_share(share_systems, repeats=args.repeats, postgres=args.postgres)))
        return 0
    report = asyncio.run(run_benchmark(ns, systems, repeats=args.repeats))
    if not args.no_share:
        report.share = asyncio.run(
            run_share(share_systems, repeats=args.repeats, postgres=args.postgres)
        )

    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "latest.md").write_text(report.markdown(), encoding="utf-8")
    (args.out / "latest.json").write_text(report.as_json(), encoding="utf-8")
    print(report.markdown())
    print(f"written: {args.out / 'latest.md'}, {args.out / 'latest.json'}", file=sys.stderr)
    return 0 if all(m.ok for m in report.measurements) else 1
