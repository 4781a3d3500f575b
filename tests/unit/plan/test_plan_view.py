"""The plan view every call ends with: short closed rows, and the ids of the rows a call may
touch (in progress, and next), not of every later row."""

from __future__ import annotations

from agent.prompting.builder import plan_view
from storage.models import TurnTodo
from tests.fakes import plan_rows


def row(n: int, status: str, priority: int, **fields: str) -> TurnTodo:
    return TurnTodo(
        id=f"{n:08d}-0000-4000-8000-000000000000",
        title=f"item {n}",
        status=status,
        priority=priority,
        **fields,
    )


def test_ids_are_shown_for_the_rows_in_progress_and_next_only() -> None:
    rows = [
        row(1, "completed", 0, outcome="did  item\n1"),
        row(2, "in_progress", 1, context="the blue one", completionCriteria="it is blue"),
        row(3, "pending", 2),
        row(4, "pending", 2),  # the same order as item 3: they start together
        row(5, "pending", 3),
    ]

    view = plan_view(rows, "Do items 1 to 5.", show_request=True)

    assert view.splitlines() == [
        "## Current plan ([>]: work on these now)",
        'The user asked: "Do items 1 to 5."',
        "- [x] item 1 — did item 1",
        f"- [>] item 2 (id {rows[1].id}) — context: the blue one; done when: it is blue",
        f"- [ ] item 3 (id {rows[2].id})",
        f"- [ ] item 4 (id {rows[3].id})",
        "- [ ] item 5",
    ]
    assert [(r.mark, r.id) for r in plan_rows(view)] == [
        ("x", None),
        (">", rows[1].id),
        (" ", rows[2].id),
        (" ", rows[3].id),
        (" ", None),
    ]


def test_without_show_request_the_request_line_is_left_out() -> None:
    view = plan_view([row(1, "in_progress", 0)], "Do item 1.", show_request=False)

    assert "Do item 1." not in view and len(view.splitlines()) == 2
