"""``turnplan run`` end to end through ChatOpenAI against the scripted HTTP model."""

from __future__ import annotations

import asyncio
import io
import json
import sys
from pathlib import Path

import pytest

from agent.app.cli import main
from agent.llm.chat_models import clear_model_cache
from storage import Database
from storage.repositories.tasks import TaskRepository
from tests.http_asking import (
    OPTIONS,
    approval_aware_model,
    asking_model,
    gives_up_on_a_missing_task,
)
from tests.http_oracle import HttpPlanOracle
from tests.scripted_openai import ScriptedOpenAIServer, server_error, text


@pytest.fixture(autouse=True)
def _fresh_clients() -> None:
    clear_model_cache()


def test_run_prints_the_plan_and_exits_zero(
    scripted_openai: ScriptedOpenAIServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", scripted_openai.base_url)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    scripted_openai.respond_with(
        HttpPlanOracle(["Add milk", "Add eggs"], lambda t: ("add_task", {"title": t[4:]}))
    )
    status = main(
        [
            "run",
            "--model",
            "openai:scripted",
            "--database",
            f"sqlite+aiosqlite:///{tmp_path / 'cli.db'}",
            "--plan",
            "always",
            "Add milk and eggs",
        ]
    )
    out = capsys.readouterr().out
    assert status == 0
    assert "✓ completed Add milk — did Add milk" in out
    assert "All done." in out
    assert "turn answered · 4 LLM call(s) in 4 step(s) · 0 plan item(s) left open" in out
    assert scripted_openai.requests[0]["tool_choice"]["function"]["name"] == "create_todo"


