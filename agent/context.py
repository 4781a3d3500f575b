"""Run-time settings of the supervisor: the graph's ``context_schema``.

Callers pass these per run (``graph.ainvoke(..., context={...})``, or ``context`` in the
LangGraph SDK); Studio shows them as the assistant's context form. Every field has a default so a
run needs none. Environment variables are read elsewhere, with type conversion, not here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal


@dataclass(kw_only=True)
class Context:
    """Settings for one run of the supervisor graph."""

    model: str | None = None
    """Chat model as ``"provider:model"`` (``"openai:gpt-4o-mini"``) or ``"local"`` for the
    embedded model. Empty: ``TURNPLAN_MODEL``, else ``local``."""

    planning: Literal["auto", "always"] = "auto"
    """``auto``: the model plans multi-step requests and answers simple ones directly.
    ``always``: the first call of every turn must call ``create_todo`` (for models too weak to
    decide, and for products that want every turn on record as a plan)."""

    user_id: str = "local-user"
    """The authenticated user the personal-task tools act for. Never a tool argument."""

    conversation_id: str | None = None
    """Explicit conversation id; when empty the LangGraph thread id is used."""

    base_iterations: int = 10
    """LLM calls a turn may make before its budget is first checked (seed 004's base)."""

    max_iterations: int = 50
    """Absolute cap on LLM calls in one turn, however many todos remain."""

    max_reminders: int = 2
    """Times in a row the model may answer while plan items are open (each time it is reminded
    and sent back) before the turn ends with an honest partial answer."""

    history_limit: int = 10
    """Most recent messages sent with each LLM call (plus the system prompt and plan view)."""

    max_title_length: int = 200
    """Longest todo title, in characters, after trimming."""

    max_text_length: int = 2000
    """Longest todo ``context`` or ``completionCriteria``, in characters."""

    max_batch_items: int = 50
    """Most items one ``create_todo`` call may create."""

    request_timeout: float = 60.0
    """Seconds before one model request is abandoned (then retried)."""

    max_retries: int = 2
    """Retries of a model request after a 429, a 5xx or a timeout, with backoff."""

    prompt_profile: Literal["auto", "full", "compact"] = "auto"
    """What each LLM call sends. ``full``: the whole system prompt and every tool. ``compact``:
    for small models, a short prompt, only the tools the step needs with shortened schemas, and
    forced tool calls (see ``agent.compact_profile``). ``auto``: compact for ``local``."""

    def __post_init__(self) -> None:
        """Settings often arrive as JSON from a client or Studio's form: accept numbers sent as
        strings, and refuse values that would make a turn misbehave, naming the field."""
        for name in _POSITIVE_INTS:
            value = _as_number(name, getattr(self, name), int)
            if value < 1:
                raise ValueError(f"Context.{name} must be at least 1, got {value}.")
            setattr(self, name, value)
        if self.max_reminders < 0 or self.max_retries < 0:
            raise ValueError("Context.max_reminders and max_retries must not be negative.")
        self.request_timeout = _as_number("request_timeout", self.request_timeout, float)
        if self.request_timeout <= 0:
            raise ValueError("Context.request_timeout must be a positive number of seconds.")
        if self.base_iterations > self.max_iterations:
            raise ValueError(
                f"Context.base_iterations ({self.base_iterations}) must not exceed "
                f"max_iterations ({self.max_iterations})."
            )
        if self.prompt_profile not in ("auto", "full", "compact"):
            raise ValueError(
                "Context.prompt_profile must be 'auto', 'full' or 'compact', "
                f"got {self.prompt_profile!r}."
            )
        if self.planning not in ("auto", "always"):
            raise ValueError(f"Context.planning must be 'auto' or 'always', got {self.planning!r}.")


_POSITIVE_INTS = (
    "base_iterations",
    "max_iterations",
    "history_limit",
    "max_title_length",
    "max_text_length",
    "max_batch_items",
)


def _as_number(name: str, value: object, kind: type[int] | type[float]) -> Any:
    """``value`` as ``kind``; whole-number strings and floats are accepted for ints."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError(f"Context.{name} must be a number, got {value!r}.")
    try:
        number = float(value)
    except ValueError:
        raise ValueError(f"Context.{name} must be a number, got {value!r}.") from None
    if kind is int:
        if not number.is_integer():
            raise ValueError(f"Context.{name} must be a whole number, got {value!r}.")
        return int(number)
    return number
