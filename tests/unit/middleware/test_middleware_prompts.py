"""A ``create_agent`` user replaces turnplan's prompts as a ``build_graph`` user does:
``TurnPlanMiddleware(prompts_dir=...)``, file by file over the shipped ones, checked when the
middleware is made; two agents with different folders running at once never mix them."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from agent.middleware import TurnPlanMiddleware
from prompts import PromptFolderError
from storage import Database
from tests.fakes import (
    ScriptedChatModel,
    act,
    answer_with,
    close_row,
    plan_items,
    record,
    scripted_turn,
    tool_call,
)

REMINDER = "$open_count left ($open_titles): go on with $current_title ($current_id)."


def folder_with(tmp_path: Path, name: str, **files: str) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    for prompt, text in files.items():
        (folder / f"{prompt}.md").write_text(text)
    return folder


def reminded_turn(database: Database) -> ScriptedChatModel:
    """Plans one note, answers too early (the drain sends the reminder), then does it."""
    return scripted_turn(
        database,
        plan_items({"title": "Note milk"}),
        answer_with("All done."),
        act(tool_call("record", note="milk")),
        close_row(outcome="noted"),
        answer_with("Noted."),
    )


async def run_agent(model: ScriptedChatModel, middleware: TurnPlanMiddleware) -> dict[str, Any]:
    agent = create_agent(model, [record], middleware=[middleware], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    result: dict[str, Any] = await agent.ainvoke({"messages": [HumanMessage("note milk")]}, config)
    return result


def reminders(model: ScriptedChatModel) -> list[str]:
    """What the model was told between its calls (the drain's reminder among them)."""
    return [
        str(message.content)
        for prompt in model.prompts
        for message in prompt
        if isinstance(message, HumanMessage) and message.content != "note milk"
    ]


async def test_the_middlewares_folder_is_what_its_model_is_sent(
    database: Database, tmp_path: Path, recorded_notes: list[str]
) -> None:
    folder = folder_with(
        tmp_path, "acme", supervisor="You are Acme's planner.", reminder="Acme: " + REMINDER
    )
    model = reminded_turn(database)

    result = await run_agent(model, TurnPlanMiddleware(database, prompts_dir=folder))

    assert result["turnStatus"] == "answered"
    assert recorded_notes == ["milk"]
    system = model.system_prompt(0)
    assert system.startswith("You are Acme's planner.")
    assert "You are turnplan" not in system
    assert any(text.startswith("Acme: 1 left") for text in reminders(model))


async def test_two_agents_with_their_own_folders_running_at_once_keep_their_own(
    database: Database, tmp_path: Path, recorded_notes: list[str]
) -> None:
    other_database = Database(f"sqlite+aiosqlite:///{tmp_path / 'other.db'}")
    acme = folder_with(tmp_path, "acme", supervisor="Acme.", reminder="Acme: " + REMINDER)
    globex = folder_with(tmp_path, "globex", supervisor="Globex.", reminder="Globex: " + REMINDER)
    acme_model, globex_model = reminded_turn(database), reminded_turn(other_database)

    try:
        await asyncio.gather(
            run_agent(acme_model, TurnPlanMiddleware(database, prompts_dir=acme)),
            run_agent(globex_model, TurnPlanMiddleware(other_database, prompts_dir=globex)),
        )
    finally:
        await other_database.dispose()

    for model, name in ((acme_model, "Acme"), (globex_model, "Globex")):
        assert all(model.system_prompt(call).startswith(f"{name}.") for call in range(model.calls))
        assert any(text.startswith(f"{name}: 1 left") for text in reminders(model))


def test_a_folder_the_code_cannot_fill_in_fails_when_the_middleware_is_made(
    database: Database, tmp_path: Path
) -> None:
    folder = folder_with(tmp_path, "broken", reminder="Go on with $current_title, $who.")

    with pytest.raises(PromptFolderError, match=r"reminder\.md has unknown placeholder"):
        TurnPlanMiddleware(database, prompts_dir=folder)
