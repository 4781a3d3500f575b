"""Completion checks: what a row must pass before it closes as completed (issue 29 §2).

Two kinds, both optional and off by default:

- ``build_graph(completion_checks={agentType or "*": check})``: a function, sync or async,
  called as ``check(row, evidence)`` with the row in ``list_todo``'s shape (``outcome`` the one
  the model is recording) and its evidence (``agent.turn.evidence.todo_evidence``); it returns
  None to accept or a reason to refuse. A row's own ``agentType`` check runs first, then ``"*"``.
- ``Context.verifier_model``: a row whose ``completionCriteria`` is not empty is judged by that
  model, without tools, against its criteria and evidence (prompt ``completion_verifier``).

A refusal is the model's to act on (``COMPLETION_REFUSED``: the row stays open, the reason says
what is missing). A check that raises, or a verifier model that cannot be reached, is the
operator's (``COMPLETION_CHECK_FAILED``, counted in ``toolErrors`` and logged).
``TurnPlan.close`` calls the judge, so every path that closes a row is checked.
"""

from __future__ import annotations

import inspect
import json
import logging
import math
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage

from agent.context import Context
from agent.errors import ErrorCode, ToolFailure
from agent.llm.chat_models import get_chat_model
from agent.turn.identity import message_text
from prompts import Prompts, chosen
from storage.models import TurnTodo

logger = logging.getLogger("agent.tools")

CompletionCheck = Callable[
    [dict[str, Any], list[dict[str, Any]]], str | Awaitable[str | None] | None
]
"""``check(row, evidence) -> None | reason``, sync or async."""

EVERY_ROW = "*"
"""The key of a check that judges every row, whatever its ``agentType``."""

VERIFIER_PROMPT = "completion_verifier"

MAX_RESULT_CHARS = 600
"""Characters of each call's result shown to the verifier model (the rest is cut)."""

MAX_EVIDENCE_CALLS = 20
"""The newest calls shown to the verifier model."""


def _checks_for(checks: Mapping[str, CompletionCheck], agent_type: str | None) -> list[Any]:
    found = []
    if agent_type and agent_type in checks:
        found.append(checks[agent_type])
    if EVERY_ROW in checks:
        found.append(checks[EVERY_ROW])
    return found


@dataclass
class RowJudge:
    """The judge of one ``complete_todo`` call (``agent.turn.plan_rows.CompletionJudge``):
    the graph's checks and the run's verifier model, and what the verifier cost; ``prompts``:
    the verifier's prompt texts (default: the environment's)."""

    checks: Mapping[str, CompletionCheck]
    context: Context
    prompts: Prompts | None = None
    verifier_calls: int = 0
    verifier_tokens: int = 0
    _verifier: str | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self._verifier = (self.context.verifier_model or "").strip() or None

    def applies(self, row: TurnTodo) -> bool:
        """Whether any check judges ``row``."""
        if _checks_for(self.checks, row.agentType):
            return True
        return self._verifier is not None and bool(row.completionCriteria.strip())

    async def __call__(self, row: dict[str, Any], evidence: list[dict[str, Any]]) -> str | None:
        """None when every check accepts; else the first refusal's reason."""
        for check in _checks_for(self.checks, row.get("agentType")):
            reason = await _run_check(check, row, evidence)
            if reason:
                return reason
        if self._verifier is not None and str(row.get("completionCriteria") or "").strip():
            return await self._verify(self._verifier, row, evidence)
        return None

    async def _verify(
        self, setting: str, row: dict[str, Any], evidence: list[dict[str, Any]]
    ) -> str | None:
        prompt = chosen(self.prompts).render(
            VERIFIER_PROMPT,
            title=row.get("title", ""),
            criteria=row.get("completionCriteria", ""),
            outcome=row.get("outcome", ""),
            evidence=_evidence_text(evidence),
        )
        try:
            model = await get_chat_model(
                setting,
                timeout=self.context.request_timeout,
                max_retries=self.context.max_retries,
            )
            reply = await model.ainvoke([HumanMessage(prompt)])
        except Exception as error:
            raise _check_failure(f"the verifier model {setting!r} failed", error) from error
        self.verifier_calls += 1
        text = message_text(reply).strip()
        self.verifier_tokens += call_tokens(reply, prompt, text)
        return _verdict(text)


async def _run_check(
    check: CompletionCheck, row: dict[str, Any], evidence: list[dict[str, Any]]
) -> str | None:
    """One check's verdict; a check that raises is an operator fault."""
    name = getattr(check, "__name__", type(check).__name__)
    try:
        value = check(dict(row), [dict(entry) for entry in evidence])
        if inspect.isawaitable(value):
            value = await value
    except Exception as error:
        raise _check_failure(f"the completion check {name!r} raised", error) from error
    if value is None or value == "":
        return None
    return str(value)


def _check_failure(what: str, error: BaseException) -> ToolFailure:
    logger.warning("%s", what, exc_info=error)
    return ToolFailure(
        ErrorCode.COMPLETION_CHECK_FAILED,
        f"The item could not be checked: {what} ({type(error).__name__}: {error}). "
        "This is a fault of the deployment, not of the call; the item stays open.",
        "Carry on with the other items; tell the user this item could not be verified, or "
        "cancel it (status 'cancelled') saying so.",
    )


def _evidence_text(evidence: list[dict[str, Any]]) -> str:
    """The newest calls as JSON lines, each result cut to ``MAX_RESULT_CHARS``."""
    if not evidence:
        return "(none: no tool was called while the item was in progress)"
    lines = []
    for entry in evidence[-MAX_EVIDENCE_CALLS:]:
        result = str(entry.get("result", ""))
        if len(result) > MAX_RESULT_CHARS:
            result = result[:MAX_RESULT_CHARS] + "…"
        shown = {"tool": entry.get("tool"), "args": entry.get("args"), "result": result}
        if entry.get("isError"):
            shown["failed"] = True
        lines.append(json.dumps(shown, ensure_ascii=False, default=str))
    return "\n".join(lines)


def _verdict(text: str) -> str | None:
    """None for ACCEPT; the reason of REFUSE (or the whole reply, when it is neither: a reply
    that does not accept is no acceptance)."""
    first = text.splitlines()[0].strip() if text else ""
    if first.upper().startswith("ACCEPT"):
        return None
    if first.upper().startswith("REFUSE"):
        reason = first[len("REFUSE") :].lstrip(" :-").strip()
        return f"the verifier found: {reason or 'the evidence does not meet the criteria'}"
    return f"the verifier did not accept it: {text[:300] or '(empty reply)'}"


def call_tokens(reply: Any, prompt: str, text: str) -> int:
    """The call's prompt plus completion tokens: the model's usage, else characters / 4."""
    usage = reply.usage_metadata if isinstance(reply, AIMessage) else None
    if usage:
        return int(usage.get("total_tokens") or 0)
    return math.ceil(len(prompt) / 4) + math.ceil(len(text) / 4)
