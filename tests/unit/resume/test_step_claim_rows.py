"""A node's step claim reads the plan in the same transaction (``agent.turn.lineage``), so drain
and execute need no second read: the rows of the turn it claimed, or a fork's own copies."""

from __future__ import annotations

from typing import Any

from agent.turn.lineage import RunIdentity, continue_turn
from agent.turn.rows_handoff import NOTHING_HANDED, StepRows, hand_over, take_over
from storage import Database
from storage.models import TurnTodo
from storage.repositories import NewTurnTodo, TurnRepository, TurnScope, TurnTodoRepository

SCOPE = TurnScope("conversation", "turn")


async def test_a_claim_reads_the_rows_of_the_turn_it_claimed(database: Database) -> None:
    async with database.session() as session:
        await TurnRepository(session).create(SCOPE, message_id="m", step=1, task_id="task")
        await TurnTodoRepository(session).create(SCOPE, NewTurnTodo(title="original"))

    claim = await continue_turn(
        database,
        SCOPE,
        step=1,
        identity=RunIdentity("task"),
        message_id="m",
        todos=[],
        read_rows=True,
    )
    assert claim.step == 2 and claim.forked_from is None
    assert [row.title for row in claim.rows or []] == ["original"]

    # From an older step: a fork, whose rows are the snapshot's copies.
    fork = await continue_turn(
        database,
        SCOPE,
        step=1,
        identity=RunIdentity("another task"),
        message_id="m",
        todos=[{"title": "as the checkpoint saw it", "status": "pending"}],
        read_rows=True,
    )
    assert fork.forked_from == SCOPE.turn_id
    assert [row.title for row in fork.rows or []] == ["as the checkpoint saw it"]

    plain = await continue_turn(
        database, SCOPE, step=2, identity=RunIdentity("t3"), message_id="m", todos=[]
    )
    assert plain.rows is None


async def test_rows_handed_over_stand_in_for_the_read_unless_the_claim_forks(
    database: Database,
) -> None:
    """``execute`` takes the rows ``drain`` just read (``agent.turn.rows_handoff``) for a plain
    claim; a claim that turns out to be a fork reads the fork's own rows instead."""
    async with database.session() as session:
        await TurnRepository(session).create(SCOPE, message_id="m", step=1, task_id="task")
        await TurnTodoRepository(session).create(SCOPE, NewTurnTodo(title="original"))
        rows = await TurnTodoRepository(session).find_by_turn(SCOPE)

    claim = await continue_turn(
        database,
        SCOPE,
        step=1,
        identity=RunIdentity("task"),
        message_id="m",
        todos=[],
        read_rows=True,
        known_rows=rows,
    )
    assert claim.forked_from is None and claim.rows is rows

    fork = await continue_turn(
        database,
        SCOPE,
        step=1,
        identity=RunIdentity("another task"),
        message_id="m",
        todos=[{"title": "as the checkpoint saw it", "status": "pending"}],
        read_rows=True,
        known_rows=rows,
    )
    assert fork.forked_from == SCOPE.turn_id
    assert [row.title for row in fork.rows or []] == ["as the checkpoint saw it"]


def test_only_the_very_todos_list_of_the_same_step_takes_the_rows_over() -> None:
    """A run resumed from a checkpoint has a ``todos`` list loaded from it: it reads."""
    rows: list[TurnTodo] = []
    todos: list[dict[str, Any]] = [{"title": "one", "status": "in_progress"}]
    state = {"todos": todos, **hand_over(todos, SCOPE, 4, rows)}
    assert take_over({**state, "todos": list(todos)}, SCOPE, 4) is None
    assert take_over(state, SCOPE, 5) is None
    assert take_over(state, TurnScope("conversation", "turn/fork-1"), 4) is None
    assert take_over(state, SCOPE, 4) is rows
    assert take_over({**state, **NOTHING_HANDED}, SCOPE, 4) is None
    assert take_over({"todos": todos}, SCOPE, 4) is None, "nothing handed: read"


def test_within_a_tools_step_each_writing_call_takes_the_rows_once() -> None:
    """A todo tool takes the rows before it writes; one that fails hands nothing on, so the
    next call, or the next step, reads."""
    rows: list[TurnTodo] = []
    todos: list[dict[str, Any]] = [{"title": "one", "status": "in_progress"}]
    (handed,) = hand_over(todos, SCOPE, 4, rows).values()
    carried = StepRows(handed)
    assert carried.take(list(todos), SCOPE, 4) is None
    assert carried.update() == NOTHING_HANDED, "a take that misses still takes"
    carried = StepRows(handed)
    taken = carried.take(todos, SCOPE, 4)
    assert taken is not None and taken.rows is rows
    assert carried.take(todos, SCOPE, 4) is None
    left: list[TurnTodo] = []
    carried.hand(todos, SCOPE, 4, left)
    after = carried.take(todos, SCOPE, 4)
    assert after is not None and after.rows is left and not after.shown
