"""turnplan on a LangGraph Server with two worker processes over one PostgreSQL and one Redis
(``langgraph-runtime-pg``), one worker killed with SIGKILL in the middle of every round.

Opt-in (minutes, and its own environment): ``python -m bench.multiworker setup`` once, then

    TURNPLAN_MULTIWORKER=1 pytest -m multiworker tests/integration/server/test_multiworker.py -s

``TURNPLAN_MULTIWORKER_ROUNDS`` (default 8) and ``TURNPLAN_MULTIWORKER_TURNS`` (default 20) set
the size. Each round submits the turns together through ``langgraph-sdk``, each on its own
thread with the server's default durability (``"async"``); the stub model holds every turn's first
call until all have made it, so the turns go in step, and one worker is killed right after the
second or third burst of answers, 0 to 40 ms late. The other worker takes the killed worker's runs
over once their heartbeat expires (``LG_BG_JOB_HEARTBEAT=2``).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.multiworker import MW_VENV, RoundResult, cluster, kill_round, mw_ready

ENABLED = os.environ.get("TURNPLAN_MULTIWORKER") == "1"

pytestmark = [
    pytest.mark.integration,
    pytest.mark.multiworker,
    pytest.mark.skipif(
        not ENABLED,
        reason="multi-worker server test is opt-in: run `python -m bench.multiworker setup`, "
        "then set TURNPLAN_MULTIWORKER=1",
    ),
]

ROUNDS = int(os.environ.get("TURNPLAN_MULTIWORKER_ROUNDS", "8"))
TURNS = int(os.environ.get("TURNPLAN_MULTIWORKER_TURNS", "20"))
ROWS = 3


def test_every_turn_answers_once_when_a_worker_is_killed_mid_turn(tmp_path: Path) -> None:
    assert mw_ready(), f"{MW_VENV} is missing: run `python -m bench.multiworker setup`"
    assert TURNS >= 20
    rounds: list[RoundResult] = []
    # Every worker runs at least half the turns at once, so all of them start together.
    with cluster(tmp_path, workers=2, jobs=TURNS) as group:
        for number in range(1, ROUNDS + 1):
            result = kill_round(
                group,
                number,
                turns=TURNS,
                rows=ROWS,
                burst=2 + number % 2,
                delay=(number % 5) * 0.01,
            )
            print(result.line())
            rounds.append(result)
        logs = "\n".join(f"--- {w.name}\n{w.log_tail(1500)}" for w in group.workers)
    summary = "\n".join(r.line() for r in rounds)
    assert all(r.killed != "none" for r in rounds), summary
    # The kills hit runs in flight, which the other worker then ran again from a checkpoint.
    assert sum(r.taken_over for r in rounds) >= ROUNDS, summary
    failures = [(r.number, o) for r in rounds for o in r.failures]
    assert failures == [], f"{summary}\n{failures[:5]}\n{logs}"
    assert sum(r.damage.forks for r in rounds) == 0, summary
    assert sum(r.damage.duplicates for r in rounds) == 0, summary
    assert sum(r.damage.open_rows for r in rounds) == 0, summary
    assert sum(r.damage.missing for r in rounds) == 0, summary
