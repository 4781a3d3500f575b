"""The rows ``drain`` has just read, handed to the ``execute`` step that follows it in the same
run, so that step claims its own step without reading them again.

``drain`` claims step s+1 of the turn and reads its rows in one transaction; ``execute`` then
claims s+2. When that claim is a plain move from s+1 (not a fork), nothing can have changed the
rows in between: only a tools step writes them, and one that starts from any checkpoint before
s+1 is refused by the call gate (``agent.call_gate``) while the turn is at s+1, and one at s+1
or later would need an ``execute`` at s+1 to have run, which is this one. A fork claims and
reads its own rows as before.

The hand-over is keyed by the very ``todos`` list ``drain`` put in the state, which LangGraph
passes to the next node of the run as it is; a run resumed from a checkpoint (after a crash, a
cancel, or in Studio) gets a list loaded from the checkpoint, finds nothing here, and reads.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from storage.models import TurnTodo
from storage.repositories import TurnScope

HANDOFF_LIMIT = 256
"""Hand-overs kept at once (one per turn between its ``drain`` and its ``execute``); the oldest
go first, so runs that never reach their ``execute`` (cancelled) cannot pile up."""

_handoffs: OrderedDict[int, tuple[object, TurnScope, int, list[TurnTodo]]] = OrderedDict()
"""By ``id()`` of the state's ``todos`` list, which the entry holds so the id stays its own."""


def hand_over(
    todos: Sequence[dict[str, Any]], scope: TurnScope, step: int, rows: list[TurnTodo]
) -> None:
    """``drain`` read ``rows`` with its claim of ``step`` and put ``todos`` in the state."""
    _handoffs[id(todos)] = (todos, scope, step, rows)
    while len(_handoffs) > HANDOFF_LIMIT:
        _handoffs.popitem(last=False)


def take_over(todos: object, scope: TurnScope, step: int) -> list[TurnTodo] | None:
    """The rows ``drain`` handed over with this very ``todos`` list at ``step`` of ``scope``,
    once; None when there are none (the caller reads)."""
    entry = _handoffs.pop(id(todos), None)
    if entry is None or entry[0] is not todos or entry[1:3] != (scope, step):
        return None
    return entry[3]
