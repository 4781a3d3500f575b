"""LangChain v1's human-in-the-loop shape for turnplan's two pauses (plan approval, ``ask_user``).

UIs that speak LangChain's HITL protocol (agent-chat-ui, Agent Inbox, anything built on
``langchain.agents.middleware.human_in_the_loop``) render an interrupt whose value has
``action_requests`` (``name``, ``args``, ``description``) and ``review_configs``
(``action_name``, ``allowed_decisions``) and resume it with ``{"decisions": [<decision>]}``:
``{"type": "approve"}``, ``{"type": "edit", "edited_action": {"name", "args"}}``,
``{"type": "reject", "message"?}`` or ``{"type": "respond", "message"}``. The pauses put those
keys beside their own (``type`` and the rest), so older clients keep reading what they read, and
take either form back (``agent.turn.approval``, ``agent.tools.ask_user``).

agent-chat-ui's edit form is one textarea per argument and sends each back as the textarea's
text: a list shown as JSON comes back as a JSON string. ``json_arg`` reads it back.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, cast

DecisionType = Literal["approve", "edit", "reject", "respond"]
DECISION_TYPES: tuple[DecisionType, ...] = ("approve", "edit", "reject", "respond")


@dataclass(frozen=True)
class ReviewDecision:
    """One decision of a HITL response, checked against what the pause allows."""

    type: DecisionType
    args: dict[str, Any] = field(default_factory=dict)
    """``edit``: the edited action's arguments as sent (see ``json_arg``)."""
    message: str = ""
    """``reject``: the reason (may be empty); ``respond``: the answer."""


def hitl_request(
    name: str,
    args: dict[str, Any],
    description: str,
    allowed: Sequence[DecisionType],
) -> dict[str, Any]:
    """The ``HITLRequest`` keys for one action awaiting review."""
    return {
        "action_requests": [{"name": name, "args": args, "description": description}],
        "review_configs": [{"action_name": name, "allowed_decisions": list(allowed)}],
    }


def is_hitl_response(value: Any) -> bool:
    """Whether a resume value is a ``HITLResponse`` (else it is the short form)."""
    return isinstance(value, dict) and "decisions" in value


def parse_hitl_response(
    value: dict[str, Any], name: str, allowed: Sequence[DecisionType]
) -> ReviewDecision:
    """The one decision of ``value`` for action ``name``; ``ValueError`` says what is wrong."""
    decisions = value.get("decisions")
    if not isinstance(decisions, list) or len(decisions) != 1:
        raise ValueError(
            f'"decisions" must be a list of exactly one decision (one action, {name!r}, '
            "awaits review)."
        )
    (decision,) = decisions
    kind = decision.get("type") if isinstance(decision, dict) else None
    if kind not in allowed:
        names = ", ".join(allowed)
        raise ValueError(f"The decision's type must be one of {names}, not {kind!r}.")
    assert isinstance(decision, dict)
    message = decision.get("message", "")
    if message is None:
        message = ""
    if not isinstance(message, str):
        raise ValueError(f'"{kind}" takes a text "message".')
    if kind == "respond" and not message.strip():
        raise ValueError('"respond" needs a non-empty "message": the answer.')
    if kind != "edit":
        return ReviewDecision(cast(DecisionType, kind), message=message.strip())
    edited = decision.get("edited_action")
    if not isinstance(edited, dict) or not isinstance(edited.get("args"), dict):
        raise ValueError('"edit" needs "edited_action" with "name" and "args" (an object).')
    if edited.get("name", name) != name:
        raise ValueError(f'"edit" must keep the action\'s name {name!r}.')
    return ReviewDecision("edit", args=dict(edited["args"]))


def json_arg(value: Any) -> Any:
    """An edited argument as a value: agent-chat-ui sends a list or object back as its JSON
    text, so text that parses as a JSON list or object is that list or object."""
    if isinstance(value, str) and value.strip()[:1] in ("[", "{"):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value
