"""``python -m bench.share_ab NAME=TREE ... [--rounds 6] [--system turnplan]``: the harness's
share (``bench.share``) of source trees side by side, interleaved.

Deciding whether a piece of machinery pays needs the turn measured with it and without it on one
machine at one time: each TREE is a checkout of the repository (``git archive COMMIT | tar -x -C
TREE``), and every round runs one turn of each tree in a process of its own (``PYTHONPATH`` =
that tree), the order rotated from round to round, so a busy spell hits all of them alike and
none is always first. Prints each tree's best and median share and the best's figures.
``--postgres``: on PostgreSQL (one server for the whole comparison, a fresh database a turn).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from bench.postgres import PostgresBench, postgres_server

ONE_RUN = """
import asyncio, json, sys
from dataclasses import dataclass
from pathlib import Path
from bench.postgres import PostgresBench
from bench.run import all_systems
from bench.share import measure_share


@dataclass(frozen=True)
class Given(PostgresBench):
    name: str = ""

    def fresh_database(self) -> str:
        return self.name  # made by the comparing process, fresh for this turn


postgres = Given(Path(sys.argv[3]), None, sys.argv[4]) if len(sys.argv) > 3 else None
system = next(s for s in all_systems() if s.name == sys.argv[1])
(run,) = asyncio.run(measure_share([system], int(sys.argv[2]), repeats=1, postgres=postgres))
print(json.dumps({"calls": run.calls, "wall": run.wall_seconds, "model": run.model_seconds,
                  "share": run.share, "problem": run.problem}))
"""


def one_run(
    tree: Path, system: str, n: int, postgres: PostgresBench | None = None
) -> dict[str, float | str]:
    """One timed turn of ``system`` from the code in ``tree``, in a process of its own;
    ``postgres``: on a fresh database of that server."""
    environment = {**os.environ, "PYTHONPATH": str(tree)}
    where = [str(postgres.socket_dir), postgres.fresh_database()] if postgres else []
    finished = subprocess.run(
        [sys.executable, "-c", ONE_RUN, system, str(n), *where],
        cwd=tree,
        env=environment,
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, float | str] = json.loads(finished.stdout.strip().splitlines()[-1])
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.share_ab", description=__doc__)
    parser.add_argument("trees", nargs="+", help="NAME=PATH of a checkout")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--system", default="turnplan")
    parser.add_argument("--n", type=int, default=20)
    parser.add_argument("--postgres", action="store_true", help="on PostgreSQL (pgserver)")
    args = parser.parse_args(argv)
    if args.postgres:
        with postgres_server() as server:
            return compare(args, server)
    return compare(args, None)


def compare(args: argparse.Namespace, postgres: PostgresBench | None) -> int:
    """Run the rounds and print the table."""
    trees = dict(tree.split("=", 1) for tree in args.trees)
    runs: dict[str, list[dict[str, float | str]]] = {name: [] for name in trees}
    names = list(trees)
    for round_index in range(args.rounds):
        shift = round_index % len(names)
        for name in names[shift:] + names[:shift]:
            run = one_run(Path(trees[name]).resolve(), args.system, args.n, postgres)
            runs[name].append(run)
            print(f"round {round_index + 1} {name}: {run}", file=sys.stderr, flush=True)
    print("| tree | runs | best share % | median share % | best wall s | calls | problems |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for name, found in runs.items():
        shares = [float(run["share"]) for run in found]
        best = min(found, key=lambda run: float(run["share"]))
        problems = "; ".join(sorted({str(run["problem"]) for run in found if run["problem"]}))
        print(
            f"| {name} | {len(found)} | {100 * min(shares):.2f} | "
            f"{100 * statistics.median(shares):.2f} | {float(best['wall']):.3f} | "
            f"{best['calls']} | {problems or 'none'} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
