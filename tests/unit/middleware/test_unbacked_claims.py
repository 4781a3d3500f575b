"""A turn never ends ``answered`` on a change nothing made (issue 40 §4,
``agent.turn.claim_check``), on both faces: the supervisor graph and ``TurnPlanMiddleware``.

The model here is scripted with the shapes the packaged Qwen models were seen to reply with
(bench/RESULTS.md, issue 40): a claim with no tool called, a claim after a failed call, a
claim after a listing, a promise, a call to a tool the run does not have.

Most cases are one turn on the task tools, so they are rows of one table (``TURNS``) played by
one test; the tests after it differ in what they look at (the tool error itself) or in how many
turns they take."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from langchain_core.messages import ToolMessage

from agent.tools.personal_tasks import build_task_tools
from storage import Database
from storage.repositories import TaskRepository
from tests.fakes import (
    Step,
    act,
    answer_with,
    close_row,
    plan_items,
    record,
    scripted_turn,
    tool_call,
)
from tests.unit.middleware.faces import Face

USER = "local-user"


async def seed(database: Database, *titles: str) -> None:
    await database.create_schema()
    async with database.session() as session:
        tasks = TaskRepository(session, USER)
        for title in titles:
            await tasks.add(title)


async def titles(database: Database) -> list[str]:
    await database.create_schema()
    async with database.session(readonly=True) as session:
        return [task.title for task in await TaskRepository(session, USER).find()]


def final_text(result: dict[str, Any]) -> str:
    return str(result["messages"][-1].content)


def task_agent(face: Face, database: Database, *steps: Step) -> Any:
    """The face built on the task tools with a model that plays ``steps`` in order."""
    return face.build(scripted_turn(database, *steps), database, build_task_tools(database))


@dataclass(frozen=True)
class Turn:
    """One turn on the task tools, and what the user must see at its end."""

    asked: str
    model_does: tuple[Step, ...]
    status: str
    tasks_after: tuple[str, ...]
    tasks_before: tuple[str, ...] = ()
    answer_says: tuple[str, ...] = ()
    """Words the final answer holds (the model's own, or the turn's note of what was not done)."""
    answer_is: str | None = None
    """The final answer word for word, where the model's answer must stay untouched."""


async def play(face: Face, database: Database, turn: Turn) -> dict[str, Any]:
    """Runs ``turn`` on ``face`` and checks how it ended; returns the run's values."""
    await seed(database, *turn.tasks_before)
    result = await face.run(task_agent(face, database, *turn.model_does), turn.asked)

    assert result["turnStatus"] == turn.status
    text = final_text(result)
    for words in turn.answer_says:
        assert words in text
    if turn.answer_is is not None:
        assert text == turn.answer_is
    assert await titles(database) == list(turn.tasks_after)
    return result


RENAME = "Rename 'call grandma' to 'call grandma on Sunday'."
CLAIMED_RENAME = "I've renamed 'call grandma' to 'call grandma on Sunday'."

