"""How a model setting is chosen and turned into a client, and the errors that name the fix."""

from __future__ import annotations

import sys

import pytest
from langchain_anthropic import ChatAnthropic
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_openai import ChatOpenAI

from agent.llm.chat_models import (
    MissingModelPackageError,
    ModelConfigurationError,
    get_chat_model,
    limit_arguments,
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


@pytest.mark.parametrize("setting", ["gpt-4o", "openai:", ":claude", "anthropic:"])
async def test_unknown_setting_lists_the_accepted_forms(setting: str) -> None:
    with pytest.raises(ModelConfigurationError) as raised:
        await get_chat_model(setting, timeout=5, max_retries=0)
    message = str(raised.value)
    assert repr(setting) in message
    assert '"local"' in message
    assert "openai:<model>" in message
    assert '"<provider>:<model>"' in message


async def test_an_unknown_embedded_model_lists_the_embedded_models() -> None:
    with pytest.raises(ModelConfigurationError) as raised:
        await get_chat_model("local:big", timeout=5, max_retries=0)
    message = str(raised.value)
    assert "'big'" in message
    assert "local:qwen2.5-coder-1.5b" in message


async def test_unknown_provider_is_named_with_the_accepted_forms() -> None:
    with pytest.raises(ModelConfigurationError) as raised:
        await get_chat_model("nosuch:model-1", timeout=5, max_retries=0)
    first_line, *rest = str(raised.value).splitlines()
    assert first_line.startswith("Unknown model provider 'nosuch'. Accepted forms:")
    assert "anthropic:claude-sonnet-4-5" in first_line
    # LangChain's own list of the providers it knows follows.
    assert "google_genai" in "\n".join(rest)


async def test_missing_provider_package_names_the_install_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A provider LangChain knows whose integration is not installed: the error says what to
    install, and is a ModelConfigurationError, so a run reports it like any bad setting."""
    monkeypatch.setitem(sys.modules, "langchain_google_genai", None)  # import fails as if absent

    with pytest.raises(MissingModelPackageError) as raised:
        await get_chat_model("google_genai:gemini-2.5-flash", timeout=5, max_retries=0)

    error = raised.value
    assert isinstance(error, ModelConfigurationError)
    assert error.package == "langchain-google-genai"
    assert error.install_command == "pip install langchain-google-genai"
    assert str(error) == (
        "The model setting 'google_genai:gemini-2.5-flash' needs the package "
        "langchain-google-genai, which is not installed: pip install langchain-google-genai"
    )


async def test_provider_model_gets_the_run_timeout_and_retries(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Built by init_chat_model, with the settings under its own names and none of them left
    over to be sent to the API as request parameters."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")

    model = await get_chat_model("anthropic:claude-sonnet-4-5", timeout=12.5, max_retries=4)

    assert isinstance(model, ChatAnthropic)
    assert model.model == "claude-sonnet-4-5"
    assert model.default_request_timeout == 12.5
    assert model.max_retries == 4
    assert model.model_kwargs == {}


async def test_provider_models_are_reused_until_their_environment_changes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")

    first = await get_chat_model("anthropic:claude-sonnet-4-5", timeout=5, max_retries=2)
    again = await get_chat_model("anthropic:claude-sonnet-4-5", timeout=5, max_retries=2)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")
    other_url = await get_chat_model("anthropic:claude-sonnet-4-5", timeout=5, max_retries=2)

    assert again is first
    assert other_url is not first
    assert isinstance(other_url, ChatAnthropic)
    assert other_url.anthropic_api_url == "http://127.0.0.1:9"


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


@pytest.mark.parametrize(
    ("model_class", "arguments", "ignored"),
    [
        (ChatAnthropic, {"timeout": 7.0, "max_retries": 3}, []),
        (ChatOpenAI, {"timeout": 7.0, "max_retries": 3}, []),
        (FakeListChatModel, {}, ["request_timeout", "max_retries"]),
    ],
)
def test_limits_go_only_to_arguments_the_chat_model_declares(
    model_class: type, arguments: dict[str, object], ignored: list[str]
) -> None:
    """A chat model without such fields gets none: LangChain would otherwise send the unknown
    argument to the provider's API as a request parameter."""
    assert limit_arguments(model_class, {"request_timeout": 7.0, "max_retries": 3}) == (
        arguments,
        ignored,
    )
