"""Whether a process has really ended: what the tests of processes turnplan starts wait for."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path


def is_gone(pid: int) -> bool:
    """No such process, or only its exit status left: a zombie holds no memory, ports or files.
    The main thread of a killed process is a zombie while its other threads still exit, so
    every thread must be one."""
    states = []
    for stat in Path(f"/proc/{pid}/task").glob("*/stat"):  # none once the process is reaped
        with contextlib.suppress(FileNotFoundError):  # that thread has just gone
            states.append(stat.read_text().rsplit(")", 1)[1].split()[0])
    return all(state == "Z" for state in states)


def wait_until_gone(pid: int, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if is_gone(pid):
            return True
        time.sleep(0.05)
    return is_gone(pid)
