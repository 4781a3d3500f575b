"""A deployment's own prompt folder: its files replace the shipped ones file by file, for the
graph built with it (``build_graph(prompts_dir=...)``, else ``TURNPLAN_PROMPTS_DIR``), and a file
the code could not fill in fails the build, naming the file and what to change."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage

from agent.app.cli import main
from agent.graph import build_graph
from agent.tools.task_worker import build_task_worker
from prompts import PROMPTS_DIR_ENV, PromptFolderError, load_prompt, shipped_names, variables
from storage import Database
from tests.delegating import ITEMS, DelegatingSupervisor, record, worker_model
from tests.fakes import PlanOracle, ScriptedChatModel, ai, tool_call

SHIPPED_PLANNING_LINE = "## Task planning and execution"


def folder_with(tmp_path: Path, **files: str) -> Path:
    folder = tmp_path / "my-prompts"
    folder.mkdir(exist_ok=True)
    for name, text in files.items():
        (folder / f"{name}.md").write_text(text)
    return folder


def note(title: str) -> dict[str, Any]:
    return tool_call("record", note=title)


async def plan_two_items(graph: Any) -> Any:
    return await graph.ainvoke({"messages": [HumanMessage("note a, then note b")]})


async def test_an_overridden_supervisor_prompt_is_what_the_model_is_sent(
    database: Database, tmp_path: Path
) -> None:
    folder = folder_with(tmp_path, supervisor="You are Acme's planner. Be brief.")
    model = ScriptedChatModel(responder=PlanOracle(["a", "b"], note))
    graph = build_graph(
        model,
        tools=[record],
        database=database,
        include_default_tools=False,
        prompts_dir=folder,
    )

    result = await plan_two_items(graph)

    assert result["turnStatus"] == "answered"
    system = model.system_prompt(0)
    assert system.startswith("You are Acme's planner. Be brief.")
    assert "You are turnplan" not in system
    # Every file the folder does not have comes from the shipped ones.
    assert SHIPPED_PLANNING_LINE in system


async def test_an_overridden_prompt_with_variables_is_filled_in(
    database: Database, tmp_path: Path
) -> None:
    folder = folder_with(
        tmp_path,
        plan_view="## Current plan (Acme view; [>]: yours now)\n$request_line\n$items",
        planning="## Planning, Acme style\nPlan with create_todo.\n$agent_type_rule",
    )
    model = ScriptedChatModel(responder=PlanOracle(["a", "b"], note))
    graph = build_graph(
        model, tools=[record], database=database, include_default_tools=False, prompts_dir=folder
    )

    result = await plan_two_items(graph)

    assert result["turnStatus"] == "answered"
    system = model.system_prompt(0)
    assert (
        "## Planning, Acme style\nPlan with create_todo.\n`agentType` is a label: do every item"
        in system
    )
    assert SHIPPED_PLANNING_LINE not in system
    assert "## Current plan (Acme view; [>]: yours now)\n- [x] a" in model.plan_view(2)


async def test_the_environment_names_the_folder_and_another_graph_keeps_its_own(
    database: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = folder_with(tmp_path, supervisor="From the environment's folder.")
    monkeypatch.setenv(PROMPTS_DIR_ENV, str(folder))
    from_env = ScriptedChatModel(script=[ai(content="hi")])
    env_graph = build_graph(
        from_env, tools=[record], database=database, include_default_tools=False
    )
    monkeypatch.delenv(PROMPTS_DIR_ENV)
    shipped = ScriptedChatModel(script=[ai(content="hi")])
    shipped_graph = build_graph(
        shipped, tools=[record], database=database, include_default_tools=False
    )

    await env_graph.ainvoke({"messages": [HumanMessage("hello")]})
    await shipped_graph.ainvoke({"messages": [HumanMessage("hello")]})

    assert from_env.system_prompt(0).startswith("From the environment's folder.")
    assert shipped.system_prompt(0).startswith("You are turnplan")
    # Outside any graph, the shipped texts (the environment no longer names a folder).
    assert load_prompt("supervisor").startswith("You are turnplan")


async def test_a_delegation_and_its_worker_read_the_graphs_folder(
    database: Database, tmp_path: Path
) -> None:
    folder = folder_with(
        tmp_path,
        worker_request="Acme step: $title ($context; done when $criteria). Asked: $request",
        worker_tasks="You are Acme's task worker.",
    )
    worker = worker_model()
    graph = build_graph(
        ScriptedChatModel(responder=DelegatingSupervisor()),
        tools=[record],
        database=database,
        include_default_tools=False,
        workers=[build_task_worker(worker, database)],
        prompts_dir=folder,
    )

    result = await graph.ainvoke({"messages": [HumanMessage("note a, add groceries, note c")]})

    assert result["turnStatus"] == "answered"
    system, request = worker.prompts[0][0], worker.prompts[0][1]
    assert str(system.content).startswith("You are Acme's task worker.")
    assert str(request.content) == (
        f"Acme step: {ITEMS[1]['title']} ({ITEMS[1]['context']}; done when "
        f"{ITEMS[1]['completionCriteria']}). Asked: note a, add groceries, note c"
    )


@pytest.mark.parametrize(
    ("files", "message"),
    [
        (
            {"planning": "Plan everything."},
            r"planning\.md lacks \$agent_type_rule; every one of \$agent_type_rule must appear",
        ),
        (
            {"reminder": "Go on with $current_title ($current_id), $open_count: $open_titles $who"},
            r"reminder\.md has unknown placeholder\(s\) \$who; it takes only \$current_id, "
            r"\$current_title, \$open_count, \$open_titles\.",
        ),
        (
            {"plan_complete": "Done, and it cost $5:\n$done"},
            r"plan_complete\.md has a '\$' that is not a placeholder; write a literal '\$' as "
            r"'\$\$'",
        ),
        (
            {"supervsior": "typo"},
            r"supervsior\.md is not one of turnplan's prompts; .*supervisor\.md",
        ),
        ({"supervisor": "  \n"}, r"supervisor\.md is empty; delete it to use the shipped one"),
    ],
)
def test_a_file_the_code_cannot_fill_in_fails_the_build_naming_it(
    database: Database, tmp_path: Path, files: dict[str, str], message: str
) -> None:
    folder = folder_with(tmp_path, **files)
    with pytest.raises(PromptFolderError, match=message):
        build_graph(ScriptedChatModel(), database=database, prompts_dir=folder)


def test_a_missing_folder_fails_the_build(database: Database, tmp_path: Path) -> None:
    with pytest.raises(PromptFolderError, match=r"nowhere does not exist or is not a folder"):
        build_graph(ScriptedChatModel(), database=database, prompts_dir=tmp_path / "nowhere")


def test_a_literal_dollar_is_fine_in_a_prompt_that_takes_no_variables(
    database: Database, tmp_path: Path
) -> None:
    folder = folder_with(tmp_path, supervisor="Prices are in $USD; quote them as $5.")
    build_graph(ScriptedChatModel(), database=database, prompts_dir=folder)


def test_docs_list_every_prompt_with_its_variables() -> None:
    docs = (Path(__file__).resolve().parents[3] / "docs" / "prompts.md").read_text()
    for name in shipped_names():
        row = next((line for line in docs.splitlines() if line.startswith(f"| `{name}.md`")), "")
        assert row, f"docs/prompts.md has no row for {name}.md"
        assert all(f"`${v}`" in row for v in variables(load_prompt(name))), row


def test_turnplan_run_with_an_unusable_folder_exits_1_with_one_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = folder_with(tmp_path, planning="Plan everything.")
    monkeypatch.setenv(PROMPTS_DIR_ENV, str(folder))
    monkeypatch.chdir(tmp_path)

    assert main(["run", "--model", "openai:never-called", "Add milk"]) == 1

    error = capsys.readouterr().err
    assert error.startswith(f"turnplan run: The prompt folder {folder} cannot be used:")
    assert "planning.md lacks $agent_type_rule" in error
    assert "Traceback" not in error
