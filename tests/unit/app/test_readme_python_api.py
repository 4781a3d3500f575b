"""README's Python forms work as written: its custom-tool example runs warning-free (warnings are
errors in this suite, as under ``-W error``), and its note on API keys is true."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.tools import BaseTool
from langchain_openai import ChatOpenAI

from agent.graph import build_graph
from storage import Database
from tests.fakes import ScriptedChatModel, ai, tool_call

README = Path(__file__).resolve().parents[3] / "README.md"


def readme_tool() -> BaseTool:
    """The custom tool README shows, defined by running README's own code block."""
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    (source,) = [block for block in blocks if "@tool" in block and "runtime" in block]
    namespace: dict[str, Any] = {}
    exec(compile(source, "README.md", "exec"), namespace)
    tools = [value for value in namespace.values() if isinstance(value, BaseTool)]
    assert len(tools) == 1
    return tools[0]


async def test_readme_tool_form_gets_user_and_turn_without_warnings(database: Database) -> None:
    note = readme_tool()
    model = ScriptedChatModel(
        script=[
            ai(tool_call(note.name, note="buy milk"), tool_call(note.name, note=" ")),
            ai(content="Noted."),
        ]
    )
    graph = build_graph(model, tools=[note], database=database)
    result = await graph.ainvoke(
        {"messages": [HumanMessage("Remember to buy milk.", id="turn-42")]},
        context={"user_id": "alice"},
    )

    ok, failed = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    assert ok.status == "success"
    assert ok.content == "Noted for alice in turn turn-42: buy milk"
    # The model sees the runtime neither in the tool's schema nor can it send one.
    assert "runtime" not in note.tool_call_schema.model_json_schema()["properties"]
    assert failed.status == "error"
    assert json.loads(str(failed.content))["error"] == "VALIDATION_ERROR"
    assert result["messages"][-1].content == "Noted."


def test_a_chat_openai_you_build_needs_an_api_key_even_with_a_base_url(
    isolated_model_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    with pytest.raises(Exception, match="OPENAI_API_KEY"):
        ChatOpenAI(model="gpt-4o-mini")
