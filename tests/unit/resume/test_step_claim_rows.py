"""A node's step claim reads the plan in the same transaction (``agent.turn.lineage``), so drain
and execute need no second read: the rows of the turn it claimed, or a fork's own copies."""

from __future__ import annotations

from typing import Any

from agent.turn.lineage import RunIdentity, continue_turn
from agent.turn.rows_handoff import hand_over, take_over
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


def test_only_the_very_todos_list_of_the_same_step_takes_the_rows_over_once() -> None:
    """A run resumed from a checkpoint has a ``todos`` list loaded from it: it reads."""
    rows: list[TurnTodo] = []
    todos: list[dict[str, Any]] = [{"title": "one", "status": "in_progress"}]
    hand_over(todos, SCOPE, 4, rows)
    assert take_over(list(todos), SCOPE, 4) is None
    hand_over(todos, SCOPE, 4, rows)
    assert take_over(todos, SCOPE, 5) is None
    hand_over(todos, SCOPE, 4, rows)
    assert take_over(todos, TurnScope("conversation", "turn/fork-1"), 4) is None
    hand_over(todos, SCOPE, 4, rows)
    assert take_over(todos, SCOPE, 4) is rows
    assert take_over(todos, SCOPE, 4) is None
