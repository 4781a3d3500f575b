"""The chat model ``get_chat_model`` builds, driven over HTTP by the scripted server.

Everything here goes through the real ``ChatOpenAI`` and ``openai`` client, so retries, timeouts
and parsing are the ones users get, not mocks of them.
"""

from __future__ import annotations

import json

import openai
import pytest
from langchain_core.exceptions import ModelError
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool

from agent.llm.chat_models import (
    EmptyModelResponseError,
    get_chat_model,
    invalid_tool_call_messages,
)
from tests.scripted_openai import (
    ScriptedOpenAIServer,
    empty_choices,
    malformed_tool_call,
    rate_limited,
    server_error,
    slow,
    text,
    tool_calls,
)

pytestmark = pytest.mark.usefixtures("isolated_model_env")


async def model_for(
    server: ScriptedOpenAIServer,
    monkeypatch: pytest.MonkeyPatch,
    *,
    request_timeout: float = 5.0,
    max_retries: int = 2,
) -> BaseChatModel:
    """A model reached the way users configure a compatible server: OPENAI_BASE_URL, no key."""
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    return await get_chat_model("openai:scripted", timeout=request_timeout, max_retries=max_retries)


@tool
def add_task(title: str, due: str | None = None) -> str:
    """Add a personal task."""
    return title


