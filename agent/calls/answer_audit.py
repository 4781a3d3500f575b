"""The audit of a planned turn's answer (issue 29 §3), off unless ``Context.audit_model`` is set.

Every row closed is the model's word that the request is done; the audit asks a second model
whether the request and the answer agree. Before a turn with rows ends ``answered``, that model
sees the user's request, the rows with their outcomes and evidence summaries, and the draft
answer, with no tools (prompt ``answer_audit``), and replies ``OK`` or one ``- missing: ...``
line per part of the request not done or claimed without evidence.

- Nothing missing: the turn ends ``answered`` as it would have.
- Parts missing, the first time in the turn and with a call left: the supervisor is sent back
  once with them (prompt ``answer_audit_reminder``, a user-side message as ``drain``'s
  reminders are), may add rows and do them, and its next answer is audited again.
- Parts still missing (the second audit, or no call left to send it back with): the answer
  states them (prompt ``answer_incomplete``) and the turn ends ``incomplete``, never
  ``answered``: answered means the request was done.
- An audit model that fails, or replies neither ``OK`` nor a ``missing`` line: the deployment's
  fault, never taken as an OK. The answer is kept with a note that it was not checked and why
  (prompt ``answer_audit_failed``), the turn ends ``failed`` and the fault is logged.

The audit's calls and tokens are the turn's ``auditCalls`` and ``auditTokens``, apart from
``llmCalls`` (as ``verifierCalls`` are). ``auditCalls`` also tells whether the turn was sent
back already: a turn goes on after an audit only when it was.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage

from agent.calls.completion import call_tokens
from agent.context import Context
from agent.llm.chat_models import get_chat_model
from agent.state import SupervisorState
from agent.turn.budget import extended_budget
from agent.turn.identity import REMINDER_NAME, message_text
from agent.turn.usage import tokens_exhausted, turn_usage
from prompts import Prompts, chosen

logger = logging.getLogger("agent.audit")

AUDIT_PROMPT = "answer_audit"

MAX_OUTCOME_CHARS = 300
"""Characters of each row's outcome shown to the audit model (the rest is cut)."""

MAX_ANSWER_CHARS = 4000
"""Characters of the draft answer shown to the audit model."""

_MISSING = re.compile(r"^\s*(?:[-*•]\s*)?missing\s*:\s*(?P<part>.*\S)\s*$", re.IGNORECASE)
_OK = re.compile(r"^\s*\**\s*ok\s*\**\s*[.!]?\s*$", re.IGNORECASE)


class UnreadableAudit(ValueError):
    """The audit model replied, but neither ``OK`` nor a ``- missing: ...`` line; ``tokens``
    is what the reply cost (0 until the call's usage is known)."""

    tokens: int = 0


@dataclass(frozen=True)
class AuditReply:
    """What the audit model found (``missing`` empty: nothing) and what its call cost."""

    missing: list[str]
    tokens: int


def parse_audit(text: str) -> list[str]:
    """The parts the reply lists as missing; ``[]`` for an ``OK`` reply. A reply with
    ``missing`` lines is read by them alone (any other line is ignored: a found gap is never
    dropped for the chatter around it); one with none must start with ``OK`` on a line of its
    own, else it is unreadable (``UnreadableAudit``), never an OK: an "OK" somewhere in a
    rambling reply is no audit."""
    lines = [line for line in text.splitlines() if line.strip()]
    missing = [match["part"] for line in lines if (match := _MISSING.match(line))]
    if missing:
        return missing
    if lines and _OK.match(lines[0]):
        return []
    shown = " ".join(text.split())[:200] or "(empty reply)"
    raise UnreadableAudit(f"the reply was neither OK nor '- missing:' lines: {shown!r}")


def rows_text(todos: Sequence[Mapping[str, Any]]) -> str:
    """One line per row: status, title, outcome (cut) and what its evidence summary says."""
    lines = []
    for todo in todos:
        outcome = " ".join(str(todo.get("outcome") or "").split())
        if len(outcome) > MAX_OUTCOME_CHARS:
            outcome = outcome[:MAX_OUTCOME_CHARS] + "…"
        evidence = todo.get("evidence") or {}
        calls = int(evidence.get("calls") or 0)
        tools = ", ".join(str(name) for name in evidence.get("tools") or ())
        seen = (
            f"{calls} tool call(s), {int(evidence.get('errors') or 0)} failed: {tools}"
            if calls
            else "no tool call"
        )
        lines.append(
            f"- [{todo.get('status')}] {todo.get('title')}: {outcome or '(no outcome)'} "
            f"(evidence: {seen})"
        )
    return "\n".join(lines) or "(no items)"


