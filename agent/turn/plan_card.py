"""The plan where UIs look for it: the state's ``todos`` in deep-agents-ui's shape too, and a
plan card through LangGraph's generative UI.

- deep-agents-ui (and other UIs written for LangChain's ``write_todos``) render ``values.todos``
  items as ``{"content", "status"}``. Each snapshot row therefore carries ``content`` (the
  title) next to seed 004's fields; ``status`` is already ours and already speaks that
  vocabulary (``pending``, ``in_progress``, ``completed``), plus ``cancelled``, which we keep
  because a cancelled item is not a done one. ``list_todo`` results keep seed 004's shape: the
  model never sees the extra field.
- agent-chat-ui shows generative UI messages (``push_ui_message``, the ``ui`` state key) under
  the AI message they name. Each turn has one card (id ``plan:<turnId>``) that every plan change
  replaces, anchored to the newest AI message, so the card follows the turn as it moves and
  ends with its status and LLM calls. Its component is ``plan`` in ``ui/src/PlanCard.tsx``,
  served by ``langgraph dev --config langgraph.ui.json``.

The custom ``turnplan.todo`` stream events (``agent.turn.progress``) stay as they are.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage
from langgraph.config import get_config
from langgraph.graph.ui import push_ui_message

from agent.state import TodoSnapshot
from storage.models import TurnTodo

PLAN_CARD = "plan"
"""Name of the generative UI component (``ui/src/PlanCard.tsx`` exports it by this name)."""


def plan_snapshot(rows: Iterable[TurnTodo]) -> list[TodoSnapshot]:
    """The rows as ``values.todos`` shows them: seed 004's ``list_todo`` item plus ``content``
    (deep-agents-ui's name for the title)."""
    return [{**row.to_dict(), "content": row.title} for row in rows]


def plan_card_id(turn_id: str) -> str:
    """The card's UI message id: one per turn, so each push replaces the turn's card."""
    return f"{PLAN_CARD}:{turn_id}"


def show_plan_card(
    turn_id: str,
    todos: Sequence[TodoSnapshot],
    messages: Sequence[AnyMessage],
    *,
    turn_status: str = "running",
    llm_calls: int = 0,
) -> None:
    """Push the turn's plan card (its rows, status and LLM calls so far) to the ``ui`` state key
    and the stream, anchored to the newest AI message in ``messages``.

    A turn without a plan gets no card. A node run outside a graph (unit tests calling a node
    function) has no run to push to; nothing is pushed then, and the node's update is unchanged."""
    if not turn_id or not todos:
        return
    try:
        get_config()
    except RuntimeError:
        return
    anchor = next((m for m in reversed(messages) if isinstance(m, AIMessage) and m.id), None)
    props: dict[str, Any] = {
        "turnId": turn_id,
        "todos": [dict(todo) for todo in todos],
        "turnStatus": turn_status,
        "llmCalls": llm_calls,
    }
    push_ui_message(PLAN_CARD, props, id=plan_card_id(turn_id), message=anchor)