async def test_rate_limit_with_retry_after_is_retried_then_succeeds(
    scripted_openai: ScriptedOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    scripted_openai.reply(rate_limited(retry_after=0.05), text("done"))
    model = await model_for(scripted_openai, monkeypatch)

    answer = await model.ainvoke("hello")

    assert answer.content == "done"
    assert len(scripted_openai.requests) == 2


async def test_server_error_is_retried_then_succeeds(
    scripted_openai: ScriptedOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    scripted_openai.reply(server_error(503), text("recovered"))
    model = await model_for(scripted_openai, monkeypatch, max_retries=1)

    answer = await model.ainvoke("hello")

    assert answer.content == "recovered"
    assert len(scripted_openai.requests) == 2


async def test_rate_limit_past_the_retries_raises_one_rate_limit_error(
    scripted_openai: ScriptedOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    scripted_openai.reply(*[rate_limited(retry_after=0.01)] * 3, text("never sent"))
    model = await model_for(scripted_openai, monkeypatch, max_retries=2)

    with pytest.raises(openai.RateLimitError) as raised:
        await model.ainvoke("hello")

    assert isinstance(raised.value, ModelError)  # the provider-neutral type the graph catches
    assert "Rate limit" in str(raised.value)
    assert len(scripted_openai.requests) == 3  # the first try and two retries, no more


async def test_server_error_past_the_retries_raises_internal_server_error(
    scripted_openai: ScriptedOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    scripted_openai.reply(server_error(500), server_error(500))
    model = await model_for(scripted_openai, monkeypatch, max_retries=1)

    with pytest.raises(openai.InternalServerError, match="Scripted server error 500"):
        await model.ainvoke("hello")
    assert len(scripted_openai.requests) == 2


async def test_slow_reply_times_out_and_the_retry_succeeds(
    scripted_openai: ScriptedOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    scripted_openai.reply(slow(5, text("too late")), text("in time"))
    model = await model_for(scripted_openai, monkeypatch, request_timeout=0.5, max_retries=1)

    answer = await model.ainvoke("hello")

    assert answer.content == "in time"
    assert len(scripted_openai.requests) == 2


async def test_timeout_past_the_retries_raises_api_timeout_error(
    scripted_openai: ScriptedOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    scripted_openai.reply(slow(5, text("too late")))
    model = await model_for(scripted_openai, monkeypatch, request_timeout=0.5, max_retries=0)

    with pytest.raises(openai.APITimeoutError):
        await model.ainvoke("hello")
    assert len(scripted_openai.requests) == 1


@pytest.mark.parametrize("stream", [False, True], ids=["invoke", "stream"])
async def test_malformed_tool_arguments_become_invalid_tool_calls_not_a_crash(
    scripted_openai: ScriptedOpenAIServer, monkeypatch: pytest.MonkeyPatch, stream: bool
) -> None:
    # Not merely truncated: when streaming, langchain completes truncated JSON (see below).
    scripted_openai.reply(malformed_tool_call("add_task", '{"title": buy milk}'))
    model = (await model_for(scripted_openai, monkeypatch)).bind_tools([add_task])

    if stream:
        chunks = [chunk async for chunk in model.astream("add buy milk")]
        answer = chunks[0]
        for chunk in chunks[1:]:
            answer = answer + chunk
    else:
        answer = await model.ainvoke("add buy milk")

    assert isinstance(answer, AIMessage)
    assert answer.tool_calls == []
    assert [call["name"] for call in answer.invalid_tool_calls] == ["add_task"]
    assert answer.invalid_tool_calls[0]["args"] == '{"title": buy milk}'


async def test_streamed_truncated_arguments_are_completed_by_langchain(
    scripted_openai: ScriptedOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pinned because it differs from ``ainvoke``: streaming parses partial JSON leniently.

    A truncated object arrives as a valid call with the keys present so far; the tool's own
    argument validation (missing required fields) is then what catches it.
    """
    scripted_openai.reply(malformed_tool_call("add_task", '{"title": "buy milk"'))
    model = (await model_for(scripted_openai, monkeypatch)).bind_tools([add_task])

    chunks = [chunk async for chunk in model.astream("add buy milk")]
    answer = chunks[0]
    for chunk in chunks[1:]:
        answer = answer + chunk

    assert isinstance(answer, AIMessage)
    assert answer.invalid_tool_calls == []
    assert answer.tool_calls[0]["args"] == {"title": "buy milk"}


async def test_invalid_tool_calls_are_answered_so_the_conversation_stays_valid(
    scripted_openai: ScriptedOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The model gets an error it can act on, then calls again correctly, over the real wire."""
    scripted_openai.reply(
        malformed_tool_call("add_task", '{"title": '),
        tool_calls(("add_task", {"title": "buy milk"})),
    )
    model = (await model_for(scripted_openai, monkeypatch)).bind_tools([add_task])
    first = await model.ainvoke([HumanMessage("add buy milk")])
    assert isinstance(first, AIMessage)

    answers = invalid_tool_call_messages(first)
    second = await model.ainvoke([HumanMessage("add buy milk"), first, *answers])

    assert isinstance(second, AIMessage)
    assert second.tool_calls[0]["args"] == {"title": "buy milk"}
    [answer] = answers
    assert isinstance(answer, ToolMessage)
    assert answer.status == "error"
    assert answer.tool_call_id == first.invalid_tool_calls[0]["id"]
    envelope = json.loads(str(answer.content))
    assert envelope["error"] == "VALIDATION_ERROR"
    assert "add_task" in envelope["message"]
    assert envelope["suggestion"]
    # What OpenAI requires: the assistant's call id is answered by a tool message.
    sent = scripted_openai.requests[1]["messages"]
    assert sent[1]["tool_calls"][0]["id"] == sent[2]["tool_call_id"]
    assert sent[2]["role"] == "tool"


def test_invalid_tool_call_messages_is_empty_for_a_clean_message() -> None:
    message = AIMessage("", tool_calls=[{"name": "add_task", "args": {}, "id": "c1"}])
    assert invalid_tool_call_messages(message) == []


@pytest.mark.parametrize("stream", [False, True], ids=["invoke", "stream"])
async def test_empty_choices_raise_a_clear_error(
    scripted_openai: ScriptedOpenAIServer, monkeypatch: pytest.MonkeyPatch, stream: bool
) -> None:
    scripted_openai.reply(empty_choices())
    model = await model_for(scripted_openai, monkeypatch)

    with pytest.raises(EmptyModelResponseError, match="without any choice"):
        if stream:
            async for _ in model.astream("hello", stream_usage=True):
                pass
        else:
            await model.ainvoke("hello")


async def test_requests_show_the_exact_messages_and_tools_sent(
    scripted_openai: ScriptedOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    scripted_openai.reply(tool_calls(("add_task", {"title": "buy milk", "due": "friday"})))
    model = (await model_for(scripted_openai, monkeypatch)).bind_tools(
        [add_task], tool_choice="add_task"
    )

    answer = await model.ainvoke("add buy milk for friday")

    assert isinstance(answer, AIMessage)
    assert answer.tool_calls[0]["name"] == "add_task"
    assert answer.tool_calls[0]["args"] == {"title": "buy milk", "due": "friday"}
    [request] = scripted_openai.requests
    assert request["model"] == "scripted"
    assert request["messages"] == [{"role": "user", "content": "add buy milk for friday"}]
    [sent_tool] = request["tools"]
    assert sent_tool["function"]["name"] == "add_task"
    assert sent_tool["function"]["parameters"]["required"] == ["title"]
    assert request["tool_choice"] == {"type": "function", "function": {"name": "add_task"}}


async def test_unscripted_request_fails_loudly_without_retries(
    scripted_openai: ScriptedOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = await model_for(scripted_openai, monkeypatch, max_retries=2)

    with pytest.raises(openai.InternalServerError, match="no reply queued for request #1"):
        await model.ainvoke("hello")
    assert len(scripted_openai.requests) == 1
