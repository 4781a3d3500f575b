"""The conversation task-list tools of seed 000, run through the real tools node as the
supervisor runs them, with ``conversationId`` in the graph state."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool
from langgraph.graph import END, START, StateGraph
from langgraph.prebuilt import ToolNode

from agent.state import SupervisorState
from agent.tools.conversation_tasks import (
    CONVERSATION_TASKS_PROMPT,
    CORRUPT_FILE,
    NO_CONVERSATION,
    build_conversation_task_tools,
)
from prompts import load_prompt
from storage.task_files import TASKS_DIR_ENV, TaskFiles
from tests.blocking import blocking_calls_refused
from tests.tool_harness import ToolCallSpec, run_tool_calls

TOOL_NAMES = ["ListTasks", "AddTask", "CompleteTask", "UncompleteTask", "DeleteTask"]
NOT_FOUND = {"ok": False, "error": "Task not found"}


async def run(
    base: Path, *calls: ToolCallSpec, conversation_id: str = "conv-1", **options: Any
) -> list[ToolMessage]:
    messages, _ = await run_tool_calls(
        build_conversation_task_tools(base), calls, conversation_id=conversation_id, **options
    )
    return messages


def body(message: ToolMessage) -> Any:
    assert message.status == "success", message.content
    return json.loads(str(message.content))


def failure(message: ToolMessage) -> str:
    assert message.status == "error", message.content
    return str(message.content)


async def listed(base: Path, conversation_id: str = "conv-1") -> list[dict[str, Any]]:
    (message,) = await run(base, ("ListTasks", {}), conversation_id=conversation_id)
    tasks: list[dict[str, Any]] = body(message)["tasks"]
    return tasks


def files_under(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*"))


# --- what the model sees -------------------------------------------------------------------


def test_the_five_tools_take_the_seed_arguments_and_never_a_conversation_id(
    tmp_path: Path,
) -> None:
    tools = build_conversation_task_tools(tmp_path)
    assert [t.name for t in tools] == TOOL_NAMES
    schemas = {t.name: t.tool_call_schema.model_json_schema() for t in tools}  # type: ignore[union-attr]
    assert {name: set(s.get("properties", {})) for name, s in schemas.items()} == {
        "ListTasks": set(),
        "AddTask": {"title", "description"},
        "CompleteTask": {"taskId"},
        "UncompleteTask": {"taskId"},
        "DeleteTask": {"taskId"},
    }
    assert schemas["AddTask"]["required"] == ["title"]
    assert schemas["AddTask"]["properties"]["description"]["default"] == ""
    for tool in tools:
        assert "task list" in tool.description  # the docstring tells the model what it is for


async def test_a_conversation_id_sent_by_the_model_is_ignored(tmp_path: Path) -> None:
    await run(tmp_path, ("AddTask", {"title": "Mine", "conversationId": "someone-else"}))
    assert [t["title"] for t in await listed(tmp_path)] == ["Mine"]
    assert await listed(tmp_path, "someone-else") == []


# --- the seed's behaviour and results ------------------------------------------------------


async def test_the_seed_flow_returns_the_seed_json(tmp_path: Path) -> None:
    messages = await run(
        tmp_path,
        ("ListTasks", {}),
        ("AddTask", {"title": "  Implement API  ", "description": "Add GET /api/items"}),
        ("AddTask", {"title": "Add tests"}),
        ("CompleteTask", {"taskId": "1"}),
        ("CompleteTask", {"taskId": "9"}),
        ("UncompleteTask", {"taskId": "1"}),
        ("UncompleteTask", {"taskId": "9"}),
        ("DeleteTask", {"taskId": "2"}),
        ("DeleteTask", {"taskId": "2"}),
        ("ListTasks", {}),
    )
    assert body(messages[0]) == {"tasks": []}
    api = {"id": "1", "title": "Implement API", "description": "Add GET /api/items", "done": False}
    assert body(messages[1]) == api
    assert body(messages[2]) == {"id": "2", "title": "Add tests", "description": "", "done": False}
    assert body(messages[3]) == {"ok": True, "task": {**api, "done": True}}
    assert json.loads(failure(messages[4])) == NOT_FOUND
    assert body(messages[5]) == {"ok": True, "task": api}
    assert json.loads(failure(messages[6])) == NOT_FOUND
    assert body(messages[7]) == {"ok": True}
    assert json.loads(failure(messages[8])) == NOT_FOUND  # a deleted task is gone
    assert body(messages[9]) == {"tasks": [api]}
    assert [m.name for m in messages[:3]] == ["ListTasks", "AddTask", "AddTask"]
    assert [m.tool_call_id for m in messages] == [f"call_{i}" for i in range(10)]


async def test_a_task_id_sent_as_a_number_finds_the_task(tmp_path: Path) -> None:
    messages = await run(tmp_path, ("AddTask", {"title": "a"}), ("CompleteTask", {"taskId": 1}))
    assert body(messages[1])["task"]["done"] is True


async def test_the_list_is_there_in_later_turns_and_belongs_to_one_conversation(
    tmp_path: Path,
) -> None:
    await run(tmp_path, ("AddTask", {"title": "Draft"}), turn_id="turn-1")
    await run(tmp_path, ("CompleteTask", {"taskId": "1"}), turn_id="turn-2")
    assert await listed(tmp_path) == [
        {"id": "1", "title": "Draft", "description": "", "done": True}
    ]
    assert await listed(tmp_path, "conv-2") == []


async def test_ids_are_never_reused_after_a_delete(tmp_path: Path) -> None:
    messages = await run(
        tmp_path,
        ("AddTask", {"title": "a"}),
        ("AddTask", {"title": "b"}),
        ("DeleteTask", {"taskId": "2"}),
        ("AddTask", {"title": "c"}),
    )
    assert body(messages[3])["id"] == "3"


# --- where the file is ---------------------------------------------------------------------


async def test_the_file_goes_where_the_setting_says_at_the_time_of_the_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tools = build_conversation_task_tools()
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(TASKS_DIR_ENV, raising=False)
    await run_tool_calls(tools, [("AddTask", {"title": "here"})])
    assert (tmp_path / ".agents" / "tasks" / "conv-1.json").is_file()

    monkeypatch.setenv(TASKS_DIR_ENV, str(tmp_path / "elsewhere"))
    await run_tool_calls(tools, [("AddTask", {"title": "there"})])
    stored = TaskFiles(tmp_path / "elsewhere").read("conv-1").tasks
    assert [t.title for t in stored] == ["there"]


async def test_the_tools_never_block_the_event_loop(tmp_path: Path) -> None:
    tools = build_conversation_task_tools(tmp_path)
    with blocking_calls_refused():
        messages, _ = await run_tool_calls(
            tools,
            [("AddTask", {"title": "a"}), ("CompleteTask", {"taskId": "1"}), ("ListTasks", {})],
        )
    assert body(messages[2])["tasks"][0]["done"] is True


# --- errors --------------------------------------------------------------------------------


async def test_without_a_conversation_every_tool_says_so_and_touches_no_file(
    tmp_path: Path,
) -> None:
    messages = await run(
        tmp_path,
        ("ListTasks", {}),
        ("AddTask", {"title": "a"}),
        ("CompleteTask", {"taskId": "1"}),
        ("UncompleteTask", {"taskId": "1"}),
        ("DeleteTask", {"taskId": "1"}),
        conversation_id="",
    )
    assert [failure(m) for m in messages] == [NO_CONVERSATION] * 5
    assert NO_CONVERSATION == "Error: Task list is not available (no conversation context)."
    assert files_under(tmp_path) == []


@pytest.mark.parametrize(
    "content",
    [
        "{not json",
        '{"tasks": "none"}',
        '{"tasks": [{"id": "1", "title": "t", "done": false}]}',
        '{"tasks": [{"id": "1", "title": "t", "description": "", "done": "yes"}]}',
    ],
)
async def test_a_corrupt_file_is_reported_logged_and_left_as_it_was(
    tmp_path: Path, content: str, caplog: pytest.LogCaptureFixture
) -> None:
    path = TaskFiles(tmp_path).path("conv-7")
    path.parent.mkdir(parents=True)
    path.write_text(content)
    with caplog.at_level(logging.WARNING, logger="agent.tools"):
        messages = await run(
            tmp_path,
            ("ListTasks", {}),
            ("AddTask", {"title": "a"}),
            ("CompleteTask", {"taskId": "1"}),
            ("DeleteTask", {"taskId": "1"}),
            conversation_id="conv-7",
        )
    assert [failure(m) for m in messages] == [CORRUPT_FILE] * 4
    assert CORRUPT_FILE == "Error: Task file is corrupt or invalid."
    assert path.read_text() == content
    assert files_under(path.parent) == [path]
    warnings = [r for r in caplog.records if r.name == "agent.tools"]
    assert len(warnings) == 4
    assert all(r.levelno == logging.WARNING and "conv-7" in r.getMessage() for r in warnings)


async def test_a_disk_error_returns_the_os_message_and_is_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("")
    with caplog.at_level(logging.WARNING, logger="agent.tools"):
        messages = await run(
            not_a_folder, ("AddTask", {"title": "a"}), ("ListTasks", {}), conversation_id="c-9"
        )
    for message in messages:
        content = failure(message)
        assert content.startswith("Error: [Errno 20] Not a directory: ")
        assert "Traceback" not in content
    assert files_under(tmp_path) == [not_a_folder]
    assert [r.levelno for r in caplog.records if r.name == "agent.tools"] == [logging.WARNING] * 2
    assert all("c-9" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"title": ""}, "Error: The title is empty."),
        ({"title": "   "}, "Error: The title is empty."),
        ({"title": "x" * 201}, "Error: The title is 201 characters long; the limit is 200."),
        (
            {"title": "ok", "description": "x" * 2001},
            "Error: The description is 2001 characters long; the limit is 2000.",
        ),
    ],
)
async def test_bad_arguments_say_what_to_fix_and_write_nothing(
    tmp_path: Path, arguments: dict[str, Any], expected: str
) -> None:
    (message,) = await run(tmp_path, ("AddTask", arguments))
    assert failure(message).startswith(expected)
    assert files_under(tmp_path) == []


async def test_the_longest_allowed_title_and_description_are_kept_whole(tmp_path: Path) -> None:
    (message,) = await run(tmp_path, ("AddTask", {"title": "t" * 200, "description": "d" * 2000}))
    assert body(message)["title"] == "t" * 200
    assert body(message)["description"] == "d" * 2000


async def test_text_that_is_not_valid_unicode_is_refused_and_nothing_written(
    tmp_path: Path,
) -> None:
    # The supervisor's tools node refuses it before the tool runs ...
    (message,) = await run(tmp_path, ("AddTask", {"title": "bad \ud800"}))
    assert json.loads(failure(message))["error"] == "VALIDATION_ERROR"
    assert files_under(tmp_path) == []

    # ... and the tool refuses it by itself in a plain ToolNode.
    builder = StateGraph(SupervisorState)
    builder.add_node("tools", ToolNode(build_conversation_task_tools(tmp_path)))
    builder.add_edge(START, "tools")
    builder.add_edge("tools", END)
    state = await builder.compile().ainvoke(
        {
            "messages": [
                HumanMessage("add", id="h-1"),
                AIMessage(
                    "",
                    tool_calls=[
                        {
                            "name": "AddTask",
                            "args": {"title": "ok", "description": "bad \ud800"},
                            "id": "c-1",
                            "type": "tool_call",
                        }
                    ],
                ),
            ],
            "conversationId": "conv-1",
            "turnId": "h-1",
        }
    )
    refused = state["messages"][-1]
    assert isinstance(refused, ToolMessage)
    assert failure(refused).startswith("Error: The description contains an invalid character")
    assert files_under(tmp_path) == []


# --- exactly once and concurrency ----------------------------------------------------------


async def test_a_tool_call_run_again_on_resume_acts_once(tmp_path: Path) -> None:
    calls: list[ToolCallSpec] = [("AddTask", {"title": "once"}), ("CompleteTask", {"taskId": 1})]
    first = await run(tmp_path, *calls, message_id="ai-1")
    again = await run(tmp_path, *calls, message_id="ai-1")  # LangGraph re-runs the tools step
    assert [m.content for m in again] == [m.content for m in first]
    assert await listed(tmp_path) == [{"id": "1", "title": "once", "description": "", "done": True}]
    # Another response that reuses the call ids (some servers number them afresh) is new work.
    await run(tmp_path, ("AddTask", {"title": "twice"}), message_id="ai-2")
    assert [t["title"] for t in await listed(tmp_path)] == ["once", "twice"]


async def test_a_replayed_call_gives_its_first_answer_even_if_the_list_changed_since(
    tmp_path: Path,
) -> None:
    await run(tmp_path, ("AddTask", {"title": "first"}), ("DeleteTask", {"taskId": "1"}))
    # Task 2 does not exist yet when CompleteTask runs; the next call of the message creates it.
    calls: list[ToolCallSpec] = [("CompleteTask", {"taskId": "2"}), ("AddTask", {"title": "b"})]
    first = await run(tmp_path, *calls, message_id="ai-1")
    again = await run(tmp_path, *calls, message_id="ai-1")
    assert json.loads(failure(again[0])) == NOT_FOUND
    assert [m.content for m in again] == [m.content for m in first]
    assert await listed(tmp_path) == [{"id": "2", "title": "b", "description": "", "done": False}]


async def test_concurrent_adds_in_one_process_all_land_with_distinct_ids(tmp_path: Path) -> None:
    tools: list[BaseTool] = build_conversation_task_tools(tmp_path)
    results = await asyncio.gather(
        *(run_tool_calls(tools, [("AddTask", {"title": f"t{n}"})]) for n in range(20))
    )
    ids = [body(messages[0])["id"] for messages, _ in results]
    assert sorted(ids, key=int) == [str(n) for n in range(1, 21)]
    assert len(await listed(tmp_path)) == 20


# --- the prompt ----------------------------------------------------------------------------


def test_the_prompt_names_the_tools_and_tells_the_list_from_the_turn_plan() -> None:
    prompt = load_prompt(CONVERSATION_TASKS_PROMPT)
    for name in TOOL_NAMES:
        assert f"`{name}`" in prompt
    assert "`create_todo`" in prompt
    assert "`complete_todo`" in prompt
    assert "$" not in prompt  # sections are used as they are, not rendered
