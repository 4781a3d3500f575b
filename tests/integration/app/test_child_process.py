"""Children started through ``agent.child_process`` end with their parent, however it ends.

Real processes and real signals, no model: a parent script starts a sleeper the way turnplan
starts its model server (from ``asyncio.to_thread``'s worker, which then waits for it to be
ready, in an ``asyncio.run`` that has ended since), then dies. Linux only: elsewhere there is no
parent-death signal.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.child_process import EXEC_FAILED_EXIT, PARENT_GONE_EXIT, guarded
from tests.processes import is_gone, wait_until_gone

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's"
)

REPO = Path(__file__).resolve().parents[3]
SLEEPER = [sys.executable, "-c", "import time; time.sleep(120)"]

PARENT = textwrap.dedent(
    """
    import asyncio, signal, sys, time
    from agent.child_process import spawn

    # Ctrl-C as in a terminal, even when the tests run as a shell's background job (which
    # inherits SIGINT ignored, and Python then installs no handler for it).
    signal.signal(signal.SIGINT, signal.default_int_handler)

    def start_and_wait_until_ready():
        child = spawn({sleeper!r})
        time.sleep(1)  # as LocalModelServer.start polls the server in the same worker thread
        return child

    async def start():
        return await asyncio.to_thread(start_and_wait_until_ready)

    child = asyncio.run(start())  # the worker thread that asked for the child ends here
    print(child.pid, flush=True)
    time.sleep(0.5)
    print("alive" if child.poll() is None else f"died {{child.returncode}}", flush=True)
    if sys.argv[1] == "exit":
        sys.exit(0)
    time.sleep(120)
    """
)


@pytest.fixture
def sleepers() -> Iterator[list[int]]:
    """Pids to kill if a test fails with them still running."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        if not is_gone(pid):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("ending", ["SIGKILL", "SIGTERM", "SIGINT", "exit"])
def test_a_spawned_child_outlives_the_thread_that_asked_and_dies_with_the_process(
    ending: str, sleepers: list[int]
) -> None:
    with subprocess.Popen(
        [sys.executable, "-c", PARENT.format(sleeper=SLEEPER), ending],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,  # SIGINT's KeyboardInterrupt traceback
        text=True,
    ) as parent:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        sleepers.append(child)

        # The worker thread's end did not kill it (the parent-death signal is per thread).
        assert parent.stdout.readline().strip() == "alive"
        if ending != "exit":
            parent.send_signal(signal.Signals[ending])
        parent.wait(timeout=30)

    assert wait_until_gone(child), f"the child {child} outlived its parent ({ending})"


def test_a_parent_that_is_already_gone_means_the_command_never_runs(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    command = [sys.executable, "-c", f"open({str(marker)!r}, 'w')"]

    # Parent 1 is not the process that starts it: the parent it was meant for has died.
    result = subprocess.run(guarded(command, parent=1), timeout=30)

    assert result.returncode == PARENT_GONE_EXIT
    assert not marker.exists()


def test_stderr_goes_to_the_log_file_and_nothing_else_changes(tmp_path: Path) -> None:
    log = tmp_path / "logs" / "server.log"
    command = [
        sys.executable,
        "-c",
        "import os, sys; print('to stdout'); print('to stderr', file=sys.stderr); "
        "sys.exit(int(os.environ['EXIT_WITH']))",
    ]

    result = subprocess.run(
        guarded(command, stderr_log=log),
        capture_output=True,
        text=True,
        env={**os.environ, "EXIT_WITH": "3"},
        timeout=30,
    )

    assert result.returncode == 3
    assert result.stdout == "to stdout\n"
    assert result.stderr == ""
    assert log.read_text() == "to stderr\n"


def test_a_command_that_cannot_run_says_so() -> None:
    result = subprocess.run(
        guarded(["no-such-command-here"]), capture_output=True, text=True, timeout=30
    )

    assert result.returncode == EXEC_FAILED_EXIT
    assert "cannot run 'no-such-command-here'" in result.stderr
