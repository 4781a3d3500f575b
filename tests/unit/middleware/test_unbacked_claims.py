"""A turn never ends ``answered`` on a change nothing made (issue 40 §4,
``agent.turn.claim_check``), on both faces: the supervisor graph and ``TurnPlanMiddleware``.

The model here is scripted with the shapes the packaged Qwen models were seen to reply with
(bench/RESULTS.md, issue 40): a claim with no tool called, a claim after a failed call, a
claim after a listing, a promise, a call to a tool the run does not have."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, ToolMessage

from agent.tools.personal_tasks import build_task_tools
from storage import Database
from storage.repositories import TaskRepository
from tests.fakes import (
    ScriptedChatModel,
    act,
    ai,
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


# --- a claim with nothing behind it ------------------------------------------------------------


async def test_a_rename_claimed_with_no_tool_called_ends_incomplete_saying_so(
    face: Face, database: Database
) -> None:
    await seed(database, "call grandma")
    claim = "I've renamed 'call grandma' to 'call grandma on Sunday'."
    model = ScriptedChatModel(script=[AIMessage(content=claim)])
    agent = face.build(model, database, build_task_tools(database))
    result = await face.run(agent, "Rename my task 'call grandma' to 'call grandma on Sunday'.")

    assert result["turnStatus"] == "incomplete"
    text = final_text(result)
    assert "Not done: nothing was renamed in this turn: no tool was called." in text
    assert claim in text  # the model's words stay, after them what really happened
    assert await titles(database) == ["call grandma"]


async def test_a_claim_after_only_a_listing_ends_incomplete_naming_the_listing(
    face: Face, database: Database
) -> None:
    await seed(database, "call grandma")
    model = ScriptedChatModel(
        script=[
            ai(tool_call("list_tasks")),
            AIMessage(content="'call grandma' has been deleted from your tasks."),
        ]
    )
    agent = face.build(model, database, build_task_tools(database))
    result = await face.run(agent, "Delete 'call grandma'.")

    assert result["turnStatus"] == "incomplete"
    assert (
        "nothing was deleted in this turn: the only tools called change nothing (list_tasks)"
        in final_text(result)
    )


async def test_a_promise_in_the_final_answer_with_nothing_done_ends_incomplete(
    face: Face, database: Database
) -> None:
    model = ScriptedChatModel(
        script=[AIMessage(content="Sure, I'll create the tasks for you:\n1. slides\n2. handouts")]
    )
    agent = face.build(model, database, build_task_tools(database))
    result = await face.run(agent, "Add 'slides' and 'handouts' to my tasks.")

    assert result["turnStatus"] == "incomplete"
    assert "nothing was created in this turn: no tool was called" in final_text(result)
    assert await titles(database) == []


async def test_a_completed_row_whose_outcome_claims_a_change_nothing_made_ends_incomplete(
    face: Face, database: Database
) -> None:
    model = scripted_turn(
        database,
        plan_items({"title": "rename call grandma"}),
        close_row(0, outcome="Renamed 'call grandma' to 'call grandma on Sunday'."),
        answer_with("All set."),
    )
    agent = face.build(model, database, build_task_tools(database))
    result = await face.run(agent, "Rename 'call grandma' to 'call grandma on Sunday'.")

    assert result["turnStatus"] == "incomplete"
    assert "nothing was renamed in this turn" in final_text(result)


# --- a failed attempt left as it was -----------------------------------------------------------


async def test_a_failed_change_followed_by_a_false_claim_ends_incomplete_with_the_error(
    face: Face, database: Database
) -> None:
    await seed(database, "renew the lease")
    model = ScriptedChatModel(
        script=[
            ai(tool_call("delete_task", task_identifier="Dan meeting")),
            AIMessage(content="I've added 'Dan meeting' to your tasks."),
        ]
    )
    agent = face.build(model, database, build_task_tools(database))
    result = await face.run(agent, "Please remove the Dan meeting task.")

    assert result["turnStatus"] == "incomplete"
    text = final_text(result)
    assert "- delete_task: NOT_FOUND: No task found matching 'Dan meeting'." in text
    assert await titles(database) == ["renew the lease"]


async def test_a_call_to_a_tool_the_run_lacks_gets_a_clear_error_and_cannot_end_answered(
    face: Face, database: Database
) -> None:
    await seed(database, "call grandma")
    model = ScriptedChatModel(
        script=[
            ai(tool_call("rename_task", title="call grandma on Sunday")),
            AIMessage(content="Sorry, that did not work."),
        ]
    )
    agent = face.build(model, database, build_task_tools(database))
    result = await face.run(agent, "Rename 'call grandma' to 'call grandma on Sunday'.")

    error = next(m for m in result["messages"] if isinstance(m, ToolMessage))
    assert error.status == "error"
    # the graph's own words, or LangGraph's ToolNode's under create_agent: both name the tools
    assert "no tool 'rename_task'" in str(error.content) or (
        "rename_task is not a valid tool" in str(error.content)
    )
    assert "update_task" in str(error.content)
    assert result["turnStatus"] == "incomplete"
    assert "Not done: these calls failed or were never run" in final_text(result)
    assert "- rename_task: " in final_text(result)


async def test_a_failed_add_is_not_made_good_by_another_tools_change(
    face: Face, database: Database
) -> None:
    await seed(database, "buy milk")
    model = ScriptedChatModel(
        script=[
            ai(
                tool_call("add_task", new_title="buy butter"),
                tool_call("update_task", task_identifier="buy milk", new_description=""),
            ),
            AIMessage(content="To complete the task, please provide a title."),
        ]
    )
    agent = face.build(model, database, build_task_tools(database))
    result = await face.run(agent, "Leave 'buy milk' as it is and add 'buy butter'.")

    assert result["turnStatus"] == "incomplete"
    assert "- add_task: VALIDATION_ERROR" in final_text(result)


# --- true answers stay answered ----------------------------------------------------------------


async def test_a_change_that_was_made_keeps_its_answer_answered_word_for_word(
    face: Face, database: Database
) -> None:
    model = ScriptedChatModel(
        script=[ai(tool_call("add_task", title="buy milk")), AIMessage(content="I've added it.")]
    )
    agent = face.build(model, database, build_task_tools(database))
    result = await face.run(agent, "Add 'buy milk'.")

    assert result["turnStatus"] == "answered"
    assert final_text(result) == "I've added it."


async def test_a_failed_call_retried_with_success_ends_answered(
    face: Face, database: Database
) -> None:
    model = ScriptedChatModel(
        script=[
            ai(tool_call("add_task", new_title="buy milk")),
            ai(tool_call("add_task", title="buy milk")),
            AIMessage(content="I've added 'buy milk' to your tasks."),
        ]
    )
    agent = face.build(model, database, build_task_tools(database))
    result = await face.run(agent, "Add 'buy milk'.")

    assert result["turnStatus"] == "answered"
    assert await titles(database) == ["buy milk"]


async def test_a_missing_tool_then_the_right_one_ends_answered(
    face: Face, database: Database
) -> None:
    await seed(database, "call grandma")
    model = ScriptedChatModel(
        script=[
            ai(tool_call("rename_task", title="call grandma on Sunday")),
            ai(
                tool_call(
                    "update_task",
                    task_identifier="call grandma",
                    new_title="call grandma on Sunday",
                )
            ),
            AIMessage(content="I've renamed it."),
        ]
    )
    agent = face.build(model, database, build_task_tools(database))
    result = await face.run(agent, "Rename 'call grandma' to 'call grandma on Sunday'.")

    assert result["turnStatus"] == "answered"
    assert await titles(database) == ["call grandma on Sunday"]


async def test_questions_and_listings_without_a_change_end_answered(
    face: Face, database: Database
) -> None:
    await seed(database, "buy milk")
    model = ScriptedChatModel(
        script=[
            AIMessage(content="12 times 12 is 144."),
            ai(tool_call("list_tasks")),
            AIMessage(content="Here are your tasks:\n- buy milk (not completed yet)"),
        ]
    )
    agent = face.build(model, database, build_task_tools(database))
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
    model = ScriptedChatModel(
        script=[
            ai(tool_call("add_task", title="dentist")),
            AIMessage(content="I've added 'dentist' to your tasks."),
            AIMessage(content="I've updated 'dentist' to 'book the dentist appointment'."),
        ]
    )
    agent = face.build(model, database, build_task_tools(database))
    first = await face.run(agent, "Add 'dentist'.")
    second = await face.run(agent, "Rename it to 'book the dentist appointment'.")

    assert first["turnStatus"] == "answered"
    assert second["turnStatus"] == "incomplete"
    assert "nothing was updated in this turn: no tool was called" in final_text(second)
    assert await titles(database) == ["dentist"]
