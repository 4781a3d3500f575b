"""Which turns a new turn closes as stopped by a newer run (``agent.turn.superseded``): only
those whose last server run the server says was rolled back or interrupted, never a plan left
open on purpose (budget exhaustion, a pause, another branch), a Python run's or this run's own."""

from __future__ import annotations

from agent.turn.superseded import (
    RunFate,
    SupersededTurn,
    close_superseded_turns,
    superseded_note,
)
from storage import Database
from storage.repositories import (
    NewTurnTodo,
    ToolCallKey,
    ToolResultRepository,
    TurnScope,
    TurnStepRepository,
    TurnTodoRepository,
)
from storage.repositories.turns import TurnRepository

CONVERSATION = "thread-1"
NEW_RUN = "run-new"


async def a_turn(
    database: Database,
    turn_id: str,
    run_id: str,
    titles: list[str],
    *,
    previous: str | None = None,
    calls: tuple[tuple[str, str], ...] = (),
) -> None:
    """A turn whose steps ``run_id`` took, with open rows ``titles`` and recorded ``calls``
    (tool name, result)."""
    scope = TurnScope(CONVERSATION, turn_id)
    async with database.session() as session:
        await TurnRepository(session).create(scope, message_id=turn_id, step=1, task_id="t")
        await TurnRepository(session).record_branch(scope, previous)
        await TurnStepRepository(session).claim(scope, step=1, task_id="t", run_id=run_id)
        await TurnTodoRepository(session).create_batch(
            scope, [NewTurnTodo(title=title) for title in titles]
        )
        for number, (tool, result) in enumerate(calls):
            key = ToolCallKey(CONVERSATION, turn_id, f"{turn_id}-call-{number}", tool)
            await ToolResultRepository(session).record(key, result, None)


async def statuses(database: Database, turn_id: str) -> list[tuple[str, str | None]]:
    async with database.session(readonly=True) as session:
        rows = await TurnTodoRepository(session).find_by_turn(TurnScope(CONVERSATION, turn_id))
    return [(row.status, row.outcome) for row in rows]


class Server:
    """The fates the server would report, and the runs it was asked about."""

    def __init__(self, fates: dict[str, RunFate]) -> None:
        self.fates = fates
        self.asked: list[str] = []

    async def __call__(self, thread_id: str, run_id: str) -> RunFate:
        assert thread_id == CONVERSATION
        self.asked.append(run_id)
        return self.fates.get(run_id, "other")


async def close_for_new_turn(
    database: Database, server: Server, previous: str | None
) -> list[SupersededTurn]:
    new = TurnScope(CONVERSATION, "new")
    await a_turn(database, "new", NEW_RUN, [], previous=previous)
    return await close_superseded_turns(
        database, new, thread_id=CONVERSATION, run_id=NEW_RUN, fates=server
    )


async def test_a_rolled_back_turn_is_closed_and_what_it_did_is_reported(
    database: Database,
) -> None:
    await a_turn(database, "first", "run-1", ["jam"])
    await a_turn(
        database,
        "stopped",
        "run-2",
        ["bread", "milk"],
        previous="first",
        calls=(("create_todo", "Planned 2 items"), ("add_task", "Added task 'bread'")),
    )
    server = Server({"run-2": "rolled_back"})

    (turn,) = await close_for_new_turn(database, server, previous="first")

    assert await statuses(database, "stopped") == [("cancelled", "rolled back by a newer run")] * 2
    assert await statuses(database, "first") == [("pending", None)]  # its run finished
    assert (turn.turn_id, turn.closed, turn.effects) == (
        "stopped",
        ("bread", "milk"),
        ("add_task: Added task 'bread'",),
    )
    note = superseded_note([turn])
    assert "rolled back by a newer run" in note and "'bread', 'milk'" in note
    assert "add_task: Added task 'bread'" in note and "create_todo" not in note


async def test_plans_left_open_on_purpose_stay_open(database: Database) -> None:
    await a_turn(database, "exhausted", "run-1", ["honey"])  # its run ended: budget exhausted
    await a_turn(database, "python", "", ["tea"], previous="exhausted")  # no server run
    await a_turn(database, "own", NEW_RUN, ["jam"], previous="python")
    server = Server({})

    assert await close_for_new_turn(database, server, previous="own") == []

    assert server.asked == ["run-1"]  # neither this run nor a run-less turn is asked about
    for turn_id in ("exhausted", "python", "own"):
        assert await statuses(database, turn_id) == [("pending", None)]


async def test_an_interrupted_run_off_this_branch_is_a_rollback_under_way(
    database: Database,
) -> None:
    """The server marks a run it is rolling back interrupted until its worker deletes it; the
    new run started from before that run's turn, so the turn is off its branch."""
    await a_turn(database, "before", "run-0", [])
    await a_turn(database, "interrupted", "run-1", ["bread"], previous="before")
    await a_turn(database, "rolled", "run-2", ["milk"], previous="interrupted")
    server = Server({"run-1": "interrupted", "run-2": "interrupted"})

    closed = await close_for_new_turn(database, server, previous="interrupted")

    assert {turn.turn_id: turn.fate for turn in closed} == {
        "interrupted": "interrupted",
        "rolled": "rolled_back",
    }
    assert await statuses(database, "rolled") == [("cancelled", "rolled back by a newer run")]


