"""The scripted server itself: what the graph and benchmark tests will rely on."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import openai
import pytest
from langchain_core.messages import AIMessage, AIMessageChunk
from langchain_openai import ChatOpenAI

from tests.scripted_openai import Reply, ScriptedOpenAIServer, text, tool_calls


def chat(server: ScriptedOpenAIServer, **kwargs: Any) -> ChatOpenAI:
    return ChatOpenAI(
        model="scripted", base_url=server.base_url, api_key="test", max_retries=0, **kwargs
    )


async def test_streamed_tool_calls_and_usage_reassemble(
    scripted_openai: ScriptedOpenAIServer,
) -> None:
    scripted_openai.reply(
        tool_calls(
            ("add_task", {"title": "buy milk and bread"}),
            ("add_task", {"title": "call mum"}),
            content="Adding both.",
        )
    )
    model = chat(scripted_openai, stream_usage=True)

    chunks = [chunk async for chunk in model.astream("add two tasks")]
    answer = chunks[0]
    for chunk in chunks[1:]:
        answer = answer + chunk

    assert len(chunks) > 4  # really streamed in pieces
    assert isinstance(answer, AIMessageChunk)
    assert answer.content == "Adding both."
    assert [call["args"] for call in answer.tool_calls] == [
        {"title": "buy milk and bread"},
        {"title": "call mum"},
    ]
    assert answer.usage_metadata is not None
    assert answer.usage_metadata["input_tokens"] > 0
    assert scripted_openai.requests[0]["stream_options"] == {"include_usage": True}


async def test_usage_is_deterministic_and_grows_with_the_prompt(
    scripted_openai: ScriptedOpenAIServer,
) -> None:
    scripted_openai.reply(text("ok"), text("ok"), text("ok"))
    model = chat(scripted_openai)

    short_a = await model.ainvoke("hi")
    short_b = await model.ainvoke("hi")
    long = await model.ainvoke("hi " * 200)

    assert isinstance(short_a, AIMessage) and isinstance(short_b, AIMessage)
    assert isinstance(long, AIMessage)
    assert short_a.usage_metadata == short_b.usage_metadata
    assert short_a.usage_metadata is not None and long.usage_metadata is not None
    assert long.usage_metadata["input_tokens"] > short_a.usage_metadata["input_tokens"] + 100
    assert short_a.usage_metadata["output_tokens"] > 0


async def test_oracle_answers_from_the_request_after_the_queue(
    scripted_openai: ScriptedOpenAIServer,
) -> None:
    def echo(body: dict[str, Any]) -> Reply:
        return text(f"you said {body['messages'][-1]['content']}")

    scripted_openai.reply(text("queued first"))
    scripted_openai.respond_with(echo)
    model = chat(scripted_openai)

    first = await model.ainvoke("one")
    second = await model.ainvoke("two")

    assert first.content == "queued first"
    assert second.content == "you said two"


def test_sync_callers_and_models_endpoint(scripted_openai: ScriptedOpenAIServer) -> None:
    scripted_openai.reply(text("sync works"))

    assert chat(scripted_openai).invoke("hello").content == "sync works"
    listed = chat(scripted_openai).root_client.models.list()
    assert [model.id for model in listed.data] == ["scripted"]


def test_reachable_from_a_subprocess(scripted_openai: ScriptedOpenAIServer) -> None:
    """The LangGraph dev server will call it from another process."""
    scripted_openai.reply(text("from afar"))
    program = (
        "import json, sys, urllib.request\n"
        "body = json.dumps({'model': 'm', 'messages': [{'role': 'user', 'content': 'x'}]})\n"
        "req = urllib.request.Request(sys.argv[1] + '/chat/completions', body.encode(),\n"
        "                             {'content-type': 'application/json'})\n"
        "print(urllib.request.urlopen(req, timeout=10).read().decode())\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", program, scripted_openai.base_url],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    assert json.loads(result.stdout)["choices"][0]["message"]["content"] == "from afar"


def test_stop_is_clean_and_the_port_is_released() -> None:
    server = ScriptedOpenAIServer()
    with server:
        url = server.base_url
    model = ChatOpenAI(model="m", base_url=url, api_key="test", max_retries=0, timeout=2)
    with pytest.raises(openai.APIConnectionError):
        model.invoke("anyone there?")