TURNS = [
    # --- a claim with nothing behind it: the model's words stay, after them what happened ---
    pytest.param(
        Turn(
            tasks_before=("call grandma",),
            asked="Rename my task 'call grandma' to 'call grandma on Sunday'.",
            model_does=(answer_with(CLAIMED_RENAME),),
            status="incomplete",
            answer_says=(
                "Not done: nothing was renamed in this turn: no tool was called.",
                CLAIMED_RENAME,
            ),
            tasks_after=("call grandma",),
        ),
        id="a-rename-claimed-with-no-tool-called",
    ),
    pytest.param(
        Turn(
            tasks_before=("call grandma",),
            asked="Delete 'call grandma'.",
            model_does=(
                act(tool_call("list_tasks")),
                answer_with("'call grandma' has been deleted from your tasks."),
            ),
            status="incomplete",
            answer_says=(
                "nothing was deleted in this turn: the only tools called change nothing"
                " (list_tasks)",
            ),
            tasks_after=("call grandma",),
        ),
        id="a-claim-after-only-a-listing-names-the-listing",
    ),
    pytest.param(
        Turn(
            asked="Add 'slides' and 'handouts' to my tasks.",
            model_does=(
                answer_with("Sure, I'll create the tasks for you:\n1. slides\n2. handouts"),
            ),
            status="incomplete",
            answer_says=("nothing was created in this turn: no tool was called",),
            tasks_after=(),
        ),
        id="a-promise-in-the-final-answer-with-nothing-done",
    ),
    pytest.param(
        Turn(
            asked=RENAME,
            model_does=(
                plan_items({"title": "rename call grandma"}),
                close_row(0, outcome="Renamed 'call grandma' to 'call grandma on Sunday'."),
                answer_with("All set."),
            ),
            status="incomplete",
            answer_says=("nothing was renamed in this turn",),
            tasks_after=(),
        ),
        id="a-completed-row-whose-outcome-claims-a-change-nothing-made",
    ),
    # --- a failed attempt left as it was: the answer names the error ---
    pytest.param(
        Turn(
            tasks_before=("renew the lease",),
            asked="Please remove the Dan meeting task.",
            model_does=(
                act(tool_call("delete_task", task_identifier="Dan meeting")),
                answer_with("I've added 'Dan meeting' to your tasks."),
            ),
            status="incomplete",
            answer_says=("- delete_task: NOT_FOUND: No task found matching 'Dan meeting'.",),
            tasks_after=("renew the lease",),
        ),
        id="a-failed-change-followed-by-a-false-claim",
    ),
    pytest.param(
        Turn(
            tasks_before=("buy milk",),
            asked="Leave 'buy milk' as it is and add 'buy butter'.",
            model_does=(
                act(
                    tool_call("add_task", new_title="buy butter"),
                    tool_call("update_task", task_identifier="buy milk", new_description=""),
                ),
                answer_with("To complete the task, please provide a title."),
            ),
            status="incomplete",
            answer_says=("- add_task: VALIDATION_ERROR",),
            tasks_after=("buy milk",),
        ),
        id="a-failed-add-is-not-made-good-by-another-tools-change",
    ),
    pytest.param(
        Turn(
            tasks_before=("buy milk",),
            asked="Mark 'buy eggs' and 'buy milk' as done.",
            model_does=(
                plan_items({"title": "complete buy eggs"}, {"title": "complete buy milk"}),
                act(tool_call("complete_task", task_identifier="buy eggs")),
                close_row(0, outcome="Marked 'buy eggs' as done."),
                act(tool_call("complete_task", task_identifier="buy milk")),
                close_row(1, outcome="Marked 'buy milk' as done."),
                answer_with("Both are marked as done."),
            ),
            status="incomplete",
            answer_says=(
                "- complete_task: for 'complete buy eggs', closed as completed: NOT_FOUND",
                "Both are marked as done.",
            ),
            tasks_after=("buy milk",),
        ),
        id="a-row-closed-as-completed-on-its-own-failed-call-is-not-made-good-by-another-row",
    ),
    # --- true answers stay answered ---
    pytest.param(
        Turn(
            asked="Add 'buy milk'.",
            model_does=(
                act(tool_call("add_task", title="buy milk")),
                answer_with("I've added it."),
            ),
            status="answered",
            answer_is="I've added it.",
            tasks_after=("buy milk",),
        ),
        id="a-change-that-was-made-keeps-its-answer-word-for-word",
    ),
    pytest.param(
        Turn(
            asked="Add 'buy milk'.",
            model_does=(
                act(tool_call("add_task", new_title="buy milk")),
                act(tool_call("add_task", title="buy milk")),
                answer_with("I've added 'buy milk' to your tasks."),
            ),
            status="answered",
            tasks_after=("buy milk",),
        ),
        id="a-failed-call-retried-with-success",
    ),
    pytest.param(
        Turn(
            asked="Add 'buy milk' and 'buy eggs'.",
            model_does=(
                plan_items({"title": "add buy milk"}, {"title": "add buy eggs"}),
                act(tool_call("add_task", new_title="buy milk")),
                act(tool_call("add_task", title="buy milk")),
                close_row(0, outcome="Added 'buy milk'."),
                act(tool_call("add_task", title="buy eggs")),
                close_row(1, outcome="Added 'buy eggs'."),
                answer_with("Both are on your list."),
            ),
            status="answered",
            answer_is="Both are on your list.",
            tasks_after=("buy milk", "buy eggs"),
        ),
        id="a-row-whose-failed-call-it-retried-with-success-stays-answered",
    ),
    pytest.param(
        Turn(
            tasks_before=("call grandma",),
            asked=RENAME,
            model_does=(
                act(tool_call("rename_task", title="call grandma on Sunday")),
                act(
                    tool_call(
                        "update_task",
                        task_identifier="call grandma",
                        new_title="call grandma on Sunday",
                    )
                ),
                answer_with("I've renamed it."),
            ),
            status="answered",
            tasks_after=("call grandma on Sunday",),
        ),
        id="a-missing-tool-then-the-right-one",
    ),
]


