"""The ``blockedBy`` rules of a turn's plan (issue 30), apart from the stage rules in
``agent.turn.plan_rows``: a batch's references resolved and checked before anything is written
(no cycle, no self-reference, nothing unknown, no blocker later in the plan than the item it
blocks, which could never start), readiness, and the refusal to complete or delegate a row
whose blockers are open. Pure functions but the one that writes the edges."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm.attributes import set_committed_value

from agent.errors import ErrorCode, ToolFailure
from storage.models import OPEN_TODO_STATUSES, TurnTodo
from storage.repositories import TodoDependencyRepository, TurnScope


class PlannedItem(Protocol):
    """What the checks read of a ``create_todo`` item (``agent.turn.plan_rows.TodoItemInput``),
    named by its shape: ``plan_rows`` imports this module, so this module does not import it."""

    @property
    def title(self) -> str: ...

    @property
    def blockedBy(self) -> Sequence[int | str] | None: ...  # noqa: N802 (seed 004's field name)


def is_ready(row: TurnTodo) -> bool:
    """Every row ``row`` waits for is closed (a row whose blockers were not loaded counts as
    ready here: the statement that starts it checks again)."""
    return all(blocker.status not in OPEN_TODO_STATUSES for blocker in row.loaded_blockers() or ())


def ensure_unblocked(row: TurnTodo, doing: str) -> None:
    """Refuse, with ``BLOCKED`` naming them, to have a row ``doing`` (completed, delegated)
    while rows it waits for are open."""
    waiting_for = [b for b in row.loaded_blockers() or () if b.status in OPEN_TODO_STATUSES]
    if not waiting_for:
        return
    named = ", ".join(f"'{blocker.title}' ({blocker.id})" for blocker in waiting_for)
    raise ToolFailure(
        ErrorCode.BLOCKED,
        f"Todo '{row.title}' cannot be {doing} yet: it waits for {named}.",
        "Finish those first; it starts by itself when they close. Cancel it if it no longer "
        "makes sense.",
        blockedBy=[blocker.id for blocker in waiting_for],
    )


Blocker = int | TurnTodo
"""What an item waits for: another item of the same call (its index) or an existing row."""


def _invalid(message: str, suggestion: str) -> ToolFailure:
    return ToolFailure(ErrorCode.INVALID_DEPENDENCY, message, suggestion)


def resolve_blockers(
    items: Sequence[PlannedItem], priorities: Sequence[int], existing: Sequence[TurnTodo]
) -> list[list[Blocker]]:
    """Each item's ``blockedBy`` resolved, or ``INVALID_DEPENDENCY`` naming the first problem:
    a reference to itself, to no item or row of the turn, a cycle, or a blocker in a later stage
    than the item (it could never start). Checked before anything is written."""
    by_id = {row.id: row for row in existing}
    resolved: list[list[Blocker]] = []
    for index, item in enumerate(items):
        refs: list[Blocker] = []
        for ref in item.blockedBy or ():
            if isinstance(ref, str) and ref.strip().isdigit():
                ref = int(ref.strip())
            if isinstance(ref, int):
                if ref == index:
                    raise _invalid(
                        f"Item {index} ('{item.title}') is blocked by itself.",
                        "Remove its own index from `blockedBy`.",
                    )
                if not 0 <= ref < len(items):
                    raise _invalid(
                        f"Item {index} ('{item.title}') is blocked by item {ref}, but this call "
                        f"has items 0 to {len(items) - 1}.",
                        "Use the 0-based index of an earlier item in this call, or a row id.",
                    )
                refs.append(ref)
            else:
                row = by_id.get(ref.strip())
                if row is None:
                    raise _invalid(
                        f"Item {index} ('{item.title}') is blocked by '{ref}', which is not an "
                        "item of this turn's plan.",
                        "Use an id from the plan view, or the index of an item in this call.",
                    )
                refs.append(row)
        resolved.append(refs)
    cycle = _find_cycle(resolved)
    if cycle:
        path = " -> ".join(f"item {i} ('{items[i].title}')" for i in cycle)
        raise _invalid(
            f"`blockedBy` forms a cycle: {path}.",
            "A step may wait only for steps that do not wait for it; remove one link.",
        )
    for index, refs in enumerate(resolved):
        for blocker in refs:
            priority = priorities[blocker] if isinstance(blocker, int) else blocker.priority
            if priority > priorities[index]:
                title = items[blocker].title if isinstance(blocker, int) else blocker.title
                raise _invalid(
                    f"Item {index} ('{items[index].title}') is blocked by '{title}', which "
                    "comes later in the plan, so it could never start.",
                    "List blockers before the items they block, and give them no later `order`.",
                )
    return resolved


def _find_cycle(resolved: Sequence[Sequence[Blocker]]) -> list[int]:
    """A cycle among the items of one call (as indexes, first repeated last), or []."""
    state = [0] * len(resolved)  # 0 unseen, 1 on the path, 2 done
    path: list[int] = []

    def visit(index: int) -> list[int]:
        state[index] = 1
        path.append(index)
        for ref in resolved[index]:
            if not isinstance(ref, int):
                continue
            if state[ref] == 1:
                return [*path[path.index(ref) :], ref]
            if state[ref] == 0:
                found = visit(ref)
                if found:
                    return found
        path.pop()
        state[index] = 2
        return []

    for start in range(len(resolved)):
        if state[start] == 0:
            found = visit(start)
            if found:
                return found
    return []


async def record_blockers(
    session: AsyncSession,
    scope: TurnScope,
    planned: Sequence[TurnTodo],
    blockers: list[list[Blocker]],
) -> None:
    """Write the new rows' ``blockedBy`` edges and set ``blockers`` on the rows, so they are
    scheduled and shown without reading them back."""
    edges: list[tuple[str, str]] = []
    for row, refs in zip(planned, blockers, strict=True):
        waits_for = [planned[ref] if isinstance(ref, int) else ref for ref in refs]
        edges.extend((row.id, blocker.id) for blocker in waits_for)
        set_committed_value(row, "blockers", waits_for)
    await TodoDependencyRepository(session).add(scope, edges)
