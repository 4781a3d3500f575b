"""``python -m bench.overhead``: the database work behind turnplan's overhead per item is counted
exactly, and the counts hold the line the one-trip driver drew (no timings asserted)."""

from __future__ import annotations

from bench.overhead import TIMED, profile, report
from storage.aiosqlite_one_trip import OneTripConnection


async def test_the_profile_counts_each_items_database_work_and_leaves_nothing_patched() -> None:
    original = OneTripConnection._execute

    shorter, result = await profile(4, repeats=1), await profile(8, repeats=1)

    assert shorter.problem == result.problem == ""
    # Each further item of a sequential turn: the step claims of execute and drain, the close,
    # the recorded result of the item's action.
    assert round(8 * result.transactions - 4 * shorter.transactions) == 4 * 4
    # Their statements, BEGIN included: 2 per claim, 4 for the close (the row, the next row,
    # the close's recorded result), 2 for the action's record. No step reads the rows: each
    # takes them from the step before (agent.rows_handoff).
    assert round(8 * result.statements - 4 * shorter.statements) == 4 * 10
    # One trip per statement, and one more per transaction for its commit.
    assert result.thread_trips == result.statements + result.transactions
    assert set(result.timed_ms) == set(TIMED)
    assert all(ms > 0 for ms in result.timed_ms.values())
    assert "trips to aiosqlite's thread" in report(result)
    assert OneTripConnection._execute is original
