"""Run cleanup on an event loop just before ``asyncio.run`` closes it.

A script that runs each turn with its own ``asyncio.run`` ends one loop per turn. Whatever was
opened on such a loop (a database connection pool, an HTTP client) can only be closed on it, and
there is no "loop closing" callback in asyncio. There is one thing ``asyncio.run`` always does
before closing a loop: ``shutdown_asyncgens()``, which closes every async generator still
suspended on that loop. ``call_at_loop_shutdown`` parks one such generator whose ``finally``
awaits the cleanup, on the loop itself. A loop that never ends (a server) never runs it.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable

Cleanup = Callable[[], Awaitable[object]]


async def _parked(cleanup: Cleanup) -> AsyncGenerator[None, None]:
    try:
        yield
    finally:
        await cleanup()


async def call_at_loop_shutdown(cleanup: Cleanup) -> AsyncGenerator[None, None]:
    """Arrange for ``cleanup`` to run when the running loop shuts down its async generators.

    Keep the returned generator referenced for as long as the cleanup should wait (dropping it
    runs the cleanup soon after, on the same loop); ``aclose()`` it to run the cleanup now.
    """
    parked = _parked(cleanup)
    await parked.__anext__()  # started on this loop, so the loop will close it
    return parked
