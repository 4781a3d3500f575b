"""``python -m bench.share_profile``: the figures that say where turnplan's share of a turn goes
without depending on the machine's load (counts per item, the checkpoint's channels, turnplan's
own functions), from a real checkpointed turn."""

from __future__ import annotations

from bench.share_profile import profile, profile_report, python_profile, report


async def test_the_profile_counts_a_checkpointed_turns_work_per_item() -> None:
    shorter, result = await profile(3, repeats=1), await profile(6, repeats=1)

    assert shorter.problem == result.problem == ""
    # Each further item: the claim with the answer's record, the close, the action's record.
    assert round(6 * result.transactions - 3 * shorter.transactions) == 3 * 3
    assert round(6 * result.checkpoints - 3 * shorter.checkpoints) == 3 * 2
    assert result.thread_trips > result.statements > 0
    assert result.cpu_seconds > 0
    # The last checkpoint holds the conversation and the plan: the largest channels.
    assert set(list(result.channel_bytes)[:3]) == {"messages", "ui", "todos"}
    text = report(result)
    assert "SQL statements" in text and "messages" in text and "CPU of the turn" in text


async def test_the_python_profile_names_turnplans_own_functions() -> None:
    text = profile_report(await python_profile(3), 3, top=5)

    assert text.startswith("Python calls: ")
    assert "own time by package:" in text and "sqlalchemy" in text
    assert "agent/nodes/execute.py" in text or "storage/engine.py" in text
