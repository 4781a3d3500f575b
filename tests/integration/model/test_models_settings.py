"""How a model setting is chosen and turned into a client, and the errors that name the fix."""

from __future__ import annotations

import pytest
from langchain_openai import ChatOpenAI

from agent.llm.chat_models import (
    ModelConfigurationError,
    get_chat_model,
    resolve_model_setting,
)
from tests.scripted_openai import ScriptedOpenAIServer, text

pytestmark = pytest.mark.usefixtures("isolated_model_env")


def test_default_is_local_without_configuration_or_key() -> None:
    assert resolve_model_setting(None) == "local"


def test_default_is_openai_when_only_an_api_key_is_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    assert resolve_model_setting(None) == "openai:gpt-4o-mini"


def test_environment_beats_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("TURNPLAN_MODEL", "openai:gpt-4.1")
    assert resolve_model_setting(None) == "openai:gpt-4.1"


def test_context_beats_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TURNPLAN_MODEL", "openai:gpt-4.1")
    assert resolve_model_setting("local") == "local"


def test_blank_values_count_as_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TURNPLAN_MODEL", "  ")
    assert resolve_model_setting("") == "local"


@pytest.mark.parametrize("setting", ["anthropic:claude", "gpt-4o", "openai:", "local:big"])
async def test_unknown_setting_lists_the_accepted_forms(setting: str) -> None:
    with pytest.raises(ModelConfigurationError) as raised:
        await get_chat_model(setting, timeout=5, max_retries=0)
    message = str(raised.value)
    assert repr(setting) in message
    assert '"local"' in message
    assert "openai:<model>" in message


async def test_openai_without_key_or_base_url_names_the_fix() -> None:
    with pytest.raises(ModelConfigurationError) as raised:
        await get_chat_model("openai:gpt-4o-mini", timeout=5, max_retries=0)
    message = str(raised.value)
    assert "OPENAI_API_KEY" in message
    assert "OPENAI_BASE_URL" in message
    assert "TURNPLAN_MODEL=local" in message


async def test_openai_model_uses_key_timeout_and_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")

    model = await get_chat_model("openai:gpt-4o-mini", timeout=12.5, max_retries=4)

    assert isinstance(model, ChatOpenAI)
    assert model.model_name == "gpt-4o-mini"
    assert model.request_timeout == 12.5
    assert model.max_retries == 4
    assert model.openai_api_key is not None
    assert model.openai_api_key.get_secret_value() == "sk-test"


async def test_base_url_without_key_works_with_a_placeholder_key(
    scripted_openai: ScriptedOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The vLLM / Ollama case: no key at all, and the request still goes out and is answered."""
    monkeypatch.setenv("OPENAI_BASE_URL", scripted_openai.base_url)
    scripted_openai.reply(text("hi"))

    model = await get_chat_model("openai:qwen2.5", timeout=5, max_retries=0)
    answer = await model.ainvoke("hello")

    assert answer.content == "hi"
    assert scripted_openai.requests[0]["model"] == "qwen2.5"


async def test_repeated_calls_reuse_one_client(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")

    first = await get_chat_model("openai:gpt-4o-mini", timeout=5, max_retries=2)
    again = await get_chat_model("openai:gpt-4o-mini", timeout=5, max_retries=2)
    other_timeout = await get_chat_model("openai:gpt-4o-mini", timeout=9, max_retries=2)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    other_url = await get_chat_model("openai:gpt-4o-mini", timeout=5, max_retries=2)

    assert again is first
    assert other_timeout is not first
    assert other_url is not first


async def test_local_uses_the_configured_running_server(
    scripted_openai: ScriptedOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TURNPLAN_LOCAL_MODEL_URL: nothing is started; the URL may omit /v1."""
    monkeypatch.setenv("TURNPLAN_LOCAL_MODEL_URL", scripted_openai.base_url.removesuffix("/v1"))
    scripted_openai.reply(text("from the running server"))

    model = await get_chat_model("local", timeout=5, max_retries=0)
    answer = await model.ainvoke("hello")

    assert answer.content == "from the running server"
    assert scripted_openai.requests[0]["model"] == "local"
