"""A provider besides OpenAI, for real over HTTP: ``anthropic:<model>`` is built by LangChain's
``init_chat_model`` (langchain-anthropic and the ``anthropic`` client, unmocked) and talks to the
scripted Anthropic Messages-API server on 127.0.0.1, found through ``ANTHROPIC_BASE_URL`` as a
user's proxy or gateway would be."""

from __future__ import annotations

from typing import Any

import anthropic
import pytest
from langchain_core.exceptions import ModelError
from langchain_core.messages import AIMessage, HumanMessage

from agent.context import Context
from agent.graph import build_graph
from agent.llm.chat_models import get_chat_model
from storage import Database
from storage.repositories.tasks import TaskRepository
from tests.http_oracle import HttpPlanOracle
from tests.scripted_anthropic import ScriptedAnthropicServer
from tests.scripted_openai import rate_limited, server_error, slow, text

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("isolated_model_env")]

MODEL = "anthropic:claude-scripted"
API_KEY = "sk-ant-scripted"
TITLES = ["buy milk", "call mom"]


@pytest.fixture
def anthropic_env(
    scripted_anthropic: ScriptedAnthropicServer, monkeypatch: pytest.MonkeyPatch
) -> ScriptedAnthropicServer:
    """The stub as the Anthropic endpoint, configured the way a user configures theirs."""
    monkeypatch.setenv("ANTHROPIC_BASE_URL", scripted_anthropic.base_url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY)
    return scripted_anthropic


async def _turn(graph: Any, request: str, context: Context, *, stream: bool) -> dict[str, Any]:
    """One turn's final state, by ``ainvoke`` or by streaming (then the model streams too)."""
    message = HumanMessage(content=request)
    if not stream:
        state: dict[str, Any] = await graph.ainvoke({"messages": [message]}, context=context)
        return state
    final: dict[str, Any] = {}
    async for mode, chunk in graph.astream(
        {"messages": [message]}, context=context, stream_mode=["messages", "values"]
    ):
        if mode == "values":
            final = chunk
    return final


@pytest.mark.parametrize("stream", [False, True], ids=["invoke", "stream"])
async def test_a_planning_turn_runs_on_anthropic_over_http(
    anthropic_env: ScriptedAnthropicServer, database: Database, stream: bool
) -> None:
    server = anthropic_env
    server.respond_with(
        HttpPlanOracle(TITLES, lambda title: ("add_task", {"title": title}), answer="Both added.")
    )
    graph = build_graph(MODEL, database=database)

    state = await _turn(
        graph,
        "add buy milk and call mom to my tasks",
        Context(user_id="alice", request_timeout=10, max_retries=0),
        stream=stream,
    )

    assert state["turnStatus"] == "answered"
    assert [(todo["title"], todo["status"]) for todo in state["todos"]] == [
        (title, "completed") for title in TITLES
    ]
    answer = state["messages"][-1]
    assert isinstance(answer, AIMessage) and answer.text == "Both added."
    async with database.session() as session:
        tasks = await TaskRepository(session, "alice").find()
    assert sorted(task.title for task in tasks) == TITLES
    # Plan and act, close and act, close, answer: every call over the Messages API.
    assert len(server.requests) == 4
    first = server.requests[0]
    assert first["model"] == "claude-scripted"
    assert bool(first.get("stream")) is stream
    tools = {tool["name"]: tool for tool in first["tools"]}
    assert {"create_todo", "add_task"} <= set(tools)  # planning: the plan tool and the domain's
    assert "complete_todo" in {tool["name"] for tool in server.requests[1]["tools"]}  # working
    assert tools["create_todo"]["input_schema"]["properties"]["items"]["type"] == "array"
    assert "Current plan" not in str(first["system"])  # nothing planned yet
    headers = server.headers[0]  # the key, as the SDK sends it (anthropic 2: a bearer token)
    assert API_KEY in (headers.get("x-api-key"), headers.get("authorization", "").split(" ")[-1])
    # The second call carries the first one's action and its result, id for id (the plan's
    # creation is reported by the plan view instead).
    sent = server.requests[1]["messages"]
    blocks = [block for m in sent if isinstance(m["content"], list) for block in m["content"]]
    calls = [block for block in blocks if block["type"] == "tool_use"]
    results = [block for block in blocks if block["type"] == "tool_result"]
    assert "add_task" in [call["name"] for call in calls]
    assert [result["tool_use_id"] for result in results] == [call["id"] for call in calls]


async def test_run_settings_reach_the_anthropic_client(
    anthropic_env: ScriptedAnthropicServer,
) -> None:
    """``Context.request_timeout`` and ``max_retries`` are the client's: a reply slower than the
    timeout is retried, and a 5xx then succeeds within the retries."""
    server = anthropic_env
    server.reply(slow(5, text("too late")), server_error(529), text("in time"))
    model = await get_chat_model(MODEL, timeout=0.5, max_retries=2)

    answer = await model.ainvoke("hello")

    assert answer.text == "in time"
    assert len(server.requests) == 3


async def test_a_rate_limit_past_the_retries_is_one_model_error(
    anthropic_env: ScriptedAnthropicServer,
) -> None:
    server = anthropic_env
    server.reply(*[rate_limited(retry_after=0.01)] * 2, text("never sent"))
    model = await get_chat_model(MODEL, timeout=5, max_retries=1)

    with pytest.raises(anthropic.RateLimitError) as raised:
        await model.ainvoke("hello")

    assert isinstance(raised.value, ModelError)  # what the graph catches, for any provider
    assert len(server.requests) == 2


async def test_an_unreachable_anthropic_model_ends_the_turn_with_the_reason(
    anthropic_env: ScriptedAnthropicServer, database: Database
) -> None:
    server = anthropic_env
    server.reply(server_error(500))
    graph = build_graph(MODEL, database=database)

    state = await graph.ainvoke(
        {"messages": [HumanMessage(content="add buy milk")]},
        context=Context(user_id="alice", max_retries=0),
    )

    assert state["turnStatus"] == "failed"
    assert "the language model failed" in state["messages"][-1].text
    assert "Scripted server error 500" in state["messages"][-1].text
