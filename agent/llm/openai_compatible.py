"""``CompatibleChatOpenAI``: the chat model of ``local`` and ``openai:`` settings
(``agent.llm.chat_models``). A module of its own so that importing turnplan does not import
``openai`` and ``langchain_openai`` (over a second): ``chat_models`` imports it when it first
builds such a model."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import openai
from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatGenerationChunk, ChatResult
from langchain_openai import ChatOpenAI
from pydantic import SecretStr

from agent.llm.model_errors import EmptyModelResponseError


class CompatibleChatOpenAI(ChatOpenAI):
    """``ChatOpenAI`` for ``local`` and ``openai:`` models: what ``init_chat_model``'s plain
    ``ChatOpenAI`` gets wrong on OpenAI-compatible servers, fixed; everything else inherited.

    - An assistant message that only calls tools is sent with ``"content": ""``, not ``null``,
      which llama.cpp's server (the embedded model, ``turnplan serve-model``) rejects with a 500.
    - ``legacy_max_tokens`` sends the token cap as ``max_tokens``, the field llama.cpp reads: the
      compact profile's per-step caps would otherwise be ignored.
    - A response without any choice raises ``EmptyModelResponseError`` (a ``ModelAPIError``), not
      an ``IndexError`` (non-streaming) or a bare "No generations found in stream" (streaming,
      which LangGraph's ``messages`` stream mode makes ``ainvoke`` use).
    """

    legacy_max_tokens: bool = False
    """Send the token cap as ``max_tokens`` (the field llama-cpp-python's server reads) instead
    of ``max_completion_tokens``, which langchain-openai sends and that server ignores: without
    this, a capped local model could generate until its context is full."""

    def _get_request_payload(
        self,
        input_: LanguageModelInput,
        *,
        stop: list[str] | None = None,
        **kwargs: Any,
    ) -> dict[str, Any]:
        # OpenAI accepts `"content": null` on an assistant message that only calls tools, and
        # langchain-openai sends exactly that; llama.cpp's server (and some other compatible
        # servers) reject it with a 500. An empty string means the same to every server.
        payload: dict[str, Any] = super()._get_request_payload(input_, stop=stop, **kwargs)
        if self.legacy_max_tokens and "max_completion_tokens" in payload:
            payload["max_tokens"] = payload.pop("max_completion_tokens")
        for message in payload.get("messages", []):
            if message.get("role") == "assistant" and message.get("content") is None:
                message["content"] = ""
        return payload

    def _create_chat_result(
        self, response: dict[str, Any] | Any, generation_info: dict[str, Any] | None = None
    ) -> ChatResult:
        result = super()._create_chat_result(response, generation_info)
        if not result.generations:
            raise EmptyModelResponseError(_empty_message(self.model_name))
        return result

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        saw_choice = False
        for chunk in super()._stream(messages, stop, run_manager, **kwargs):
            saw_choice = saw_choice or _from_choice(chunk)
            yield chunk
        if not saw_choice:
            raise EmptyModelResponseError(_empty_message(self.model_name))

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        saw_choice = False
        async for chunk in super()._astream(messages, stop, run_manager, **kwargs):
            saw_choice = saw_choice or _from_choice(chunk)
            yield chunk
        if not saw_choice:
            raise EmptyModelResponseError(_empty_message(self.model_name))


def _from_choice(chunk: ChatGenerationChunk) -> bool:
    # langchain-openai marks chunks built from a choice with the provider; usage-only chunks
    # (sent after an empty ``choices`` list) carry no such mark.
    return chunk.message.response_metadata.get("model_provider") == "openai"


def _empty_message(model: str) -> str:
    return (
        f"The model server answered without any choice for model {model!r} "
        "(an empty 'choices' list). The server may have failed internally or not support this "
        "request; check its logs."
    )


def compatible_chat_openai(
    name: str,
    base_url: str | None,
    api_key: str,
    timeout: float,
    max_retries: int,
    max_tokens: int | None,
) -> BaseChatModel:
    return CompatibleChatOpenAI(
        model=name,
        base_url=base_url,
        api_key=SecretStr(api_key),
        timeout=timeout,
        max_retries=max_retries,
        max_tokens=max_tokens,
        legacy_max_tokens=max_tokens is not None,
        # Our own async HTTP client: langchain-openai otherwise shares one process-wide (cached
        # by base URL and timeout), and an async client cannot outlive the event loop it first
        # ran on, so a second `asyncio.run` in the same process would fail.
        http_async_client=openai.DefaultAsyncHttpxClient(),
    )
