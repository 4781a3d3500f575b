"""The turn's rows, handed from one step of a run to the next, so the next need not read them.

A turn's rows change only in its tools steps (and in ``drain``'s plan approval, before its
claim), and its steps are ordered by their claims (``agent.turn.lineage``). So within one run:

- ``plan`` claims step 1 of a turn that starts now, which has no rows yet, and hands that over;
- each todo tool of the tools step that follows a model step at s (they run one after another,
  ``agent.calls.ordering``) takes the rows, writes with conditional statements, and hands over
  the rows its transaction left; a tool that fails hands nothing over, and the next one reads.
  The message's last plan change hands them over under the plan snapshot it leaves in the state
  (``agent.nodes.tools_node``);
- ``execute`` (or ``drain``, after an answer) claims s+1. When that claim is a plain move from s
  (not a fork), nothing but this run's tools step at s has changed the rows since: a tools step
  from any checkpoint before s is refused by the call gate (``agent.calls.gate``) while the turn
  is at s or later. It takes the rows instead of reading, and hands them on to the next step.

A fork claims and reads its own rows as before. A hand-over is keyed by the very ``todos`` list
last put in the state (by ``plan``, ``drain``, ``execute`` or the last plan change of a tools
step), which LangGraph passes on to the following nodes of the run as it is; a run resumed from
a checkpoint (after a crash, a cancel, or in Studio) gets a list loaded from the checkpoint,
finds nothing here, and reads.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from storage.models import TurnTodo
from storage.repositories import TurnScope

HANDOFF_LIMIT = 256
"""Hand-overs kept at once (one per running turn); the oldest go first, so runs that never reach
their next step (cancelled, failed) cannot pile up."""


@dataclass(frozen=True)
class HandedRows:
    """Rows handed over, and whether the ``todos`` list they came with shows them."""

    rows: list[TurnTodo]
    shown: bool
    """The ``todos`` list was built from these very rows (a plan snapshot), so the state's
    snapshot is current; False when a todo tool changed the rows after the list was made."""


_handoffs: OrderedDict[int, tuple[object, TurnScope, int, HandedRows]] = OrderedDict()
"""By ``id()`` of the state's ``todos`` list, which the entry holds so the id stays its own."""


def hand_over(
    todos: Sequence[dict[str, Any]],
    scope: TurnScope,
    step: int,
    rows: list[TurnTodo],
    *,
    shown: bool = False,
) -> None:
    """``rows`` are the turn's rows at ``step`` of ``scope`` now, in a run whose state holds
    ``todos``; ``shown`` when ``todos`` was built from them. This replaces what was handed over
    before with the same list."""
    _handoffs[id(todos)] = (todos, scope, step, HandedRows(rows, shown))
    while len(_handoffs) > HANDOFF_LIMIT:
        _handoffs.popitem(last=False)


def take_handed(todos: object, scope: TurnScope, step: int) -> HandedRows | None:
    """What was handed over with this very ``todos`` list at ``step`` of ``scope``, once; None
    when nothing was (the caller reads)."""
    entry = _handoffs.pop(id(todos), None)
    if entry is None or entry[0] is not todos or entry[1:3] != (scope, step):
        return None
    return entry[3]


def take_over(todos: object, scope: TurnScope, step: int) -> list[TurnTodo] | None:
    """The rows of ``take_handed``, for a step that does not keep the snapshot."""
    handed = take_handed(todos, scope, step)
    return None if handed is None else handed.rows
