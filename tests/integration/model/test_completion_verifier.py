"""``Context.verifier_model`` over a real OpenAI-compatible wire (the scripted server): a row with
completion criteria is judged against its criteria and evidence before it closes, and the
verifier's calls and tokens are counted apart from the supervisor's."""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain_core.messages import HumanMessage, ToolMessage

from agent.context import Context
from agent.graph import build_graph
from storage import Database
from tests.fakes import (
    RECORDED_NOTES,
    act,
    answer_with,
    close_row,
    record,
    scripted_turn,
    tool_call,
    tool_results,
)
from tests.scripted_openai import ScriptedOpenAIServer, text

pytestmark = pytest.mark.usefixtures("isolated_model_env", "recorded_notes")


async def run(graph: Any, context: Context) -> dict[str, Any]:
    result: dict[str, Any] = await graph.ainvoke(
        {"messages": [HumanMessage(content="Record the note 'milk'.")]}, context=context
    )
    return result


async def test_the_verifier_refuses_a_close_without_evidence_then_accepts_it(
    database: Database, scripted_openai: ScriptedOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", scripted_openai.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    scripted_openai.reply(text("REFUSE: no note was recorded"), text("ACCEPT"))
    criteria = "The note 'milk' is recorded."
    model = scripted_turn(
        database,
        act(
            tool_call(
                "create_todo", items=[{"title": "Record milk", "completionCriteria": criteria}]
            )
        ),
        close_row(outcome="recorded milk"),
        act(tool_call("record", note="milk")),
        close_row(outcome="recorded milk"),
        answer_with(),
    )
    graph = build_graph(model, tools=[record], database=database, include_default_tools=False)

    result = await run(graph, Context(verifier_model="openai:judge"))

    refused, accepted = tool_results(result, "complete_todo")
    assert refused.status == "error"
    refusal = json.loads(str(refused.content))
    assert refusal["error"] == "COMPLETION_REFUSED"
    assert "no note was recorded" in refusal["reason"]
    assert json.loads(str(accepted.content))["status"] == "completed"
    assert RECORDED_NOTES == ["milk"]
    # The verifier saw the criteria, the claimed outcome and, the second time, the real call.
    first, second = (request["messages"][-1]["content"] for request in scripted_openai.requests)
    assert criteria in first and "recorded milk" in first and '"tool": "record"' not in first
    assert '"tool": "record"' in second and '"milk"' in second
    assert all(request["model"] == "judge" for request in scripted_openai.requests)
    assert "tools" not in scripted_openai.requests[0]
    assert result["verifierCalls"] == 2
    assert result["verifierTokens"] > 0
    assert result["llmCalls"] == 5  # the supervisor's own calls only
    assert result["todos"][0]["status"] == "completed"
    assert isinstance(refused, ToolMessage)


async def test_rows_without_criteria_and_runs_without_a_verifier_make_no_verifier_call(
    database: Database, scripted_openai: ScriptedOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", scripted_openai.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    model = scripted_turn(
        database,
        act(tool_call("create_todo", items=[{"title": "Record milk"}])),
        close_row(outcome="recorded milk"),
        answer_with(),
    )
    graph = build_graph(model, tools=[record], database=database, include_default_tools=False)

    result = await run(graph, Context(verifier_model="openai:judge"))

    assert scripted_openai.requests == []
    assert result["verifierCalls"] == 0
    assert result["todos"][0]["status"] == "completed"
