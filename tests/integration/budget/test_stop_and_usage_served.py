"""The no-progress stop and the usage figures over real HTTP: ``ChatOpenAI`` against the scripted
OpenAI-compatible server, and the supervisor served by ``langgraph dev`` (issue 29 §4, §5)."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langchain_openai import ChatOpenAI
from langgraph_sdk import get_client

from agent.context import Context
from agent.graph import build_graph
from storage import Database
from tests.dev_server import DevServer
from tests.fakes import plan_rows
from tests.http_oracle import plan_view_of
from tests.scripted_openai import Reply, ScriptedOpenAIServer, tool_calls, without_usage

pytestmark = pytest.mark.integration


def loops_on_list_todo(body: dict[str, Any]) -> Reply:
    """Plans two items, then only reads the plan; no answer reports its usage."""
    if not plan_rows(plan_view_of(body)):
        return without_usage(
            tool_calls(("create_todo", {"items": [{"title": "alpha"}, {"title": "beta"}]}))
        )
    return without_usage(tool_calls(("list_todo", {})))


async def test_a_server_that_reports_no_usage_gets_estimated_figures(
    scripted_openai: ScriptedOpenAIServer, database: Database
) -> None:
    scripted_openai.respond_with(loops_on_list_todo)
    model = ChatOpenAI(
        model="scripted", base_url=scripted_openai.base_url, api_key="test", max_retries=0
    )
    graph = build_graph(model, database=database, include_default_tools=False)
    final = await graph.ainvoke(
        {"messages": [HumanMessage(content="do alpha and beta")]}, context=Context()
    )
    assert final["turnStatus"] == "stalled"
    assert len(scripted_openai.requests) == 4
    assert final["usageEstimated"] is True
    # Estimated from the characters of the messages sent: the request bodies' messages hold
    # at least that much text.
    assert final["promptTokens"] > 4 * 100
    assert final["completionTokens"] > 0
    alpha = final["todos"][0]
    assert alpha["usage"]["llmCalls"] == 3  # the three list_todo calls made while it ran


async def test_the_stop_and_the_usage_over_the_dev_server(dev_server: DevServer) -> None:
    dev_server.model.respond_with(loops_on_list_todo)
    async with get_client(url=dev_server.url) as client:
        thread = await client.threads.create()
        events: list[dict[str, Any]] = []
        async for part in client.runs.stream(
            thread["thread_id"],
            "supervisor",
            input={"messages": [{"role": "user", "content": "do alpha and beta"}]},
            context={"max_idle_rounds": 2},
            stream_mode=["custom"],
        ):
            assert part.event != "error", f"{part.data}\n{dev_server.log_tail()}"
            if part.event == "custom":
                events.append(part.data)
        values = (await client.threads.get_state(thread["thread_id"]))["values"]

    assert values["turnStatus"] == "stalled"
    assert values["llmCalls"] == 3 == len(dev_server.model.requests)
    assert "list_todo() 2 times" in values["messages"][-1]["content"]
    assert values["usageEstimated"] is True and values["promptTokens"] > 0
    assert [todo["usage"]["llmCalls"] for todo in values["todos"]] == [2, 0]
    planned = [event for event in events if event.get("event") == "planned"]
    assert planned and planned[0]["usage"]["llmCalls"] == 1
