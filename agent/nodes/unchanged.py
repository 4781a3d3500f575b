"""A node's state update without the writes that would leave a channel as it is.

Every key of a node's update is a channel write. With a checkpointer each one is serialised,
stored as a row of the checkpointer's ``writes`` table and given a new channel version, which
the next checkpoint then carries; in memory it is still a channel update and a version bump.
``execute`` set its per-round counters after every tool round (reminders, idle rounds and
calls, operator faults, whether usage was estimated), moved or not: 5 of its 14 writes per plan
item changed nothing (issue 26, ``bench/RESULTS.md`` "Checkpointed overhead").

Only for a step after ``plan``: ``plan`` writes every per-turn field when a turn starts, so each
of them has a value in the thread from then on. Dropping such a key then changes no value any
step or caller reads: a plain (last-value) field keeps the value it already holds, and a field
with a resetting reducer (``extend_or_reset``, ``add_or_reset``) is reset only when it is not
empty already. A field that was never written has no value at all (it is missing from
``values``, not its default), which is why ``plan`` itself writes everything. What does change
is that the ``updates`` stream no longer lists those keys for that step; ``values`` is the same.
"""

from __future__ import annotations

import functools
import typing
from collections.abc import Mapping
from typing import Any

from agent.state import SupervisorState, add_or_reset, extend_or_reset

RESETTING_REDUCERS = (extend_or_reset, add_or_reset)
"""Reducers for which an empty update resets the field: a no-op when it is empty already."""

KEPT = frozenset({"todos"})
"""Always written: ``agent.turn.rows_handoff`` hands rows over with the very ``todos`` list of
the same update (by identity), so an equal but new list must still reach the state."""


@functools.cache
def _droppable() -> tuple[frozenset[str], frozenset[str]]:
    """The state's last-value fields (no reducer, no special channel) and its fields with a
    resetting reducer, read from ``SupervisorState``'s annotations."""
    plain: set[str] = set()
    resetting: set[str] = set()
    for name, hint in typing.get_type_hints(SupervisorState, include_extras=True).items():
        extras = getattr(hint, "__metadata__", ())
        # Field(description=...) is not callable; a reducer or a channel class (UntrackedValue) is.
        channel = [extra for extra in extras if callable(extra)]
        if not channel:
            plain.add(name)
        elif channel[-1] in RESETTING_REDUCERS:
            resetting.add(name)
    return frozenset(plain - KEPT), frozenset(resetting - KEPT)


def only_changed(update: Mapping[str, Any], state: SupervisorState) -> dict[str, Any]:
    """``update`` without the keys whose write would leave ``state``'s field as it is; for the
    steps after a turn's ``plan`` step (see the module's docstring)."""
    plain, resetting = _droppable()
    changed: dict[str, Any] = {}
    for key, value in update.items():
        if key in plain and getattr(state, key) == value:
            continue
        if key in resetting and not value and not getattr(state, key):
            continue
        changed[key] = value
    return changed
