"""The one measurement path every system goes through: OpenAI chat-completions request bodies.

Oracles are functions from a request body (what a real model behind an OpenAI-compatible API
receives: ``messages`` and ``tools``) to a scripted ``Reply``. The same oracle answers

- over HTTP, from ``tests.scripted_openai.ScriptedOpenAIServer`` behind ``ChatOpenAI``: calls and
  tokens come from the server's deterministic ``usage`` (characters / 4 of the real request
  JSON, tool schemas included), identical for every system;
- in process, from ``InstantChatModel``, which builds the same body with LangChain's public
  converters and calls the oracle with no network, so the framework's own overhead is not
  drowned by HTTP latency. The time spent inside the model is recorded and subtracted.

The helpers below read a body the way a model would: by role and by tool-call id.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForLLMRun,
    BaseCallbackHandler,
    CallbackManagerForLLMRun,
)
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage, convert_to_openai_messages
from langchain_core.outputs import ChatGeneration, ChatResult, LLMResult
from langchain_core.runnables import Runnable
from langchain_core.utils.function_calling import convert_to_openai_tool
from langchain_openai import ChatOpenAI
from pydantic import ConfigDict, Field, SecretStr

from tests.fakes import plan_view
from tests.scripted_openai import Reply, ScriptedOpenAIServer

Body = dict[str, Any]
Oracle = Callable[[Body], Reply]
ToolCallArgs = tuple[str, dict[str, Any]]

_ids = itertools.count()


# -- reading a request body ------------------------------------------------------------------


def text_of(content: Any) -> str:
    """The text of a message's ``content``: a string, or a list of text parts."""
    if isinstance(content, list):
        return "\n".join(
            str(part.get("text", "")) if isinstance(part, dict) else str(part) for part in content
        )
    return "" if content is None else str(content)


def turn_messages(body: Body) -> list[dict[str, Any]]:
    """The messages after the last user message: what happened in this turn so far.

    turnplan's reminders are user messages too, but a turn's own tool traffic never is, so
    reading "since the last user message" is what a model would do as well. turnplan's plan
    view, sent as the last message, is not read as the user's: it is a view, not a new request.
    """
    messages: list[dict[str, Any]] = list(body.get("messages") or [])
    if messages and plan_view(messages[-1:]):
        messages = messages[:-1]
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
    return messages[last_user + 1 :]


def calls_of(message: dict[str, Any]) -> list[ToolCallArgs]:
    """The tool calls of an assistant message as (name, parsed arguments)."""
    calls: list[ToolCallArgs] = []
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        raw = function.get("arguments") or "{}"
        calls.append((str(function.get("name")), json.loads(raw) if isinstance(raw, str) else raw))
    return calls


def assistant_calls(body: Body) -> list[list[ToolCallArgs]]:
    """The tool calls of each assistant message of this turn, oldest first."""
    return [calls_of(m) for m in turn_messages(body) if m.get("role") == "assistant"]


def tool_results(body: Body) -> list[tuple[str, str]]:
    """(tool name, result text) of every tool message in the request, oldest first."""
    names: dict[str, str] = {}
    results: list[tuple[str, str]] = []
    for message in body.get("messages") or []:
        if message.get("role") == "assistant":
            for call in message.get("tool_calls") or []:
                names[str(call.get("id"))] = str((call.get("function") or {}).get("name"))
        elif message.get("role") == "tool":
            name = names.get(str(message.get("tool_call_id")), "?")
            results.append((name, text_of(message.get("content"))))
    return results


# -- the in-process instant model ------------------------------------------------------------


def ai_message(reply: Reply) -> AIMessage:
    """The ``AIMessage`` a chat model would parse from ``reply``."""
    return AIMessage(
        content=reply.content or "",
        tool_calls=[
            {
                "name": name,
                "args": json.loads(raw),
                "id": f"call_i{next(_ids)}",
                "type": "tool_call",
            }
            for name, raw in reply.tool_calls
        ],
    )


class InstantChatModel(BaseChatModel):
    """A chat model that answers at once from an oracle, with the request an HTTP model gets.

    ``bind_tools`` binds OpenAI tool schemas exactly as ``ChatOpenAI`` does, so the oracle sees
    the same ``tools`` list; ``model_seconds`` is the time spent building bodies and consulting
    the oracle, which the overhead figure subtracts.

    ``latency``: each asynchronous call takes at least this many seconds (the rest of it in
    ``asyncio.sleep``, so the event loop is free meanwhile, as with a real model behind HTTP):
    the share of a turn's wall time that is the harness (``bench.share``) is measured against a
    model that takes time, which lets work the harness does in the background overlap it.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    oracle: Oracle
    model_seconds: float = 0.0
    calls: int = 0
    latency: float = 0.0
    bodies: list[Body] = Field(default_factory=list)
    keep_bodies: bool = False

    @property
    def _llm_type(self) -> str:
        return "bench-instant"

    def bind_tools(
        self, tools: Sequence[Any], *, tool_choice: Any = None, **kwargs: Any
    ) -> Runnable[LanguageModelInput, AIMessage]:
        schemas = [convert_to_openai_tool(tool) for tool in tools]
        return self.bind(tools=schemas, **kwargs)

    def _answer(self, messages: list[BaseMessage], tools: Any) -> ChatResult:
        started = time.perf_counter()
        body: Body = {"messages": convert_to_openai_messages(messages), "tools": tools or []}
        message = ai_message(self.oracle(body))
        self.calls += 1
        if self.keep_bodies:
            self.bodies.append(body)
        self.model_seconds += time.perf_counter() - started
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return self._answer(messages, kwargs.get("tools"))

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        started = time.perf_counter()
        result = self._answer(messages, kwargs.get("tools"))
        if self.latency > 0:
            await asyncio.sleep(max(0.0, self.latency - (time.perf_counter() - started)))
        return result


# -- usage as the client sees it ------------------------------------------------------------


class UsageRecorder(BaseCallbackHandler):
    """Per-call token usage as ``ChatOpenAI`` reports it from the server's ``usage`` block."""

    def __init__(self) -> None:
        self.prompt: list[int] = []
        self.completion: list[int] = []

    def on_llm_end(self, response: LLMResult, **kwargs: Any) -> None:
        for generations in response.generations:
            for generation in generations:
                message = getattr(generation, "message", None)
                usage = getattr(message, "usage_metadata", None)
                if usage is not None:
                    self.prompt.append(int(usage["input_tokens"]))
                    self.completion.append(int(usage["output_tokens"]))


def scripted_chat_model(
    server: ScriptedOpenAIServer, callbacks: list[BaseCallbackHandler] | None = None
) -> ChatOpenAI:
    """``ChatOpenAI`` pointed at the scripted server, as every HTTP figure of the bench uses it:
    no retries (a failed request is a failed run), a generous timeout."""
    return ChatOpenAI(
        model="scripted",
        base_url=server.base_url,
        api_key=SecretStr("bench"),
        max_retries=0,
        timeout=60,
        callbacks=callbacks,
    )
