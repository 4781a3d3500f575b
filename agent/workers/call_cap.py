"""The turn's LLM-call budget, enforced inside a delegated worker.

A worker is any compiled graph (``agent.workers.worker.Worker``), so its model calls cannot be
counted in its nodes. LangChain fires ``on_chat_model_start`` (or ``on_llm_start``) for every
chat-model call of a run before the request is sent, and passes the run's callbacks down to
every nested runnable: a handler added to the worker's config sees each call of the worker
whatever graph it is, and raising there stops the call before the model is asked
(``raise_error``). The supervisor's own calls never pass through it.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from langchain_core.callbacks import AsyncCallbackHandler


class WorkerBudgetSpent(Exception):
    """The worker asked for one LLM call more than the turn had left for it."""

    def __init__(self, allowed: int) -> None:
        super().__init__(f"the turn's LLM-call budget left {allowed} call(s) for this worker")
        self.allowed = allowed


class WorkerCallCap(AsyncCallbackHandler):
    """Counts a worker's LLM calls and refuses the one past ``allowed``.

    ``made`` is the calls that were really sent (a refused one is not counted), so the turn is
    charged exactly what the worker spent."""

    raise_error = True
    """An exception here must stop the call: LangChain logs and swallows it otherwise."""

    def __init__(self, allowed: int) -> None:
        super().__init__()
        self.allowed = max(0, allowed)
        self.made = 0

    def _count(self) -> None:
        if self.made >= self.allowed:
            raise WorkerBudgetSpent(self.allowed)
        self.made += 1

    async def on_chat_model_start(
        self, serialized: dict[str, Any], messages: list[list[Any]], *, run_id: UUID, **kwargs: Any
    ) -> None:
        """A chat model's call is about to be sent."""
        self._count()

    async def on_llm_start(
        self, serialized: dict[str, Any], prompts: list[str], *, run_id: UUID, **kwargs: Any
    ) -> None:
        """A completion model's call is about to be sent."""
        self._count()
