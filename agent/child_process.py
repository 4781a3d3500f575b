"""Every process turnplan starts ends when turnplan ends, however turnplan ends.

Why: the embedded model's llama.cpp server (1.7-2.7 GB) and MCP stdio servers outlived a
``turnplan run``, ``turnplan serve-model`` or ``langgraph dev`` that got SIGTERM, SIGINT or
SIGKILL. An orderly stop (``finally``, ``atexit``) cannot run when the parent is killed, so the
child itself must be told: on Linux, a parent-death signal (``prctl(PR_SET_PDEATHSIG)``).

How, in two pieces:

- ``guarded(command)`` prefixes a command with this file run as a launcher. The launcher, a fresh
  single-threaded interpreter, asks for the parent-death signal, checks that the process that
  started it is still its parent (one that died before the signal was armed would never send
  it), optionally points its stderr at a log file, and ``exec``\\ s the command. The signal
  survives ``execve``, so the command itself gets it, under the same pid. A launcher rather than
  ``Popen(preexec_fn=...)``: ``preexec_fn`` is not safe in a process with threads (the dev
  server has many), and MCP clients start their servers themselves, so only the command line is
  ours to change.
- ``spawn(command, ...)`` is ``subprocess.Popen`` of the guarded command, forked from one
  long-lived thread of this module. Linux sends the parent-death signal when the *thread* that
  forked the child ends, not the process: a server started from ``asyncio.to_thread``'s worker
  would be killed when the event loop that owned that worker closed (measured: SIGTERM as
  ``asyncio.run`` shut its executor down), while the process (and the shared server's other
  users) lived on. The spawner thread ends only with the process. An MCP client forks its
  stdio servers from the event loop's thread, whose end closes their sessions anyway.

Elsewhere than Linux there is no parent-death signal: the launcher only execs, and children end
through the orderly stops alone.

This file is also run as a script (``python -I .../child_process.py``), so it imports nothing but
the standard library: the launcher must work whatever environment and working directory the
command is given (an MCP stdio client passes a minimal environment).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import ctypes
import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

PR_SET_PDEATHSIG = 1
"""``<linux/prctl.h>``: deliver a signal to this process when its parent thread dies."""

PARENT_GONE_EXIT = 75
"""The launcher's exit status when its parent died before the parent-death signal was armed."""

EXEC_FAILED_EXIT = 127
"""The launcher's exit status when the command cannot be executed (as a shell reports it)."""

LAUNCHER = Path(__file__).resolve()

HAS_PARENT_DEATH_SIGNAL = sys.platform.startswith("linux")


def guarded(
    command: Sequence[str],
    *,
    death_signal: signal.Signals = signal.SIGTERM,
    stderr_log: Path | None = None,
    parent: int | None = None,
) -> list[str]:
    """``command`` behind the launcher: it gets ``death_signal`` when ``parent`` (default: this
    process) dies, and its stderr goes to ``stderr_log`` (appended) when one is given.

    Only the process that forks the command may be ``parent``: the launcher refuses to run the
    command if its parent is another one (then the parent it was meant for is already gone).
    """
    if not command:
        raise ValueError("guarded() needs a command to run")
    launcher = [
        sys.executable,
        "-I",  # no PYTHONPATH, no user site, no script folder on sys.path: stdlib only
        "-S",  # no site-packages either: about 30 ms less per start
        str(LAUNCHER),
        "--parent",
        str(os.getpid() if parent is None else parent),
        "--signal",
        death_signal.name,
    ]
    if stderr_log is not None:
        launcher += ["--stderr", str(stderr_log)]
    return [*launcher, "--", *command]


def spawn(
    command: Sequence[str],
    *,
    death_signal: signal.Signals = signal.SIGTERM,
    stderr_log: Path | None = None,
    **popen: Any,
) -> subprocess.Popen[bytes]:
    """Start ``command`` so that it gets ``death_signal`` when this process dies, however it
    dies; ``popen`` are ``subprocess.Popen``'s other arguments. Safe from any thread."""
    argv = guarded(command, death_signal=death_signal, stderr_log=stderr_log)
    return _SPAWNER.run(lambda: subprocess.Popen(argv, **popen))


class _Spawner:
    """One daemon thread that forks every child ``spawn`` starts, for the process's whole life.

    A daemon thread ends only when the process ends (it is never joined at interpreter
    shutdown), which is exactly when its children should get their parent-death signal. A
    forked copy of this process starts its own thread on first use.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._owner = 0
        self._requests: queue.SimpleQueue[
            tuple[Callable[[], Any], concurrent.futures.Future[Any]]
        ] = queue.SimpleQueue()

    def run(self, job: Callable[[], subprocess.Popen[bytes]]) -> subprocess.Popen[bytes]:
        with self._lock:
            if self._owner != os.getpid():
                self._requests = queue.SimpleQueue()
                thread = threading.Thread(
                    target=self._serve,
                    args=(self._requests,),
                    name="turnplan-child-spawner",
                    daemon=True,
                )
                thread.start()
                self._owner = os.getpid()
            requests = self._requests
        done: concurrent.futures.Future[subprocess.Popen[bytes]] = concurrent.futures.Future()
        requests.put((job, done))
        return done.result()

    @staticmethod
    def _serve(
        requests: queue.SimpleQueue[tuple[Callable[[], Any], concurrent.futures.Future[Any]]],
    ) -> None:
        while True:
            job, done = requests.get()
            try:
                done.set_result(job())
            except BaseException as error:  # handed to the caller, who raises it
                done.set_exception(error)


_SPAWNER = _Spawner()


def _arm_parent_death_signal(signum: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signum, 0, 0, 0) != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"prctl(PR_SET_PDEATHSIG): {os.strerror(error)}")


def _parse(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="child_process",
        description="Run a command that ends when the given parent process ends.",
    )
    parser.add_argument("--parent", type=int, required=True, help="pid that must stay alive")
    parser.add_argument("--signal", default="SIGTERM", help="signal sent when the parent dies")
    parser.add_argument("--stderr", default=None, help="append the command's stderr to this file")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command")
    args = parser.parse_args(argv)
    if args.command[:1] == ["--"]:
        args.command = args.command[1:]
    if not args.command:
        parser.error("no command given after --")
    return args


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """The launcher: arm the parent-death signal, check the parent, redirect stderr, exec."""
    args = _parse(sys.argv[1:] if argv is None else argv)
    if HAS_PARENT_DEATH_SIGNAL:
        try:
            _arm_parent_death_signal(signal.Signals[args.signal])
        except OSError as error:  # a sandbox that forbids prctl: run, but say what is lost
            print(
                f"child_process: {error}; {args.command[0]!r} will not end with its parent "
                "if the parent is killed",
                file=sys.stderr,
            )
    if os.getppid() != args.parent:
        # The parent died between fork and prctl (its children were re-parented), so no signal
        # will ever come: do not start something nobody will stop.
        os._exit(PARENT_GONE_EXIT)
    if args.stderr:
        Path(args.stderr).parent.mkdir(parents=True, exist_ok=True)
        log = os.open(args.stderr, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.dup2(log, 2)
        os.close(log)
    try:
        os.execvp(args.command[0], args.command)
    except OSError as error:
        print(f"child_process: cannot run {args.command[0]!r}: {error}", file=sys.stderr)
        os._exit(EXEC_FAILED_EXIT)


if __name__ == "__main__":
    main()
