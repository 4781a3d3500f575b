"""``python -m bench`` prints the harness's share of a turn's wall time for every system it runs
(``bench.share``); no timing is asserted, only that each share is measured and shown."""

from __future__ import annotations

import re

import pytest

from bench.run import all_systems, run_share
from bench.share import SHARE_SYSTEMS, ShareRun, measure_share, share_table
from bench.systems.react import ReactSystem
from bench.systems.turnplan import TurnplanSystem

MODEL_SECONDS = 0.01
"""A short model call: the test checks what is computed and printed, not how long it takes."""


async def test_the_share_is_computed_from_the_calls_of_a_model_that_takes_time() -> None:
    runs = await measure_share(
        [TurnplanSystem(), ReactSystem()], 2, repeats=2, model_seconds=MODEL_SECONDS
    )

    by_system = {run.system: run for run in runs}
    assert list(by_system) == ["turnplan", "react"]
    assert all(run.problem == "" for run in runs), [run.problem for run in runs]
    assert (by_system["turnplan"].calls, by_system["react"].calls) == (2 + 2, 2)
    for run in runs:
        # The model's time is at least its calls times what each takes; the share is the rest
        # of the wall time, over the wall time.
        assert run.model_seconds >= run.calls * MODEL_SECONDS
        assert run.wall_seconds > run.model_seconds
        assert run.share == run.harness_seconds / run.wall_seconds
        assert 0 < run.share < 1


async def test_python_m_bench_prints_a_share_for_every_installed_system_it_runs() -> None:
    chosen = [system for system in all_systems() if system.name in SHARE_SYSTEMS]
    installed = [system.name for system in chosen if system.unavailable() is None]
    missing = [system.name for system in chosen if system.unavailable() is not None]

    table = await run_share(chosen, n=2, repeats=1, model_seconds=MODEL_SECONDS)

    assert "harness share %" in table
    for name in installed:
        row = rf"^\| {re.escape(name)} \| 2 \| \d+ \|.*\| \d+\.\d \| yes \|$"
        assert re.search(row, table, re.M) is not None, f"no share for {name}:\n{table}"
    for name in missing:
        assert f"{name} (package" in table


def test_a_failed_run_is_shown_as_failed_beside_its_share() -> None:
    runs = [ShareRun("turnplan", 20, 22, 7.0, 6.6, problem="the turn ended without an answer")]

    assert "| NO: the turn ended without an answer |" in share_table(runs)


async def test_the_share_on_postgresql_runs_turnplan_and_its_checkpointer_there() -> None:
    """``--postgres``: a server started for the run; turnplan's turn completes on it and the
    table says the checkpointer was PostgreSQL's."""
    pytest.importorskip("pgserver", reason="the dev extra installs pgserver")

    table = await run_share(
        [TurnplanSystem()], n=2, repeats=1, model_seconds=MODEL_SECONDS, postgres=True
    )

    assert "PostgreSQL checkpointer" in table
    assert re.search(r"^\| turnplan \| 2 \| 4 \|.*\| \d+\.\d \| yes \|$", table, re.M), table