@pytest.mark.parametrize("turn", TURNS)
async def test_a_turn_ends_answered_only_on_what_its_tools_really_did(
    face: Face, database: Database, turn: Turn
) -> None:
    await play(face, database, turn)


async def test_a_call_to_a_tool_the_run_lacks_gets_a_clear_error_and_cannot_end_answered(
    face: Face, database: Database
) -> None:
    turn = Turn(
        tasks_before=("call grandma",),
        asked=RENAME,
        model_does=(
            act(tool_call("rename_task", title="call grandma on Sunday")),
            answer_with("Sorry, that did not work."),
        ),
        status="incomplete",
        answer_says=("Not done: these calls failed or were never run", "- rename_task: "),
        tasks_after=("call grandma",),
    )
    result = await play(face, database, turn)

    error = next(m for m in result["messages"] if isinstance(m, ToolMessage))
    assert error.status == "error"
    # the graph's own words, or LangGraph's ToolNode's under create_agent: both name the tools
    assert "no tool 'rename_task'" in str(error.content) or (
        "rename_task is not a valid tool" in str(error.content)
    )
    assert "update_task" in str(error.content)


async def test_questions_and_listings_without_a_change_end_answered(
    face: Face, database: Database
) -> None:
    await seed(database, "buy milk")
    agent = task_agent(
        face,
        database,
        answer_with("12 times 12 is 144."),
        act(tool_call("list_tasks")),
        answer_with("Here are your tasks:\n- buy milk (not completed yet)"),
    )
    question = await face.run(agent, "What is 12 times 12?", thread="q")
    listing = await face.run(agent, "What's on my list?", thread="l")

    assert question["turnStatus"] == "answered"
    assert listing["turnStatus"] == "answered"
    assert final_text(listing) == "Here are your tasks:\n- buy milk (not completed yet)"


async def test_a_users_own_tool_backs_a_claim(face: Face, database: Database) -> None:
    model = scripted_turn(
        database,
        act(tool_call("record", note="milk")),
        answer_with("I've added the note."),
    )
    result = await face.run(face.build(model, database, [record]), "note milk")

    assert result["turnStatus"] == "answered"
    assert final_text(result) == "I've added the note."


async def test_a_change_in_an_earlier_turn_does_not_back_a_claim_in_this_one(
    face: Face, database: Database
) -> None:
    agent = task_agent(
        face,
        database,
        act(tool_call("add_task", title="dentist")),
        answer_with("I've added 'dentist' to your tasks."),
        answer_with("I've updated 'dentist' to 'book the dentist appointment'."),
    )
    first = await face.run(agent, "Add 'dentist'.")
    second = await face.run(agent, "Rename it to 'book the dentist appointment'.")

    assert first["turnStatus"] == "answered"
    assert second["turnStatus"] == "incomplete"
    assert "nothing was updated in this turn: no tool was called" in final_text(second)
    assert await titles(database) == ["dentist"]
