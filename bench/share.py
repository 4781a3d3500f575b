"""The harness's share of a turn's wall time (issue 42): what a user waits for that is not the
model.

Per-item milliseconds with an instant model (``bench.measure``) say where the harness's time
goes, but not whether a user can feel it: with a real model, each call takes hundreds of
milliseconds and the harness's work is a small part of the turn. So the figure here is measured
against a scripted model that takes ``MODEL_SECONDS`` per call (``InstantChatModel.latency``,
an ``asyncio.sleep``, so anything the harness does in the background can overlap it):

    share = (wall - calls x MODEL_SECONDS) / wall

for the sequential N-item turn (one item at a time, N + 2 calls for turnplan), with a SQLite
checkpointer on a file, as a durable deployment runs it; the best of ``repeats`` runs, the
systems interleaved (A, B, A, B, ...) so that a busy spell of the machine hits all of them
alike. The timed turn is the second one of a freshly built agent, as for the overhead figure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bench.measure import timed_turn
from bench.postgres import PostgresBench
from bench.systems import System

MODEL_SECONDS = 0.3
"""What one model call takes: a fast hosted model's latency for a short answer."""
DEFAULT_N = 20
SHARE_SYSTEMS = ("turnplan", "todolist-seq", "deepagents-seq", "react", "naive-loop")
"""The systems measured side by side: the one-item-at-a-time planners, and the unplanned and
naive baselines."""


@dataclass(frozen=True)
class ShareRun:
    """One timed turn of one system against the slow model."""

    system: str
    n: int
    calls: int
    wall_seconds: float
    model_seconds: float
    problem: str = ""

    @property
    def harness_seconds(self) -> float:
        """The wall time that is not the model's."""
        return self.wall_seconds - self.model_seconds

    @property
    def share(self) -> float:
        """The harness's share of the turn's wall time."""
        return self.harness_seconds / self.wall_seconds if self.wall_seconds > 0 else 0.0


async def measure_share(
    systems: Sequence[System],
    n: int = DEFAULT_N,
    *,
    repeats: int = 3,
    model_seconds: float = MODEL_SECONDS,
    postgres: PostgresBench | None = None,
) -> list[ShareRun]:
    """The best run (the smallest share) of each system out of ``repeats``, interleaved; a
    system with a failed run is reported with that run's problem. ``postgres``: each turn's
    checkpointer (and turnplan's tables) on a fresh database of that server, not SQLite."""
    runs: dict[str, list[ShareRun]] = {system.name: [] for system in systems}
    for _ in range(max(1, repeats)):
        for system in systems:
            turn = await timed_turn(
                system, n, checkpointed=True, latency=model_seconds, postgres=postgres
            )
            runs[system.name].append(
                ShareRun(
                    system=system.name,
                    n=n,
                    calls=turn.calls,
                    wall_seconds=turn.wall_seconds,
                    model_seconds=turn.model_seconds,
                    problem=turn.problem,
                )
            )
    return [_best(found) for found in runs.values()]


def _best(runs: list[ShareRun]) -> ShareRun:
    """The least disturbed run, or the first failed one: a failure is never hidden by a good
    run beside it."""
    failed = [run for run in runs if run.problem]
    return failed[0] if failed else min(runs, key=lambda run: run.share)


def share_table(
    runs: Sequence[ShareRun], model_seconds: float = MODEL_SECONDS, *, postgres: bool = False
) -> str:
    """The markdown table of ``runs``, one row per system."""
    store = "PostgreSQL checkpointer (pgserver)" if postgres else "SQLite checkpointer on a file"
    lines = [
        f"Harness share of a turn's wall time: sequential N-item turn, a model taking "
        f"{1000 * model_seconds:.0f} ms per call, {store}, best run",
        "",
        "| system | N | LLM calls | wall s | model s | harness s | harness share % | ok |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for run in runs:
        ok = "yes" if not run.problem else f"NO: {run.problem}"
        lines.append(
            f"| {run.system} | {run.n} | {run.calls} | {run.wall_seconds:.2f} | "
            f"{run.model_seconds:.2f} | {run.harness_seconds:.3f} | {100 * run.share:.1f} | {ok} |"
        )
    return "\n".join(lines)