def test_run_with_planning_off_sends_no_plan_tools(
    scripted_openai: ScriptedOpenAIServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", scripted_openai.base_url)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    scripted_openai.reply(text("Nothing to plan."))
    database = f"sqlite+aiosqlite:///{tmp_path / 'cli.db'}"

    status = main(
        ["run", "--model", "openai:scripted", "--database", database, "--plan", "off", "hi"]
    )

    assert status == 0
    assert "Nothing to plan." in capsys.readouterr().out
    offered = {tool["function"]["name"] for tool in scripted_openai.requests[0].get("tools", [])}
    assert offered.isdisjoint({"create_todo", "complete_todo", "list_todo"})
    assert "add_task" in offered


def test_two_runs_in_one_process_each_get_a_working_model(
    scripted_openai: ScriptedOpenAIServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Each ``main()`` runs its own event loop; a model client must not outlive the first."""
    monkeypatch.setenv("OPENAI_BASE_URL", scripted_openai.base_url)
    scripted_openai.reply(text("first"), text("second"))
    database = f"sqlite+aiosqlite:///{tmp_path / 'cli.db'}"
    for request in ("one", "two"):
        assert main(["run", "--model", "openai:scripted", "--database", database, request]) == 0
    out = capsys.readouterr().out
    assert "answer:\nfirst" in out and "answer:\nsecond" in out


def test_run_exits_one_when_the_model_fails(
    scripted_openai: ScriptedOpenAIServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", scripted_openai.base_url)
    scripted_openai.reply(*[server_error(500)] * 5)
    status = main(
        [
            "run",
            "--model",
            "openai:scripted",
            "--database",
            f"sqlite+aiosqlite:///{tmp_path / 'cli.db'}",
            "hello",
        ]
    )
    out = capsys.readouterr().out
    assert status == 1
    assert "I could not finish this request: the language model failed" in out
    assert "turn failed" in out


def test_run_exits_seven_when_an_item_was_cancelled_because_it_failed(
    scripted_openai: ScriptedOpenAIServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", scripted_openai.base_url)
    scripted_openai.respond_with(gives_up_on_a_missing_task)
    database = f"sqlite+aiosqlite:///{tmp_path / 'cli.db'}"

    status = main(["run", "--model", "openai:scripted", "--database", database, "tick off ghost"])

    captured = capsys.readouterr()
    assert status == 7
    assert "✗ cancelled Complete ghost — No task found matching 'ghost'." in captured.out
    assert "- Complete ghost: No task found matching 'ghost'." in captured.out  # the answer
    assert "turn incomplete" in captured.out
    assert "turnplan run: turn incomplete (exit 7): part of the request was not done" in (
        captured.err
    )


def test_run_without_a_usable_model_setting_explains_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    status = main(
        [
            "run",
            "--model",
            "nosuch:model",
            "--database",
            f"sqlite+aiosqlite:///{tmp_path / 'cli.db'}",
            "hello",
        ]
    )
    assert status == 1
    assert "Accepted forms" in capsys.readouterr().out


def test_run_with_a_provider_package_missing_names_the_install_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The turn ends at its first model call with one line saying what to install: no request
    is sent and no traceback is printed."""
    monkeypatch.setitem(sys.modules, "langchain_google_genai", None)  # import fails as if absent
    status = main(
        [
            "run",
            "--model",
            "google_genai:gemini-2.5-flash",
            "--database",
            f"sqlite+aiosqlite:///{tmp_path / 'cli.db'}",
            "hello",
        ]
    )
    captured = capsys.readouterr()
    assert status == 1
    assert "needs the package langchain-google-genai" in captured.out
    assert "pip install langchain-google-genai" in captured.out
    assert "Traceback" not in captured.out + captured.err


def test_run_with_the_conversation_toolset_binds_it_and_writes_the_task_file(
    scripted_openai: ScriptedOpenAIServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", scripted_openai.base_url)
    scripted_openai.respond_with(
        HttpPlanOracle(["Add milk"], lambda t: ("AddTask", {"title": t[4:]}))
    )
    status = main(
        [
            "run",
            "--model",
            "openai:scripted",
            "--database",
            f"sqlite+aiosqlite:///{tmp_path / 'cli.db'}",
            "--toolset",
            "conversation_tasks",
            "--conversation",
            "kitchen",
            "Add milk to our list",
        ]
    )
    assert status == 0
    bound = {tool["function"]["name"] for tool in scripted_openai.requests[0]["tools"]}
    assert {"AddTask", "ListTasks"} <= bound and "add_task" not in bound
    tasks = json.loads((tmp_path / ".agents" / "tasks" / "kitchen.json").read_text())["tasks"]
    assert [task["title"] for task in tasks] == ["milk"]

    with pytest.raises(SystemExit) as refused:
        main(["run", "--toolset", "calendar", "anything"])
    assert refused.value.code == 2
    assert "invalid choice: 'calendar'" in capsys.readouterr().err


async def _two_call_tasks(database_url: str) -> None:
    database = Database(database_url)
    await database.create_schema()
    async with database.session() as session:
        for title in OPTIONS:
            await TaskRepository(session, "local-user").add(title, "")
    await database.dispose()


def _done(database_url: str) -> dict[str, bool]:
    async def read() -> dict[str, bool]:
        database = Database(database_url)
        async with database.session() as session:
            tasks = await TaskRepository(session, "local-user").find()
        await database.dispose()
        return {task.title: task.completed for task in tasks}

    return asyncio.run(read())


@pytest.fixture
def asking_cli(
    scripted_openai: ScriptedOpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> str:
    """A database with the two "call" tasks, and a model that asks which one is meant: the
    terminal question's setting. Returns the database URL."""
    monkeypatch.setenv("OPENAI_BASE_URL", scripted_openai.base_url)
    scripted_openai.respond_with(asking_model)
    database = f"sqlite+aiosqlite:///{tmp_path / 'cli.db'}"
    asyncio.run(_two_call_tasks(database))
    return database


def test_a_question_is_asked_in_the_terminal_and_a_number_picks_an_option(
    asking_cli: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    database = asking_cli
    monkeypatch.setattr("sys.stdin", io.StringIO("2\n"))

    status = main(["run", "--model", "openai:scripted", "--database", database, "call task"])

    out = capsys.readouterr().out
    assert status == 0
    assert "? Which call task?\n  1. call mom\n  2. call dad\n> " in out
    assert "turn answered" in out
    assert _done(database) == {"call mom": False, "call dad": True}


def test_with_no_answer_the_turn_stays_paused_and_the_next_message_answers_it(
    asking_cli: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    database = asking_cli
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    base = ["run", "--model", "openai:scripted", "--database", database, "--thread", "t-ask"]

    assert main([*base, "call task"]) == 6  # not an answer yet: a script must not take it for one
    paused = capsys.readouterr()
    assert (
        "turn paused: it waits for your answer. Answer with turnplan run --thread t-ask"
        in paused.out
    )
    assert "turnplan run: turn paused (exit 6): the turn waits for your answer" in paused.err
    assert _done(database) == {"call mom": False, "call dad": False}

    assert main([*base, "call mom"]) == 0
    assert "turn answered" in capsys.readouterr().out
    assert _done(database) == {"call mom": True, "call dad": False}


def _run_with_approval(
    server: ScriptedOpenAIServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    reply: str,
) -> tuple[int, str, str]:
    """``turnplan run --approve-plan`` with ``reply`` typed at the prompt: status, output and
    database URL."""
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    server.respond_with(approval_aware_model)
    database = f"sqlite+aiosqlite:///{tmp_path / 'cli.db'}"
    monkeypatch.setattr("sys.stdin", io.StringIO(reply))
    status = main(
        ["run", "--model", "openai:scripted", "--database", database, "--approve-plan", "two"]
    )
    return status, capsys.readouterr().out, database


def test_approve_plan_shows_the_plan_and_a_yes_lets_it_run(
    scripted_openai: ScriptedOpenAIServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    status, out, database = _run_with_approval(
        scripted_openai, tmp_path, monkeypatch, capsys, "yes\n"
    )
    assert status == 0
    assert "? Approve this plan? (yes, or say why not)\n  1. Add bread\n  2. Add milk\n" in out
    assert "turn answered" in out
    assert sorted(_done(database)) == ["bread", "milk"]


def test_any_other_reply_rejects_the_plan_with_it_as_the_reason(
    scripted_openai: ScriptedOpenAIServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    status, out, database = _run_with_approval(
        scripted_openai, tmp_path, monkeypatch, capsys, "not now\n"
    )
    assert status == 0
    assert "✗ cancelled Add bread — Rejected by the user: not now" in out
    assert _done(database) == {}
