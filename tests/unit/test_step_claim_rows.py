"""A node's step claim reads the plan in the same transaction (``agent.turn_lineage``), so drain
and execute need no second read: the rows of the turn it claimed, or a fork's own copies."""

from __future__ import annotations

from agent.turn_lineage import continue_turn
from storage import Database
from storage.repositories import NewTurnTodo, TurnRepository, TurnScope, TurnTodoRepository

SCOPE = TurnScope("conversation", "turn")


async def test_a_claim_reads_the_rows_of_the_turn_it_claimed(database: Database) -> None:
    async with database.session() as session:
        await TurnRepository(session).create(SCOPE, message_id="m", step=1, task_id="task")
        await TurnTodoRepository(session).create(SCOPE, NewTurnTodo(title="original"))

    claim = await continue_turn(
        database, SCOPE, step=1, task_id="task", message_id="m", todos=[], read_rows=True
    )
    assert claim.step == 2 and claim.forked_from is None
    assert [row.title for row in claim.rows or []] == ["original"]

    # From an older step: a fork, whose rows are the snapshot's copies.
    fork = await continue_turn(
        database,
        SCOPE,
        step=1,
        task_id="another task",
        message_id="m",
        todos=[{"title": "as the checkpoint saw it", "status": "pending"}],
        read_rows=True,
    )
    assert fork.forked_from == SCOPE.turn_id
    assert [row.title for row in fork.rows or []] == ["as the checkpoint saw it"]

    plain = await continue_turn(database, SCOPE, step=2, task_id="t3", message_id="m", todos=[])
    assert plain.rows is None
