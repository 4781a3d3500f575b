"""``python -m bench.multiworker``: turnplan on a LangGraph Server with several worker processes.

    python -m bench.multiworker setup      # the workers' environment, .turnplan/mw-venv
    python -m bench.multiworker run        # turns per minute with 1 and 2 workers at 40 and 120
                                           # concurrent turns, then a kill -9 of one of two
                                           # workers in the middle of 40 turns
    python -m bench.multiworker run --durability sync      # the same, runs asking for "sync"
    python -m bench.multiworker rounds --rounds 14         # the multi-worker test's rounds,
                                                           # counted, without asserting
    python -m bench.multiworker compare --repeat 3         # "async" against "sync", alternated

Needs ``redis-server`` on the PATH (``apt-get install -y redis-server``); PostgreSQL comes from
``pgserver``. The cluster, the client and the stub model are ``tests/multiworker.py``: each turn
plans three rows and adds one personal task per row (five model calls), the model answers at
once, every turn is submitted on its own thread through ``langgraph-sdk`` with the server's
default durability (``"async"``), and every worker runs up to ``--jobs`` runs at once (10, the
runtime's default). Throughput is turns ended over the wall time from the first submission to
the last turn's end; a figure counts only if every turn answered and turnplan's tables show no
fork, no task twice, none missing and no open row.

The report goes to stdout and ``bench/results/multiworker.md`` (git-ignored).
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import statistics
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

import psycopg
from langgraph_sdk.schema import Durability

from tests.http_oracle import LockstepOracle
from tests.multiworker import (
    MW_VENV,
    Cluster,
    Damage,
    KillSwitch,
    RoundResult,
    TurnOutcome,
    cluster,
    damage,
    kill_round,
    runs_taken_over,
    setup_venv,
    submit_turns,
)

ROWS = 3
CALLS_PER_TURN = ROWS + 2
"""Plan and act, then complete-and-act per row, then the answer."""
RESULTS = Path(__file__).parent / "results" / "multiworker.md"


@dataclass
class Measurement:
    """One load: how many turns, on how many workers, how fast, and what they left."""

    label: str
    workers: int
    turns: int
    seconds: float
    answered: int
    damage: Damage
    killed_after: int | None = None
    """Model answers sent when a worker was killed (None: no kill)."""
    taken_over: int = 0
    """Runs claimed more than once: the killed worker's runs in flight, run again."""

    @property
    def per_minute(self) -> float:
        """Turns ended per minute."""
        return self.turns / self.seconds * 60

    def row(self) -> str:
        """The measurement as a markdown table row."""
        d = self.damage
        kill = (
            "—"
            if self.killed_after is None
            else f"after answer {self.killed_after}; {self.taken_over} runs taken over"
        )
        return (
            f"| {self.label} | {self.workers} | {self.turns} | {kill} | {self.seconds:.1f} | "
            f"{self.per_minute:.0f} | {self.answered}/{self.turns} | {d.forks} | "
            f"{d.duplicates} | {d.missing} | {d.open_rows} |"
        )


HEADER = (
    "| load | workers | turns | kill -9 | seconds | turns/min | answered | forks | "
    "tasks twice | tasks missing | open rows |\n"
    "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|"
)


def answered(outcomes: Sequence[TurnOutcome]) -> int:
    """Turns whose run succeeded with the turn answered and no tool error."""
    return sum(
        1
        for o in outcomes
        if not o.error
        and o.run_status == "success"
        and o.turn_status == "answered"
        and o.tool_errors in (0, None)
    )


