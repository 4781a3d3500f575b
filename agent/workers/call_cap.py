"""The turn's LLM-call budget, enforced inside a delegated worker.

A worker is any compiled graph (``agent.workers.worker.Worker``), so its model calls cannot be
counted in its nodes. LangChain fires ``on_chat_model_start`` (or ``on_llm_start``) for every
chat-model call of a run before the request is sent, and passes the run's callbacks down to
every nested runnable: a handler added to the worker's config sees each call of the worker
whatever graph it is, and raising there stops the call before the model is asked
(``raise_error``). The supervisor's own calls never pass through it.

The same handler counts the worker's tokens (issue 30 §4): each answer's ``usage_metadata``, or
an estimate from the characters sent and received when the server reports none (as
``agent.turn.usage`` does for the supervisor), and refuses a call once the worker's tokens have
passed what ``Context.max_turn_tokens`` left the turn, the same rule the supervisor follows.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from langchain_core.callbacks import AsyncCallbackHandler
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import LLMResult

from agent.turn.usage import call_usage


class WorkerBudgetSpent(Exception):
    """The worker asked for one LLM call more than the turn had left for it."""

    def __init__(self, allowed: int) -> None:
        super().__init__(f"the turn's LLM-call budget left {allowed} call(s) for this worker")
        self.allowed = allowed


class WorkerTokensSpent(WorkerBudgetSpent):
    """The worker asked for a call after its tokens passed what the turn's token budget
    (``Context.max_turn_tokens``) had left for it."""

    def __init__(self, allowed: int, spent: int) -> None:
        Exception.__init__(
            self,
            f"the turn's token budget left {allowed} token(s) for this worker; it spent {spent}",
        )
        self.allowed = allowed
        self.spent = spent


class WorkerCallCap(AsyncCallbackHandler):
    """Counts a worker's LLM calls and tokens and refuses the call past ``allowed``, or the call
    asked for once its tokens passed ``token_allowance`` (None: no token budget).

    ``made`` is the calls that were really sent (a refused one is not counted), so the turn is
    charged exactly what the worker spent; ``prompt_tokens``/``completion_tokens`` likewise."""

    raise_error = True
    """An exception here must stop the call: LangChain logs and swallows it otherwise."""

    def __init__(self, allowed: int, token_allowance: int | None = None) -> None:
        super().__init__()
        self.allowed = max(0, allowed)
        self.token_allowance = token_allowance
        self.made = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.estimated = False
        self._prompts: dict[UUID, list[BaseMessage]] = {}

    @property
    def tokens(self) -> int:
        """Prompt plus completion tokens of the worker's calls so far."""
        return self.prompt_tokens + self.completion_tokens

    @property
    def tokens_spent(self) -> bool:
        """The worker has passed the tokens the turn left it (the supervisor's own rule:
        ``agent.turn.usage.tokens_exhausted``)."""
        return self.token_allowance is not None and self.tokens > self.token_allowance

    def _count(self) -> None:
        if self.tokens_spent:
            raise WorkerTokensSpent(max(0, self.token_allowance or 0), self.tokens)
        if self.made >= self.allowed:
            raise WorkerBudgetSpent(self.allowed)
        self.made += 1

    async def on_chat_model_start(
        self, serialized: dict[str, Any], messages: list[list[Any]], *, run_id: UUID, **kwargs: Any
    ) -> None:
        """A chat model's call is about to be sent."""
        self._count()
        self._prompts[run_id] = [m for batch in messages for m in batch]

    async def on_llm_start(
        self, serialized: dict[str, Any], prompts: list[str], *, run_id: UUID, **kwargs: Any
    ) -> None:
        """A completion model's call is about to be sent."""
        self._count()
        self._prompts[run_id] = [AIMessage(content=text) for text in prompts]

    async def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        """A call came back: add what it cost (reported, else estimated from characters)."""
        prompt = self._prompts.pop(run_id, [])
        for generations in response.generations:
            for generation in generations:
                message = getattr(generation, "message", None)
                answer = message if isinstance(message, AIMessage) else None
                if answer is None:
                    answer = AIMessage(content=getattr(generation, "text", "") or "")
                usage = call_usage(answer, prompt)
                self.prompt_tokens += usage.prompt_tokens
                self.completion_tokens += usage.completion_tokens
                self.estimated = self.estimated or usage.estimated
                prompt = []  # the prompt is counted once per request

    def spent(self, todo_id: str) -> dict[str, Any]:
        """The ``workerUsage`` entry of this delegation (``SupervisorState.workerUsage``)."""
        return {
            "todoId": todo_id,
            "llmCalls": self.made,
            "promptTokens": self.prompt_tokens,
            "completionTokens": self.completion_tokens,
            "estimated": self.estimated,
        }
