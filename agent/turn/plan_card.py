"""The plan where UIs look for it: the state's ``todos`` in deep-agents-ui's shape too, and a
plan card through LangGraph's generative UI.

- deep-agents-ui (and other UIs written for LangChain's ``write_todos``) render ``values.todos``
  items as ``{"content", "status"}``. Each snapshot row therefore carries ``content`` (the
  title) next to seed 004's fields; ``status`` is already ours and already speaks that
  vocabulary (``pending``, ``in_progress``, ``completed``), plus ``cancelled``, which we keep
  because a cancelled item is not a done one. ``list_todo`` results keep seed 004's shape: the
  model never sees the extra field.
- agent-chat-ui shows generative UI messages (the ``UIMessage`` of ``push_ui_message``, in the
  ``ui`` state key with LangGraph's ``ui_message_reducer``) under the AI message they name.
  Each turn has one card (id ``plan:<turnId>``) that every plan change replaces, anchored to
  the newest AI message, so the card follows the turn as it moves and ends with its status
  and LLM calls. Its component is ``plan`` in ``ui/src/PlanCard.tsx``,
  served by ``langgraph dev --config langgraph.ui.json``.

The custom ``turnplan.todo`` stream events (``agent.turn.progress``) stay as they are, and stay
alone on the ``custom`` stream.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage
from langgraph.graph.ui import UIMessage

from agent.state import TodoSnapshot

PLAN_CARD = "plan"
"""Name of the generative UI component (``ui/src/PlanCard.tsx`` exports it by this name)."""


def ui_todos(todos: Iterable[Mapping[str, Any]]) -> list[TodoSnapshot]:
    """The rows as ``values.todos`` shows them: each snapshot row (seed 004's ``list_todo`` item
    with our own fields) plus ``content`` (deep-agents-ui's name for the title)."""
    return [{**todo, "content": todo.get("title")} for todo in todos]


def plan_card_id(turn_id: str) -> str:
    """The card's UI message id: one per turn, so each push replaces the turn's card."""
    return f"{PLAN_CARD}:{turn_id}"


def plan_card(
    turn_id: str,
    todos: Sequence[TodoSnapshot],
    messages: Sequence[AnyMessage],
    *,
    turn_status: str = "running",
    llm_calls: int = 0,
) -> dict[str, list[UIMessage]]:
    """The state update that shows the turn's plan card (its rows, status and LLM calls so far)
    under the ``ui`` key, anchored to the newest AI message in ``messages``; ``{}`` for a turn
    without a plan.

    The card is the ``UIMessage`` ``push_ui_message`` makes, returned with the node's own update
    instead of pushed: ``push_ui_message`` also writes every card to the ``custom`` stream, where
    code that reads the ``turnplan.todo`` progress events (README's SDK example among them) met
    events of another shape. UIs get the card from ``values.ui`` after the step that changed the
    plan, the moment the card would have been pushed (plan changes end a step)."""
    if not turn_id or not todos:
        return {}
    anchor = next((m for m in reversed(messages) if isinstance(m, AIMessage) and m.id), None)
    card: UIMessage = {
        "type": "ui",
        "id": plan_card_id(turn_id),
        "name": PLAN_CARD,
        "props": {
            "turnId": turn_id,
            "todos": [dict(todo) for todo in todos],
            "turnStatus": turn_status,
            "llmCalls": llm_calls,
        },
        "metadata": {"merge": False, **({"message_id": anchor.id} if anchor else {})},
    }
    return {"ui": [card]}
