"""Start ``langgraph dev`` the way README tells a user to, for integration tests.

README's recipe is: in the project folder, with the project installed, run ``langgraph dev``
with the repository's own ``langgraph.json`` and nothing but model settings in the environment.
So the server here runs in a fresh copy of the project (the working tree's files, uncommitted
changes included), with every ``TURNPLAN_*`` and ``OPENAI_*`` variable of the machine removed and
only the model settings set: the scripted OpenAI-compatible server as ``OPENAI_BASE_URL``, a
dummy ``OPENAI_API_KEY`` and ``TURNPLAN_MODEL=openai:scripted``. The database is therefore the
README default, ``<folder>/.turnplan/turnplan.db``, and the server's own state goes to
``<folder>/.langgraph_api/``.

Use the ``dev_server`` fixture (``tests/integration/conftest.py``), or ``copy_project`` and
``run_dev_server`` directly to start one with extra environment.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.scripted_openai import ScriptedOpenAIServer

REPO = Path(__file__).resolve().parents[1]
LANGGRAPH = Path(sys.executable).with_name("langgraph")
STARTUP_SECONDS = 90
SCRIPTED_MODEL = "openai:scripted"

OFFLINE_ENV = {
    "LANGGRAPH_CLI_NO_ANALYTICS": "1",
    "LANGGRAPH_NO_VERSION_CHECK": "true",
    "LANGSMITH_TRACING": "false",
}
"""README's offline flags for ``langgraph dev``."""

_STRIPPED_PREFIXES = ("TURNPLAN_", "OPENAI_")
_BANNER = re.compile(r"API:\s*(?:\x1b\[[0-9;]*m)?(http://127\.0\.0\.1:\d+)")


@dataclass(frozen=True)
class DevServer:
    """A running ``langgraph dev``: where to reach it and what it works on."""

    url: str
    """Base URL of the API, for ``langgraph_sdk.get_client(url=...)``."""
    folder: Path
    """The project copy the server runs in (its working directory)."""
    model: ScriptedOpenAIServer
    """The scripted model server its ``ChatOpenAI`` talks to; script replies on it."""
    log: Path
    """The server's combined stdout and stderr."""

    @property
    def database(self) -> Path:
        """The README default database file, relative to the server's working directory."""
        return self.folder / ".turnplan" / "turnplan.db"

    def log_tail(self, chars: int = 3000) -> str:
        """The end of the server log, for assertion messages."""
        return self.log.read_text(errors="replace")[-chars:]


def copy_project(destination: Path, source: Path = REPO) -> Path:
    """Copy the project's files as the working tree has them into ``destination``.

    Git-tracked files plus untracked ones that are not ignored, so uncommitted work is tested
    while local state (``.venv``, ``.turnplan``, ``.langgraph_api``, ``.env``) is not copied.
    """
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=source,
        check=True,
        capture_output=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        origin = source / name
        if not origin.is_file():  # deleted in the working tree, not yet committed
            continue
        target = destination / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(origin, target)
    return destination


def readme_environment(model: ScriptedOpenAIServer) -> dict[str, str]:
    """The machine's environment without turnplan or OpenAI settings, plus README's offline
    flags and the model settings for the scripted model server."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(_STRIPPED_PREFIXES)}
    env.update(OFFLINE_ENV)
    env.update(
        OPENAI_BASE_URL=model.base_url,
        OPENAI_API_KEY="test-key",
        TURNPLAN_MODEL=SCRIPTED_MODEL,
        PYTHONUNBUFFERED="1",
    )
    return env


@contextmanager
def run_dev_server(
    folder: Path,
    model: ScriptedOpenAIServer,
    *,
    extra_env: Mapping[str, str] | None = None,
    extra_args: Sequence[str] = (),
) -> Iterator[DevServer]:
    """Run README's ``langgraph dev`` command in ``folder`` (a project copy) until the block
    ends. ``extra_env`` adds to (or overrides) ``readme_environment``; ``extra_args`` are more
    ``langgraph dev`` options (e.g. ``--n-jobs-per-worker``)."""
    env = {**readme_environment(model), **(extra_env or {})}
    log = folder / "dev.log"
    command = [
        str(LANGGRAPH),
        "dev",
        "--no-browser",
        "--no-reload",
        "--host",
        "127.0.0.1",
        "--port",
        str(_free_port()),
        *extra_args,
    ]
    with log.open("w") as output:
        process = subprocess.Popen(
            command,
            cwd=folder,
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, so stopping it stops its children
        )
        try:
            url = _wait_for_api(process, log)
            yield DevServer(url=url, folder=folder, model=model, log=log)
        finally:
            _stop(process)


def _free_port() -> int:
    with closing(socket.socket()) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_for_api(process: subprocess.Popen[bytes], log: Path) -> str:
    """The URL from the server's "API:" banner (it silently moves off a taken port), once the
    server answers ``/ok``."""
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"langgraph dev exited:\n{log.read_text()[-3000:]}")
        banner = _BANNER.search(log.read_text(errors="replace"))
        if banner:
            url = banner.group(1)
            try:
                if httpx.get(f"{url}/ok", timeout=2).status_code == 200:
                    return url
            except httpx.HTTPError:
                pass
        time.sleep(0.25)
    raise AssertionError(f"langgraph dev did not start:\n{log.read_text()[-3000:]}")


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
