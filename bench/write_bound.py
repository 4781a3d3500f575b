"""``python -m bench.write_bound [--n 5 10 20 50] [--rounds 7]``: how close turnplan's
checkpointed overhead would come to ``todolist-seq``'s if its durable writes per item cost
nothing (issue 26).

Why: issue 26 asks for turnplan's checkpointed overhead at or below ``todolist-seq``'s at every
N >= 5, and proposes finding the time in fewer transactions per item. A sequential item costs
three: the step claim of ``execute`` made with the record of the model's answer (one
transaction since issue 42), the close of the row and the record of the item's action. Merging
or batching them can at best make two of them free (the close must still change the row). This
measures that best case directly: the same turn with the others replaced by no-ops
(``free_writes``), interleaved round by round with the real turn and ``todolist-seq`` (the same
process, machine and checkpointer), best per system. If the bound does not
reach parity, no merge of those writes can.

It is a bound, not a configuration: without those writes a turn is no longer exactly once (a
re-picked run repeats calls, a fork is not told from a resume). Counts are exact; times are for
comparing within one run.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any
from unittest.mock import patch

from bench.measure import _instant_run
from bench.systems import System
from bench.systems.todolist import TodoListSystem
from bench.systems.turnplan import TurnplanSystem

SYSTEMS = ("turnplan", "turnplan, free writes", "todolist-seq")

FREE_WRITES = (
    "agent.turn.lineage.claim_step_alone",
    "agent.turn.lineage.claim_step_with_answer",
    "agent.turn.answer_ledger.record_answer_alone",
    "agent.turn.call_ledger.record_alone",
    "agent.turn.call_ledger.record_with_evidence",
    "agent.turn.call_ledger._record_alone",
)
"""Where the turn makes the writes that merging could save: the step claim, the answer's
record, and the three ways an action's result is recorded."""


async def _taken(*_args: Any, **_kwargs: Any) -> bool:
    return True  # a claim or an answer recorded: this run took it


async def _recorded(*_args: Any, **_kwargs: Any) -> None:
    return None


async def _claimed_with_answer(*_args: Any, **_kwargs: Any) -> tuple[bool, bool]:
    return True, True  # the step taken and its answer recorded


@contextmanager
def free_writes() -> Iterator[None]:
    """The turn with its step claims, answer records and action records as no-ops."""
    with ExitStack() as stack:
        for target in FREE_WRITES:
            free: Callable[..., Awaitable[Any]] = _recorded
            if target.endswith(("claim_step_alone", "record_answer_alone")):
                free = _taken
            elif target.endswith("claim_step_with_answer"):
                free = _claimed_with_answer
            stack.enter_context(patch(target, free))
        yield


@dataclass(frozen=True)
class BoundRow:
    """Best overhead per item of each system at one N, checkpointed."""

    n: int
    ms_per_item: dict[str, float]

    def ratio(self, system: str) -> float:
        return self.ms_per_item[system] / self.ms_per_item["todolist-seq"]


def _system(name: str) -> System:
    return TodoListSystem(sequential=True) if name == "todolist-seq" else TurnplanSystem()


async def measure(ns: Sequence[int], rounds: int) -> list[BoundRow]:
    """Interleaved rounds at each N; each system's best overhead per item. A run that does not
    do the request (every item done once) is an error, not a figure."""
    rows = []
    for n in ns:
        best = dict.fromkeys(SYSTEMS, float("inf"))
        for round_number in range(rounds):
            for name in SYSTEMS:
                with free_writes() if name == "turnplan, free writes" else ExitStack():
                    overhead, problem = await _instant_run(_system(name), n, checkpointed=True)
                if problem:
                    raise RuntimeError(f"{name} at N = {n}: {problem}")
                best[name] = min(best[name], 1000 * overhead / n)
            print(f"  N = {n}: round {round_number + 1} of {rounds}", flush=True)
        rows.append(BoundRow(n, best))
    return rows


def report(rows: Sequence[BoundRow]) -> str:
    lines = [
        "Checkpointed overhead, ms per item (best of the rounds), and the ratio to todolist-seq:",
        "| N | turnplan | turnplan, free writes | todolist-seq |",
        "|---:|---:|---:|---:|",
    ]
    for row in rows:
        ms = row.ms_per_item
        lines.append(
            f"| {row.n} | {ms['turnplan']:.2f} ({row.ratio('turnplan'):.2f}) "
            f"| {ms['turnplan, free writes']:.2f} ({row.ratio('turnplan, free writes'):.2f}) "
            f"| {ms['todolist-seq']:.2f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, nargs="+", default=[5, 10, 20, 50], help="plan items")
    parser.add_argument("--rounds", type=int, default=7, help="interleaved rounds per N")
    args = parser.parse_args()
    print(report(asyncio.run(measure(args.n, args.rounds))))


if __name__ == "__main__":
    main()
