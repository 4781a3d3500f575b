"""Tools of MCP servers in the supervisor: real stdio servers, started by the MCP client the
way ``TURNPLAN_MCP_SERVERS`` configures them, driven by a scripted model."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from pathlib import Path
from typing import Any

import psutil
import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_mcp_adapters.sessions import Connection
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from agent.context import Context
from agent.graph import build_graph
from storage import Database
from tests.fakes import PlanOracle, ScriptedChatModel, ai, tool_call

NOTES_SERVER: Connection = {
    "transport": "stdio",
    "command": sys.executable,
    "args": [str(Path(__file__).parents[2] / "mcp_notes_server.py")],
}
TODOLIST_SERVER: Connection = {
    "transport": "stdio",
    "command": sys.executable,
    "args": ["-m", "agent.app.cli", "mcp"],
    "cwd": str(Path(__file__).parents[3]),
}
"""``turnplan mcp`` (seed 001), started as a real stdio server."""
CHECKLIST = [
    {"content": "Pack the tent", "status": "in_progress", "activeForm": "Packing the tent"},
    {"content": "Buy gas", "status": "pending", "activeForm": "Buying gas"},
]
BROKEN_SERVER: Connection = {
    "transport": "stdio",
    "command": sys.executable,
    "args": ["-c", "import sys; sys.exit(3)"],
}
ACTIONS = {
    "Remember milk": tool_call("remember", text="milk"),
    "Recall notes": tool_call("recall"),
    "Crash the server": tool_call("crash"),
    "Add bread": tool_call("add_task", title="bread"),
    "Write the checklist": tool_call("todolist__set", todos=CHECKLIST),
    "Start two at once": tool_call(
        "todolist__set", todos=[{**item, "status": "in_progress"} for item in CHECKLIST]
    ),
    "Read the checklist": tool_call("todolist__get"),
}


def planned(*titles: str) -> ScriptedChatModel:
    return ScriptedChatModel(responder=PlanOracle(list(titles), lambda title: ACTIONS[title]))


def tool_results(result: dict[str, Any], name: str) -> list[ToolMessage]:
    return [m for m in result["messages"] if isinstance(m, ToolMessage) and m.name == name]


def text_of(message: ToolMessage) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content if isinstance(part, dict))


async def turn(graph: Any, text: str, conversation: str) -> dict[str, Any]:
    return await graph.ainvoke(
        {"messages": [HumanMessage(content=text)]},
        context=Context(conversation_id=conversation),
    )


async def test_a_conversation_keeps_its_mcp_session_and_never_sees_another(
    tmp_path: Path,
) -> None:
    database = Database(f"sqlite+aiosqlite:///{tmp_path / 'mcp.db'}")
    model = planned("Remember milk", "Recall notes")
    graph = build_graph(model, database=database, mcp_servers={"notes": NOTES_SERVER})

    first = await turn(graph, "remember milk, then read my notes back", "kitchen")
    assert "remember" in model.bound_tool_names and "recall" in model.bound_tool_names
    assert "Tools from MCP servers" in model.system_prompt(0)
    later = await turn(
        build_graph(planned("Recall notes"), database=database, mcp_servers={}),
        "anything?",
        "kitchen",
    )
    other = await turn(
        build_graph(
            planned("Recall notes"), database=database, mcp_servers={"notes": NOTES_SERVER}
        ),
        "read my notes",
        "garage",
    )
    same_again = await turn(graph, "remember milk, then read my notes back", "kitchen")

    assert first["turnStatus"] == "answered"
    assert text_of(tool_results(first, "recall")[0]) == "milk"
    # A graph without the server does not bind its tools: the call is refused, nothing runs.
    refused = tool_results(later, "recall")[0]
    assert refused.status == "error" and "no tool 'recall'" in text_of(refused)
    assert text_of(tool_results(other, "recall")[0]) == "(no notes)"
    assert text_of(tool_results(same_again, "recall")[0]) == "milk\nmilk"
    await database.dispose()


async def test_a_turn_keeps_its_checklist_in_the_todolist_server(tmp_path: Path) -> None:
    database = Database(f"sqlite+aiosqlite:///{tmp_path / 'mcp.db'}")
    model = planned("Write the checklist", "Start two at once", "Read the checklist")
    graph = build_graph(model, database=database, mcp_servers={"todolist": TODOLIST_SERVER})

    result = await turn(graph, "keep a camping checklist", "camping")

    assert {"todolist__get", "todolist__set"} <= set(model.bound_tool_names)
    written, refused = tool_results(result, "todolist__set")
    assert json.loads(text_of(written)) == {
        "summary": {"total": 2, "pending": 1, "in_progress": 1, "completed": 0}
    }
    assert refused.status == "error"
    assert json.loads(text_of(refused))["error"]["code"] == "multiple_in_progress"
    (read,) = tool_results(result, "todolist__get")
    assert json.loads(text_of(read))["todos"] == CHECKLIST  # the refused set changed nothing
    # "Start two at once" was closed as completed on its only call, the refused one: the turn
    # says so rather than ``answered``.
    assert result["turnStatus"] == "incomplete"
    assert "- todolist__set: for 'Start two at once'" in str(result["messages"][-1].content)
    assert result["toolErrors"] == 0  # the server's refusal is the model's to fix, not a fault
    await database.dispose()


async def test_a_server_that_cannot_start_is_named_and_the_rest_works(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    database = Database(f"sqlite+aiosqlite:///{tmp_path / 'mcp.db'}")
    model = planned("Remember milk", "Add bread")
    graph = build_graph(
        model, database=database, mcp_servers={"broken": BROKEN_SERVER, "notes": NOTES_SERVER}
    )

    with caplog.at_level(logging.ERROR, logger="agent.tools"):
        result = await turn(graph, "remember milk and add bread", "pantry")

    assert result["turnStatus"] == "answered"
    assert [row["status"] for row in result["todos"]] == ["completed", "completed"]
    assert text_of(tool_results(result, "remember")[0]).startswith("noted")
    assert [m["title"] for m in result["modifiedTasks"]] == ["bread"]
    failures = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert any("MCP server 'broken' could not start" in line for line in failures)
    assert "crash" in model.bound_tool_names  # the notes server's tools are all there
    await database.dispose()


async def test_a_server_that_dies_mid_call_is_an_mcp_error_and_the_next_call_reconnects(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    database = Database(f"sqlite+aiosqlite:///{tmp_path / 'mcp.db'}")
    graph = build_graph(
        planned("Crash the server", "Remember milk", "Recall notes"),
        database=database,
        mcp_servers={"notes": NOTES_SERVER},
    )

    with caplog.at_level(logging.WARNING, logger="agent.tools"):
        result = await turn(graph, "crash it, then remember milk", "cellar")

    crashed = json.loads(text_of(tool_results(result, "crash")[0]))
    assert crashed["error"] == "MCP_ERROR"
    assert "'notes'" in crashed["message"]
    assert text_of(tool_results(result, "recall")[0]) == "milk"  # a new session, working
    # The crash the user asked for failed and nothing made up for it: not all was done.
    assert result["turnStatus"] == "incomplete"
    assert "Not done" in text_of(result["messages"][-1]) and "crash" in text_of(
        result["messages"][-1]
    )
    assert result["toolErrors"] == 1
    assert any("MCP server 'notes' failed on crash" in r.getMessage() for r in caplog.records)
    await database.dispose()


def test_a_script_turn_per_event_loop_leaves_no_server_process_behind(tmp_path: Path) -> None:
    database = Database(f"sqlite+aiosqlite:///{tmp_path / 'mcp.db'}")
    graph = build_graph(
        planned("Remember milk"), database=database, mcp_servers={"notes": NOTES_SERVER}
    )

    for n in range(2):
        result = asyncio.run(turn(graph, "remember milk", f"script-{n}"))
        assert result["turnStatus"] == "answered"
        assert psutil.Process().children(recursive=True) == []


async def test_a_settings_file_names_the_servers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    settings = tmp_path / "mcp_servers.json"
    settings.write_text(json.dumps({"notes": NOTES_SERVER}))
    monkeypatch.setenv("TURNPLAN_MCP_SERVERS", str(settings))
    database = Database(f"sqlite+aiosqlite:///{tmp_path / 'mcp.db'}")
    model = planned("Remember milk")
    result = await turn(build_graph(model, database=database), "remember milk", "env")
    assert text_of(tool_results(result, "remember")[0]).startswith("noted")

    settings.write_text('{"notes": {"command": "x"}}')
    model = planned("Add bread")
    with caplog.at_level(logging.ERROR, logger="agent.tools"):
        result = await turn(build_graph(model, database=database), "add bread", "env")
    assert result["turnStatus"] == "answered"
    assert "remember" not in model.bound_tool_names
    assert any("server 'notes' needs a \"transport\"" in r.getMessage() for r in caplog.records)
    await database.dispose()


async def test_an_mcp_call_beside_a_question_is_not_made_again_when_the_answer_resumes(
    tmp_path: Path,
) -> None:
    """LangGraph runs the whole tools step again on resume; the MCP call made before the
    question is replayed from its record, not sent to the server a second time."""
    database = Database(f"sqlite+aiosqlite:///{tmp_path / 'mcp.db'}")
    model = ScriptedChatModel(
        script=[
            ai(
                tool_call("remember", text="milk"), tool_call("ask_user", question="Anything else?")
            ),
            ai(tool_call("recall")),
            AIMessage(content="Noted."),
        ]
    )
    graph = build_graph(
        model, database=database, checkpointer=InMemorySaver(), mcp_servers={"notes": NOTES_SERVER}
    )
    config: RunnableConfig = {"configurable": {"thread_id": "beside"}}
    await graph.ainvoke({"messages": [HumanMessage(content="remember milk")]}, config)

    result = await graph.ainvoke(Command(resume="no"), config)

    assert text_of(tool_results(result, "remember")[0]) == "noted (1 in this session)"
    assert text_of(tool_results(result, "recall")[0]) == "milk"
    await database.dispose()
