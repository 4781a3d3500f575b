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

Where they travel: from node to node in the graph state, under ``handedRows``
(``agent.state.SupervisorState``), a channel LangGraph never checkpoints (``UntrackedValue``);
from call to call of one tools step in the calls' config (``StepRows``), which the tools node
makes when it starts and turns into its ``handedRows`` update when its calls are done. A run
that starts from a checkpoint (resumed after a crash, a cancel or an interrupt, a Studio replay,
a fork) starts with nothing handed over, and reads.

Rows are taken only with the very ``todos`` list they were handed over with (the state's plan
snapshot, which LangGraph passes on to the following nodes of the run as it is), at the same
step of the same turn, and once: a step that takes them hands over what it leaves, or nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from storage.models import TurnTodo
from storage.repositories import TurnScope

HANDED_ROWS = "handedRows"
"""The state key rows are handed over under (never checkpointed)."""

STEP_ROWS = "turnplan_step_rows"
"""The ``configurable`` key under which a tools step hands its ``StepRows`` to its calls."""


@dataclass(frozen=True, eq=False)
class HandedRows:
    """Rows handed over: the turn's rows at ``step`` of ``scope`` as this run left them."""

    todos: object
    """The state's ``todos`` list they go with, by identity: another list (one loaded from a
    checkpoint, or a newer snapshot) does not take them."""
    scope: TurnScope
    step: int
    rows: list[TurnTodo]
    shown: bool = False
    """The ``todos`` list was built from these very rows (a plan snapshot), so the state's
    snapshot is current; False when a todo tool changed the rows after the list was made."""

    def goes_with(self, todos: object, scope: TurnScope, step: int) -> bool:
        return self.todos is todos and self.scope == scope and self.step == step


NOTHING_HANDED: dict[str, Any] = {HANDED_ROWS: None}
"""The update of a step that took the rows and hands nothing over (the next step reads)."""


def hand_over(
    todos: object,
    scope: TurnScope,
    step: int,
    rows: list[TurnTodo],
    *,
    shown: bool = False,
) -> dict[str, Any]:
    """The state update that hands ``rows``, the turn's rows at ``step`` of ``scope`` now, to the
    next step of this run, with the ``todos`` list the same update leaves in the state;
    ``shown`` when ``todos`` was built from them."""
    return {HANDED_ROWS: HandedRows(todos, scope, step, rows, shown)}


def _state_field(state: object, key: str) -> Any:
    return state.get(key) if isinstance(state, dict) else getattr(state, key, None)


def take_handed(state: object, scope: TurnScope, step: int) -> HandedRows | None:
    """What the step before handed over in ``state`` with its very ``todos`` list at ``step``
    of ``scope``; None when nothing was (the caller reads). The caller's update hands over
    what it leaves (``hand_over``), or ``NOTHING_HANDED``."""
    handed = _state_field(state, HANDED_ROWS)
    if isinstance(handed, HandedRows) and handed.goes_with(
        _state_field(state, "todos"), scope, step
    ):
        return handed
    return None


def take_over(state: object, scope: TurnScope, step: int) -> list[TurnTodo] | None:
    """The rows of ``take_handed``, for a step that does not keep the snapshot."""
    handed = take_handed(state, scope, step)
    return None if handed is None else handed.rows


@dataclass(eq=False)
class StepRows:
    """The rows handed from call to call within one tools step: what the step found in the
    state, then what each todo tool's transaction left."""

    handed: HandedRows | None = None

    def take(self, todos: object, scope: TurnScope, step: int) -> HandedRows | None:
        """The rows handed over with ``todos`` at ``step`` of ``scope``, once: a tool that
        writes takes them first, so no later call or step can take rows it has made stale."""
        handed, self.handed = self.handed, None
        return handed if handed is not None and handed.goes_with(todos, scope, step) else None

    def hand(
        self,
        todos: object,
        scope: TurnScope,
        step: int,
        rows: list[TurnTodo],
        *,
        shown: bool = False,
    ) -> None:
        """The rows a call's transaction left, for the next call or the next step."""
        self.handed = HandedRows(todos, scope, step, rows, shown)

    def update(self) -> dict[str, Any]:
        """The tools step's state update: what its calls leave to the next step."""
        return {HANDED_ROWS: self.handed}


def step_rows(config: Mapping[str, Any] | None) -> StepRows | None:
    """The ``StepRows`` a tool call's config carries; None outside the supervisor's tools step
    (a tool run by another tools node reads)."""
    rows = ((config or {}).get("configurable") or {}).get(STEP_ROWS)
    return rows if isinstance(rows, StepRows) else None