async def test_a_conversation_spanning_threads_is_left_alone(database: Database) -> None:
    """A conversation named in the context may have turns on other threads, whose runs this
    thread's server cannot look up (they would read as deleted)."""
    await a_turn(database, "elsewhere", "run-on-another-thread", ["honey"])
    server = Server({"run-on-another-thread": "rolled_back"})

    closed = await close_superseded_turns(
        database,
        TurnScope(CONVERSATION, "new"),
        thread_id="another-thread",
        run_id=NEW_RUN,
        fates=server,
    )

    assert (closed, server.asked) == ([], [])
    assert await statuses(database, "elsewhere") == [("pending", None)]


async def test_a_rolled_back_turn_with_nothing_open_is_reported_once_to_the_turn_replacing_it(
    database: Database,
) -> None:
    """A direct answer (no plan) rolled back after it added a task: nothing to close, but the
    new turn begun on the same checkpoint is told what stays done. A Studio fork before it
    whose run ended, or a rolled-back turn that only planned, is not news; the turn after the
    new one follows it, not that checkpoint, and is told nothing again."""
    await a_turn(database, "first", "run-1", [])
    await a_turn(
        database, "forked", "run-2", [], previous="first", calls=(("add_task", "Added 'oats'"),)
    )
    await a_turn(
        database, "direct", "run-3", [], previous="first", calls=(("add_task", "Added 'jam'"),)
    )
    await a_turn(
        database, "planned", "run-4", [], previous="first", calls=(("create_todo", "2 items"),)
    )
    server = Server({"run-3": "rolled_back", "run-4": "interrupted"})  # run-2 finished

    (turn,) = await close_for_new_turn(database, server, previous="first")

    assert (turn.turn_id, turn.fate, turn.closed) == ("direct", "rolled_back", ())
    assert turn.effects == ("add_task: Added 'jam'",)
    note = superseded_note([turn])
    assert "rolled back by a newer run" in note and "add_task: Added 'jam'" in note
    assert "cancelled" not in note  # nothing was closed
    assert server.asked == ["run-4", "run-3", "run-2"]  # newest first, up to one that lived on

    after = TurnScope(CONVERSATION, "after")
    await a_turn(database, "after", "run-5", [], previous="new")
    again = await close_superseded_turns(
        database, after, thread_id=CONVERSATION, run_id="run-5", fates=server
    )
    assert again == []


async def a_new_turn(
    database: Database, server: Server, turn_id: str, run_id: str, previous: str
) -> list[SupersededTurn]:
    """A turn begun on the checkpoint after ``previous`` by ``run_id``, and what it is told."""
    await a_turn(database, turn_id, run_id, [], previous=previous)
    return await close_superseded_turns(
        database,
        TurnScope(CONVERSATION, turn_id),
        thread_id=CONVERSATION,
        run_id=run_id,
        fates=server,
    )


async def test_rollbacks_in_a_row_are_all_told_and_a_later_fork_is_told_none(
    database: Database,
) -> None:
    """Jam added, rolled back by a turn that added oats, itself rolled back: the third turn is
    told both. A Studio fork from the same checkpoint later is told neither: the third turn
    lived on and told the user."""
    await a_turn(database, "first", "run-1", [])
    jam = (("add_task", "Added 'jam'"),)
    oats = (("add_task", "Added 'oats'"),)
    await a_turn(database, "jam", "run-2", [], previous="first", calls=jam)
    await a_turn(database, "oats", "run-3", [], previous="first", calls=oats)
    server = Server({"run-2": "rolled_back", "run-3": "rolled_back"})

    told = await a_new_turn(database, server, "third", "run-4", "first")

    assert [(turn.turn_id, turn.effects) for turn in told] == [
        ("jam", ("add_task: Added 'jam'",)),
        ("oats", ("add_task: Added 'oats'",)),
    ]
    assert await a_new_turn(database, server, "forked", "run-5", "first") == []


async def test_a_fork_beside_an_interrupted_turn_is_told_nothing_of_it(
    database: Database,
) -> None:
    """An interrupted turn keeps its checkpoints: the turn that interrupted it follows it and
    sees what it did in its history. A Studio fork from before it later is not told it was
    rolled back."""
    await a_turn(database, "first", "run-1", [])
    jam = (("add_task", "Added 'jam'"),)
    await a_turn(database, "interrupted", "run-2", [], previous="first", calls=jam)
    server = Server({"run-2": "interrupted"})

    assert await a_new_turn(database, server, "next", "run-3", "interrupted") == []
    assert await a_new_turn(database, server, "forked", "run-4", "first") == []


async def test_a_run_continuing_the_plan_keeps_an_interrupted_turns_rows_to_continue(
    database: Database,
) -> None:
    """After a Stop (the run interrupted, its checkpoints kept), "continue" must find the rows
    open; a rolled-back turn's rows are closed all the same."""
    await a_turn(database, "stopped", "run-1", ["milk"])
    await a_turn(database, "rolled", "run-2", ["jam"], previous="stopped")
    await a_turn(database, "new", NEW_RUN, [], previous="stopped")
    server = Server({"run-1": "interrupted", "run-2": "rolled_back"})

    closed = await close_superseded_turns(
        database,
        TurnScope(CONVERSATION, "new"),
        thread_id=CONVERSATION,
        run_id=NEW_RUN,
        fates=server,
        continuing=True,
    )

    assert [turn.turn_id for turn in closed] == ["rolled"]
    assert await statuses(database, "stopped") == [("pending", None)]