def measure(
    group: Cluster,
    label: str,
    turns: int,
    *,
    kill_after: int | None = None,
    durability: Durability | None = None,
) -> Measurement:
    """Submit ``turns`` turns at once and wait for all; with ``kill_after``, SIGKILL the first
    worker once the model has sent that many answers."""
    switch = (
        KillSwitch(group.workers[0], after_answers=kill_after) if kill_after is not None else None
    )
    oracle = LockstepOracle(expected=1, rows=ROWS, on_answer=switch)  # no holding back
    group.model.respond_with(oracle)
    # A turn's key must stay one word for the stub model (``tests.http_oracle.TURN_KEY``).
    prefix = re.sub(r"[^A-Za-z0-9]+", "-", f"{label} {len(group.workers)}w{turns}")
    keys = [f"{prefix}-t{i}" for i in range(turns)]
    started = time.monotonic()
    outcomes = submit_turns(group.live_urls(), keys, ROWS, timeout=900, durability=durability)
    seconds = time.monotonic() - started
    result = Measurement(
        label=label,
        workers=len(group.workers),
        turns=turns,
        seconds=seconds,
        answered=answered(outcomes),
        damage=damage(group.turnplan_dsn, outcomes, oracle),
        killed_after=kill_after,
        taken_over=runs_taken_over(group.database_uri, outcomes),
    )
    print(result.row(), flush=True)
    return result


def run(
    loads: Sequence[int],
    workers: Sequence[int],
    jobs: int,
    kill_turns: int,
    durability: Durability | None = None,
) -> str:
    """Every load on every worker count, then the kill -9; the report as markdown."""
    results: list[Measurement] = []
    print(HEADER, flush=True)
    with tempfile.TemporaryDirectory(prefix="mw-bench-") as folder:
        for count in workers:
            with cluster(Path(folder) / f"w{count}", workers=count, jobs=jobs) as group:
                for turns in loads:
                    results.append(measure(group, "steady", turns, durability=durability))
                if count >= 2 and kill_turns:
                    middle = kill_turns * CALLS_PER_TURN // 2
                    results.append(
                        measure(
                            group, "kill -9", kill_turns, kill_after=middle, durability=durability
                        )
                    )
    lines = [
        f"Date {time.strftime('%Y-%m-%d')}; {platform.machine()}, "
        f"{os.cpu_count()} CPUs; "
        f"langgraph-runtime-pg 0.11.1.post1 (langgraph-api 0.11.1) in {MW_VENV.name}; "
        f"langgraph-sdk {version('langgraph-sdk')} client; {jobs} jobs per worker; "
        f"{ROWS} rows per turn ({CALLS_PER_TURN} model calls), instant stub model; "
        f"durability {durability or 'async (the server default)'}.",
        "",
        HEADER,
        *(r.row() for r in results),
    ]
    return "\n".join(lines)


def compare(workers: int, turns: int, jobs: int, repeat: int) -> str:
    """Turns per minute with the server's default durability and with ``"sync"``, alternated on
    the same workers so both see the same machine; the medians as markdown."""
    modes: tuple[Durability, ...] = ("async", "sync")
    per_minute: dict[str, list[float]] = {mode: [] for mode in modes}
    print(HEADER, flush=True)
    with (
        tempfile.TemporaryDirectory(prefix="mw-compare-") as folder,
        cluster(Path(folder), workers=workers, jobs=jobs) as group,
    ):
        for rep in range(1, repeat + 1):
            for mode in modes:
                result = measure(group, f"{mode} #{rep}", turns, durability=mode)
                if result.answered == turns and result.damage.clean:
                    per_minute[mode].append(result.per_minute)
    lines = [
        f"{workers} workers, {turns} concurrent turns, {jobs} jobs per worker, "
        f"{repeat} alternations; median turns per minute (runs that were not clean excluded):"
    ]
    lines += [
        f"- {mode}: {statistics.median(v):.0f} ({', '.join(f'{x:.0f}' for x in v)})"
        for mode, v in per_minute.items()
        if v
    ]
    return "\n".join(lines)


