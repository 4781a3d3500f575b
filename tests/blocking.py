"""Blocking calls refused on the event loop, as ``langgraph dev`` refuses them."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from blockbuster import BlockBuster

# What `langgraph dev` tolerates (langgraph_runtime_inmem.queue._enable_blockbuster); everything
# else it refuses on the event loop, and so does this test.
SERVER_ALLOWS = (
    "os.stat",
    "os.listdir",
    "os.remove",
    "io.BufferedReader.read",
    "io.BufferedWriter.write",
    "io.TextIOWrapper.read",
    "io.TextIOWrapper.write",
    "threading.Lock.acquire",
)


@contextmanager
def blocking_calls_refused() -> Iterator[None]:
    """Blocking calls on the event loop raise ``BlockingError``, as under ``langgraph dev``."""
    blockbuster = BlockBuster(excluded_modules=[])
    allowed = [n for n in blockbuster.functions if n in SERVER_ALLOWS or n.startswith("os.path.")]
    for name in allowed:
        blockbuster.functions.pop(name)
    blockbuster.activate()
    try:
        yield
    finally:
        blockbuster.deactivate()
