"""The compact profile is a plug-in (issue 42): it owns its verbs, lookups and planned actions.

A deployment that never uses it (a capable model on the full profile) neither loads it nor
carries any of its knowledge on the shared tools, and loses nothing: the turn plans, acts and
answers as before. The compact profile still plans by its own registry of the shared tools.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path

from langchain_core.tools import BaseTool

from agent.tool_names import IN_ORDER_METADATA
from agent.tools.continue_plan import build_continue_tool
from agent.tools.conversation_tasks import build_conversation_task_tools
from agent.tools.delegate import delegation_tools
from agent.tools.personal_tasks import build_task_tools
from agent.tools.task_worker import build_task_worker
from agent.workers.registry import WorkerRegistry
from storage import Database

REPO = Path(__file__).resolve().parents[3]

FULL_PROFILE_TURN = textwrap.dedent(
    """
    import asyncio, json, sys

    from langchain_core.messages import HumanMessage

    from agent.graph import build_graph
    from sqlalchemy import select

    from storage import Database
    from storage.models import Task
    from tests.fakes import act, answer_with, close_row, plan_items, scripted_turn, tool_call


    async def main(path):
        database = Database(f"sqlite+aiosqlite:///{path}")
        model = scripted_turn(
            database,
            plan_items({"title": "add buy milk"}),
            act(tool_call("add_task", title="buy milk")),
            close_row(0, "added buy milk"),
            answer_with("Added 'buy milk'."),
        )
        graph = build_graph(model, database=database)
        result = await graph.ainvoke(
            {"messages": [HumanMessage(content="add 'buy milk' to my tasks")]}
        )
        async with database.session(readonly=True) as session:
            titles = [task.title for task in await session.scalars(select(Task))]
        await database.dispose()
        loaded = sorted(
            name for name in sys.modules
            if name.startswith(("agent.prompting.compact", "agent.prompting.request_steps"))
        )
        print(json.dumps({
            "status": result["turnStatus"],
            "answer": str(result["messages"][-1].content),
            "titles": titles,
            "loaded": loaded,
        }))


    asyncio.run(main(sys.argv[1]))
    """
)


def test_a_full_profile_turn_never_loads_the_compact_profile_and_still_does_the_request(
    tmp_path: Path,
) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", FULL_PROFILE_TURN, str(tmp_path / "turnplan.db")],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])

    assert report["status"] == "answered"
    assert report["answer"] == "Added 'buy milk'."
    assert report["titles"] == ["buy milk"]
    assert report["loaded"] == []


def _metadata_keys(tools: Sequence[BaseTool]) -> set[str]:
    return {key for tool in tools for key in (tool.metadata or {})}


async def test_the_shared_tools_carry_no_compact_knowledge(
    database: Database, tmp_path: Path
) -> None:
    registry = WorkerRegistry([build_task_worker("local", database)])
    tools = [
        *build_task_tools(database),
        *build_conversation_task_tools(tmp_path),
        build_continue_tool(database),
    ]

    # Only what every profile uses: the tools' calls run in the order they were written.
    assert _metadata_keys(tools) == {IN_ORDER_METADATA}
    [delegate] = delegation_tools(registry, database)
    held = delegate.metadata["turnplan_worker_tools"]
    # delegate names its workers' tools and who holds them; no verbs, lookups or subjects.
    assert held["add_task"]["agentType"] == "tasks"
    assert set(held["add_task"]) == {"agentType", "description", "metadata"}
    assert held["add_task"]["metadata"] == {IN_ORDER_METADATA: True}


def test_the_compact_registry_knows_every_shared_task_tool_by_name(
    database: Database, tmp_path: Path
) -> None:
    from agent.prompting.compact_verbs import tool_entry

    tools = [*build_task_tools(database), *build_conversation_task_tools(tmp_path)]
    entries = {tool.name: tool_entry(tool) for tool in tools}

    assert all(entry.verbs for entry in entries.values())
    assert entries["complete_task"].lookup == "list_tasks"
    assert entries["CompleteTask"].lookup == "ListTasks"
    assert entries["add_task"].lookup is None
    assert "add" in entries["AddTask"].verbs


# --- planned actions are typed fields ---------------------------------------------------------


def test_a_planned_action_is_read_back_as_the_fields_it_was_stored_with() -> None:
    from agent.prompting.compact_plan import PlannedAction, stored_action

    action = PlannedAction("add_task", 'the "big" report', "add 'the \"big\" report'\nplease")

    assert stored_action(action.as_context()) == action


def test_text_that_reads_like_an_order_is_never_a_planned_action() -> None:
    from agent.prompting.compact_plan import stored_action

    # The sentence earlier versions stored, a model's note, or fields of the wrong type: none
    # of it makes the harness act (issue 40: stored text is never an order).
    assert stored_action("use delete_task on \"keep-1\" (from: delete 'keep-1')") is None
    assert stored_action("delete keep-1 next") is None
    assert (
        stored_action('{"plannedAction": {"tool": "delete_task", "target": 1, "clause": ""}}')
        is None
    )
    assert stored_action('{"plannedAction": {"tool": "delete_task"}}') is None


def test_a_worker_reads_the_action_only_from_its_hand_over_context_line(database: Database) -> None:
    from langchain_core.messages import HumanMessage

    from agent.prompting.compact_plan import PlannedAction
    from agent.prompting.compact_worker import worker_step

    tools = build_task_tools(database)
    action = PlannedAction("add_task", "buy milk", "add 'buy milk'").as_context()
    handed = HumanMessage(f"Step: buy milk\nContext: {action}\nDone when: \n")
    quoted = HumanMessage(f"Step: buy milk\nContext: \n\nthe user's request was:\n{action}\n")

    reply = worker_step(tools, [handed])
    assert reply is not None
    assert [(call["name"], call["args"]) for call in reply.tool_calls] == [
        ("add_task", {"title": "buy milk"})
    ]
    assert worker_step(tools, [quoted]) is None
