"""``python -m bench.write_bound``: the bound it measures is the turn with exactly the writes that
merging could save made free, the request still done; nothing stays patched afterwards."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine

import agent.turn.lineage
from bench.measure import _instant_run
from bench.systems.turnplan import TurnplanSystem
from bench.write_bound import free_writes, measure, report


@contextmanager
def counted_transactions() -> Iterator[list[int]]:
    begun = [0]

    def begin(_connection: Any) -> None:
        begun[0] += 1

    event.listen(Engine, "begin", begin)
    try:
        yield begun
    finally:
        event.remove(Engine, "begin", begin)


async def transactions_of_a_turn(n: int, *, free: bool) -> int:
    """Transactions of ``_instant_run``'s two turns (warm-up and timed) at N = ``n``."""
    with counted_transactions() as begun:
        if free:
            with free_writes():
                _, problem = await _instant_run(TurnplanSystem(), n, checkpointed=True)
        else:
            _, problem = await _instant_run(TurnplanSystem(), n, checkpointed=True)
    assert problem == ""  # every item done once, with or without the writes
    return begun[0]


async def test_free_writes_drop_two_of_an_items_three_transactions_and_undo_themselves() -> None:
    original = agent.turn.lineage.claim_step_alone

    real = (await transactions_of_a_turn(6, free=False)) - await transactions_of_a_turn(
        3, free=False
    )
    free = (await transactions_of_a_turn(6, free=True)) - await transactions_of_a_turn(3, free=True)

    # Two turns of three more items each: three transactions per item, one (the close) left.
    assert real == 2 * 3 * 3
    assert free == 2 * 3 * 1
    assert agent.turn.lineage.claim_step_alone is original


async def test_the_report_sets_each_system_against_todolist_seq() -> None:
    rows = await measure([2], rounds=1)

    table = report(rows)

    assert "| 2 |" in table and "turnplan, free writes" in table
    assert rows[0].ratio("todolist-seq") == 1.0
