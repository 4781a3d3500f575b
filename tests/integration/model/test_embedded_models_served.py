"""Every installed embedded model, for real: it starts with progress on stderr, and a call with
tools but no ``tool_choice`` (what ``bind_tools`` sends, so every call of the full prompt profile
and of planning ``auto``) comes back as a tool call, invoked and streamed.

The models' files are assembled in the configured cache (``TURNPLAN_MODEL_CACHE``, or
``~/.cache/turnplan/models``) rather than per test: the 1.5B model is 1.1 GB. A model whose
packages are not installed is skipped, naming its extra.
"""

from __future__ import annotations

import asyncio
import importlib.util
import signal
import sys
from collections.abc import AsyncIterator

import pytest
from langchain_core.messages import AIMessage, AIMessageChunk
from langchain_core.tools import tool

from agent.llm.chat_models import clear_model_cache, close_chat_models, get_chat_model
from agent.llm.embedded_models import EMBEDDED_MODELS, EmbeddedModel, missing_packages
from agent.llm.local_model import stop_shared_local_model_server

pytestmark = [
    pytest.mark.integration,
    pytest.mark.local_model,
    pytest.mark.skipif(
        importlib.util.find_spec("llama_cpp") is None,
        reason="the 'local' extra is not installed (pip install -e \".[local]\")",
    ),
]


def _installed(model: EmbeddedModel) -> pytest.MarkDecorator:
    return pytest.mark.skipif(
        bool(missing_packages(model)), reason=f"not installed: {model.install_command}"
    )


NAMES_A_TASK_AS_THE_TOOL = pytest.mark.xfail(
    strict=False,
    reason="Qwen2.5-Coder 0.5B sampled writes the task as the tool's name ({'name': 'buy milk'}) "
    "on some runs (seen 2026-11-29); the server passes on what the model wrote",
)
MODELS = [
    pytest.param(
        m,
        id=m.name,
        marks=[
            _installed(m),
            *([NAMES_A_TASK_AS_THE_TOOL] if m.name == "qwen2.5-coder-0.5b" else []),
        ],
    )
    for m in EMBEDDED_MODELS.values()
]


@tool
def add_task(title: str) -> str:
    """Add a task to the user's personal task list."""
    return title


@tool
def list_tasks() -> str:
    """Show the user's open tasks."""
    return "[]"


REQUEST = [
    ("system", "You manage the user's personal tasks with the tools you have."),
    ("user", "Add 'buy milk' to my tasks."),
]


@pytest.fixture
async def no_shared_servers(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[None]:
    monkeypatch.delenv("TURNPLAN_LOCAL_MODEL_URL", raising=False)
    await stop_shared_local_model_server()
    clear_model_cache()
    yield
    await close_chat_models()
    await stop_shared_local_model_server()


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.usefixtures("no_shared_servers")
async def test_a_call_with_tools_and_no_tool_choice_returns_a_tool_call(
    model: EmbeddedModel, capfd: pytest.CaptureFixture[str]
) -> None:
    chat = await get_chat_model(f"local:{model.name}", timeout=300, max_retries=0)
    shown = capfd.readouterr().err
    bound = chat.bind_tools([add_task, list_tasks])  # no tool_choice, as the graph binds them

    answer = await bound.ainvoke(REQUEST)

    assert f"loading {model.title}" in shown
    assert f"{model.title} ready in" in shown
    assert isinstance(answer, AIMessage)
    assert [call["name"] for call in answer.tool_calls] == ["add_task"], answer
    # The call is well formed; what a 270M model writes in it is not this test's to judge
    # (llama-cpp-python 0.3.36, freshly built, wrote a title without "milk": an invariant only).
    title = answer.tool_calls[0]["args"].get("title")
    assert isinstance(title, str) and title.strip()

    streamed: AIMessageChunk | None = None
    async for chunk in bound.astream(REQUEST):
        assert isinstance(chunk, AIMessageChunk)
        streamed = chunk if streamed is None else streamed + chunk
    assert streamed is not None
    assert [call["name"] for call in streamed.tool_calls] == ["add_task"], streamed


QWEN_05B = EMBEDDED_MODELS["qwen2.5-coder-0.5b"]


@_installed(QWEN_05B)
async def test_serve_model_shows_what_it_loads_and_when_it_is_ready() -> None:
    """The terminal is not blank while the model loads: `turnplan serve-model` (like `turnplan
    run` and the dev server, which start it through the same code) says what it loads."""
    command = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "agent.app.cli",
        "serve-model",
        "--model",
        f"local:{QWEN_05B.name}",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert command.stderr is not None
    shown: list[str] = []
    try:
        async with asyncio.timeout(300):
            while not any("ready in" in line for line in shown):
                line = (await command.stderr.readline()).decode()
                assert line, f"serve-model ended early: {shown}"
                shown.append(line)
    finally:
        command.send_signal(signal.SIGTERM)
        await command.communicate()

    assert any(line.startswith(f"loading {QWEN_05B.title} (491 MB)") for line in shown), shown
    assert command.returncode == 0


async def test_serve_model_refuses_an_unknown_model() -> None:
    command = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "agent.app.cli",
        "serve-model",
        "--model",
        "local:nope",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await command.communicate()

    assert command.returncode == 1
    assert b"Unknown embedded model 'nope'" in err