def lost_tasks_report(group: Cluster, result: RoundResult) -> str:
    """For each turn with a task never added: its rows, its turns and its recorded tool results,
    to see where the side effect went."""
    keys = {t.rsplit(" row ", 1)[0] for t in result.damage.missing_titles}
    threads = [o.thread_id for o in result.outcomes if o.key in keys]
    lines = [f"  tasks never added: {', '.join(result.damage.missing_titles)}"]
    with psycopg.connect(group.turnplan_dsn) as connection:
        for table, columns in (
            ("turns", '"turnId", step, "taskId", "forkedFrom"'),
            ("turn_todos", '"turnId", title, status, outcome'),
            ("tool_results", '"turnId", "toolName", "toolCallId", content'),
        ):
            for row in connection.execute(
                f'SELECT "conversationId", {columns} FROM {table} '
                'WHERE "conversationId" = ANY(%s) ORDER BY "createdAt"',
                (threads,),
            ).fetchall():
                lines.append(f"  {table}: " + " | ".join(str(v)[:120] for v in row))
    return "\n".join(lines)


def kill_rounds(rounds: int, turns: int, durability: Durability | None) -> None:
    """The rounds of ``tests/integration/server/test_multiworker.py``, with a durability to
    compare."""
    totals = [0, 0, 0, 0, 0]
    with (
        tempfile.TemporaryDirectory(prefix="mw-rounds-") as folder,
        cluster(Path(folder), workers=2, jobs=turns) as group,
    ):
        for number in range(1, rounds + 1):
            result = kill_round(
                group,
                number,
                turns=turns,
                rows=ROWS,
                burst=2 + number % 2,
                delay=(number % 5) * 0.01,
                durability=durability,
            )
            print(result.line(), flush=True)
            d = result.damage
            if d.missing_titles:
                print(lost_tasks_report(group, result), flush=True)
            for i, n in enumerate(
                (d.forks, d.duplicates, d.missing, d.open_rows, len(result.failures))
            ):
                totals[i] += n
    print(
        f"durability {durability or 'async (default)'}, {rounds} rounds: forks {totals[0]}, "
        f"duplicates {totals[1]}, missing {totals[2]}, open rows {totals[3]}, "
        f"failed turns {totals[4]}"
    )


def main(argv: Sequence[str] | None = None) -> None:
    """Dispatch the subcommand."""
    parser = argparse.ArgumentParser(prog="python -m bench.multiworker")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("setup", help=f"create {MW_VENV} (langgraph-runtime-pg and this project)")
    bench = commands.add_parser("run", help="turns per minute, and a kill -9 in the middle")
    bench.add_argument("--turns", type=int, nargs="+", default=[40, 120])
    bench.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    bench.add_argument("--jobs", type=int, default=10, help="runs per worker at once")
    bench.add_argument("--kill-turns", type=int, default=40, help="0: no kill run")
    bench.add_argument("--durability", choices=["sync", "async", "exit"], default=None)
    rounds = commands.add_parser(
        "rounds", help="the multi-worker test's rounds, printed: 20 turns in step, one kill each"
    )
    versus = commands.add_parser("compare", help='turns per minute, "async" against "sync"')
    versus.add_argument("--workers", type=int, default=2)
    versus.add_argument("--turns", type=int, default=40)
    versus.add_argument("--jobs", type=int, default=10)
    versus.add_argument("--repeat", type=int, default=3)
    rounds.add_argument("--rounds", type=int, default=8)
    rounds.add_argument("--turns", type=int, default=20)
    rounds.add_argument("--durability", choices=["sync", "async", "exit"], default=None)
    args = parser.parse_args(argv)
    if args.command == "setup":
        setup_venv(quiet=False)
        print(f"ready: {MW_VENV}")
        return
    if args.command == "compare":
        print(compare(args.workers, args.turns, args.jobs, args.repeat))
        return
    if args.command == "rounds":
        kill_rounds(args.rounds, args.turns, args.durability)
        return
    report = run(args.turns, args.workers, args.jobs, args.kill_turns, args.durability)
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(report + "\n")
    print(f"\n{report}\n\nwritten to {RESULTS}")


if __name__ == "__main__":
    main()
