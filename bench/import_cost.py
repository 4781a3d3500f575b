"""``python -m bench.import_cost [--runs 5]``: what importing turnplan costs, against importing
``langchain.agents`` (which brings langgraph and langchain-core, as turnplan does).

Each import runs in a fresh interpreter (``sys.executable -c``), timed inside it around the
``import`` statement alone, so interpreter start-up is left out; the best of ``--runs`` is
reported, the figure least disturbed by whatever else the machine is doing. Issue 43's budget:
``agent.graph`` at most 0.5 s more than ``langchain.agents``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MODULES = ("langchain.agents", "agent", "agent.graph", "agent.server")
BUDGET_SECONDS = 0.5


def import_seconds(module: str) -> float:
    """Seconds one fresh interpreter spends on ``import module``."""
    code = (
        "import time\n"
        "started = time.perf_counter()\n"
        f"import {module}\n"
        "print(time.perf_counter() - started)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env, cwd=REPO
    )
    return float(done.stdout.strip().splitlines()[-1])


def best_of(module: str, runs: int) -> float:
    """The least of ``runs`` fresh imports of ``module``."""
    return min(import_seconds(module) for _ in range(runs))


def main(argv: list[str] | None = None) -> int:
    """Print each module's best import time and whether turnplan keeps to the budget."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    best = {module: best_of(module, args.runs) for module in MODULES}
    for module, seconds in best.items():
        print(f"{module:<18} {seconds:6.3f} s (best of {args.runs})")
    extra = best["agent.graph"] - best["langchain.agents"]
    verdict = "within" if extra <= BUDGET_SECONDS else "OVER"
    print(
        f"agent.graph - langchain.agents = {extra:+.3f} s ({verdict} the {BUDGET_SECONDS} s budget)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
