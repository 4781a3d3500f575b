"""``python -m bench.overhead``: the database work behind turnplan's overhead per item is counted
exactly, and the counts hold the line drawn by the rows handed from step to step (no timings
asserted)."""

from __future__ import annotations

import aiosqlite

from bench.overhead import TIMED, profile, report


async def test_the_profile_counts_each_items_database_work_and_leaves_nothing_patched() -> None:
    originals = (aiosqlite.Connection.cursor, aiosqlite.Cursor.execute)

    shorter, result = await profile(4, repeats=1), await profile(8, repeats=1)

    assert shorter.problem == result.problem == ""
    # Each further item of a sequential turn: execute's step claim made with the record of the
    # model's answer (its calls then run exactly once even if the checkpoints after it are lost;
    # agent.turn.lineage.DeferredClaim), the close, the recorded result of the item's action.
    assert round(8 * result.transactions - 4 * shorter.transactions) == 4 * 3
    # Their statements: 3 for the claim and the answer (BEGIN, the INSERT of the step, the
    # INSERT of the answer), 4 for the close (BEGIN, the row, the next row, its recorded
    # result), 3 for the action's record (BEGIN, the record, its evidence for the row in
    # progress). No step reads the rows: each takes them from the step before
    # (agent.turn.rows_handoff). Sending the claim and the answer without BEGIN measured under
    # half a point of share and was removed (issue 42, bench/RESULTS.md).
    assert round(8 * result.statements - 4 * shorter.statements) == 4 * 10
    # Three trips per statement through SQLAlchemy's aiosqlite adapter (open a cursor, execute,
    # close it), one more to fetch the evidence's RETURNING rows, one per COMMIT and one per
    # connection handed back to the pool (its reset rolls back; skipping that when nothing was
    # open measured under half a point too).
    assert round(8 * result.thread_trips - 4 * shorter.thread_trips) == 4 * (10 * 3 + 1 + 3 + 3)
    assert set(result.timed_ms) == set(TIMED)
    assert all(ms > 0 for ms in result.timed_ms.values())
    assert "trips to aiosqlite's thread" in report(result)
    assert (aiosqlite.Connection.cursor, aiosqlite.Cursor.execute) == originals


async def test_a_checkpointed_item_costs_two_checkpoints_and_twenty_one_channel_writes() -> None:
    shorter = await profile(4, repeats=1, checkpointed=True)
    result = await profile(8, repeats=1, checkpointed=True)

    assert shorter.problem == result.problem == ""
    # Each further item is two supersteps, each saved as one checkpoint: execute (the model's
    # call) and tools (the item's close and its action).
    assert round(8 * result.checkpoints - 4 * shorter.checkpoints) == 4 * 2
    # Its channel writes: execute's 14 (the step, the call's three usage counters, the row
    # usage, the budget, the progress mark, the answer, the route to tools, and the counters a
    # round may leave as they were: reminders, idle rounds and calls, operator faults,
    # estimated usage) and the tools step's 7 (two tool messages, the plan snapshot and its
    # card, the evidence log reset by the close and extended by the action, the route back).
    # Skipping the 5 unmoved counters (agent.nodes.unchanged, 16 writes an item) did not pay
    # in the harness's share and was removed (issue 42, bench/RESULTS.md).
    assert round(8 * result.channel_writes - 4 * shorter.channel_writes) == 4 * 21
    assert result.serialized_kb > 0
    assert "channel writes" in report(result)


async def test_python_calls_per_item_are_steady_enough_to_compare_two_commits_by() -> None:
    first = await profile(4, repeats=1, calls=True)
    second = await profile(4, repeats=1, calls=True)
    uncounted = await profile(4, repeats=1)

    assert first.problem == second.problem == ""
    # Counted in the timed turn only (the warm-up turn's calls are cleared): thousands per
    # item, and the same within a few percent from one run to the next, where wall times on a
    # shared machine move by a fifth.
    assert first.python_calls > 5_000
    assert abs(first.python_calls - second.python_calls) <= 0.03 * first.python_calls
    assert "Python calls" in report(first)
    assert uncounted.python_calls == 0
    assert "Python calls" not in report(uncounted)


async def test_the_database_floor_replays_the_turns_own_transactions_to_the_same_rows() -> None:
    result = await profile(4, repeats=1, floor=True)

    assert result.problem == ""
    floor = result.floor
    assert floor is not None
    # The replay is the timed turn's own database work, not a model of it: every transaction the
    # turn began, and every statement it sent (those sent as BEGIN are the replay's own).
    assert floor.transactions == round(4 * result.transactions)
    assert floor.statements + floor.locking_transactions == round(4 * result.statements)
    # Each way of sending them (SQLAlchemy Core pooled and held, raw aiosqlite) leaves the four
    # rows closed, as the turn did: a replay that lost or reordered a write would not.
    assert floor.row_statuses == {"completed": 4}
    assert min(floor.sqlalchemy_core_ms, floor.sqlalchemy_held_ms, floor.raw_aiosqlite_ms) > 0
    assert "raw aiosqlite" in report(result) and "4 completed" in report(result)
    assert (await profile(4, repeats=1)).floor is None
