"""Asking the LangGraph server what became of one of its runs (``agent.turn.superseded``).

A graph served by LangGraph Server reaches the server it runs in through ``langgraph_sdk``'s
in-process client (``get_client()`` with no URL, the SDK's documented way for code inside the
server). A rollback deletes the run (``runs.get`` answers 404); an interrupt leaves it with the
status ``interrupted``. Only the served graph is built with this (``agent.app.served``): a
Python caller has no server to ask.
"""

from __future__ import annotations

import logging

import httpx
from langgraph_sdk import get_client
from langgraph_sdk.errors import NotFoundError

from agent.turn.superseded import RunFate

logger = logging.getLogger("agent.run_fates")


async def server_run_fate(thread_id: str, run_id: str) -> RunFate:
    """What became of the run ``run_id`` of the thread: ``rolled_back`` when the server no
    longer has it, ``interrupted`` when it was cancelled that way, else ``other``. A server
    that cannot be asked (an error, a timeout) is logged and answers ``other``: nothing is
    closed on a guess, and the new turn goes on."""
    try:
        async with get_client() as client:
            run = await client.runs.get(thread_id, run_id)
    except NotFoundError:
        return "rolled_back"
    except (httpx.HTTPError, OSError) as error:
        logger.warning("could not ask the server about run %s: %s", run_id, error)
        return "other"
    return "interrupted" if run["status"] == "interrupted" else "other"