async def audit(
    context: Context,
    request: str,
    todos: Sequence[Mapping[str, Any]],
    answer: str,
    prompts: Prompts | None = None,
) -> AuditReply:
    """One call of the audit model. Raises ``UnreadableAudit`` for a reply it cannot read and
    lets the model's own errors through (the caller reports both)."""
    setting = (context.audit_model or "").strip()
    shown = answer if len(answer) <= MAX_ANSWER_CHARS else answer[:MAX_ANSWER_CHARS] + "…"
    prompt = chosen(prompts).render(
        AUDIT_PROMPT, request=request, rows=rows_text(todos), answer=shown
    )
    model = await get_chat_model(
        setting, timeout=context.request_timeout, max_retries=context.max_retries
    )
    reply = await model.ainvoke([HumanMessage(prompt)])
    text = message_text(reply).strip()
    tokens = call_tokens(reply, prompt, text)
    try:
        return AuditReply(parse_audit(text), tokens)
    except UnreadableAudit as error:
        error.tokens = tokens
        raise


def _draft(state: SupervisorState, result: Mapping[str, Any]) -> AIMessage | None:
    """The answer the turn would end with: the one the decision writes itself (the completed
    plan), else the model's own last message."""
    written = [m for m in result.get("messages") or () if isinstance(m, AIMessage)]
    if written:
        return written[-1]
    last: AnyMessage | None = state.messages[-1] if state.messages else None
    return last if isinstance(last, AIMessage) else None


def _bullets(parts: Sequence[str]) -> str:
    return "\n".join(f"- {part}" for part in parts)


def _restated(draft: AIMessage, content: str) -> AIMessage:
    """The draft with new text, same id: the state's message is replaced, not repeated."""
    return draft.model_copy(update={"content": content})


async def audited(
    state: SupervisorState,
    context: Context,
    todos: Sequence[Mapping[str, Any]],
    result: dict[str, Any],
    prompts: Prompts | None = None,
) -> dict[str, Any]:
    """``drain``'s decision ``result`` (a planned turn ending ``answered``) once the audit
    model has seen it: unchanged but for the audit's counts, a send-back, ``incomplete`` or
    ``failed`` (the module's docstring); ``prompts``: the graph's texts."""
    draft = _draft(state, result)
    if draft is None:
        return result
    answer = message_text(draft).strip()
    setting = (context.audit_model or "").strip()
    try:
        found = await audit(context, state.turnRequest, todos, answer, prompts)
    except Exception as error:  # any failure is reported, never taken as an OK
        logger.warning("the audit model %r failed", setting, exc_info=error)
        tokens = error.tokens if isinstance(error, UnreadableAudit) else 0
        note = chosen(prompts).render(
            "answer_audit_failed",
            answer=answer,
            reason=f"the audit model {setting!r} failed ({type(error).__name__}: {error})",
        )
        return {
            **result,
            "messages": [_restated(draft, note)],
            "turnStatus": "failed",
            "auditCalls": int(isinstance(error, UnreadableAudit)),
            "auditTokens": tokens,
        }
    counts = {"auditCalls": 1, "auditTokens": found.tokens}
    if not found.missing:
        return {**result, **counts}
    budget = extended_budget(
        state.iterationBudget or context.base_iterations, state.llmCalls, context
    )
    call_left = state.llmCalls < budget and not tokens_exhausted(
        turn_usage(state), context.max_turn_tokens
    )
    if state.auditCalls == 0 and call_left:
        reminder = HumanMessage(
            content=chosen(prompts).render(
                "answer_audit_reminder", missing=_bullets(found.missing)
            ),
            name=REMINDER_NAME,
        )
        return {
            "messages": [reminder],
            "turnStatus": "running",
            "iterationBudget": budget,
            "remindersInARow": 0,
            **counts,
        }
    statement = chosen(prompts).render(
        "answer_incomplete", answer=answer, missing=_bullets(found.missing)
    )
    return {
        **result,
        "messages": [_restated(draft, statement)],
        "turnStatus": "incomplete",
        **counts,
    }
