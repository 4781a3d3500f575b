"""turnplan working N independent items as one stage: 3 LLM calls at every N.

The same graph as ``turnplan`` (only the ``do_item`` tool), driven along the stage path. Items of
one ``create_todo`` batch that share an ``order`` form a stage: the graph starts every row of the
stage at once (each shown ``[>]`` with its id in the plan view) and the next stage once every row
of it is closed. Tool calls that are not todo tools run concurrently, after the todo calls
written before them in the same message. So the floor for N independent items is 3 calls:

1. one ``create_todo`` with all N items at ``"order": 1``, and the N ``do_item`` calls in the same
   message, after it;
2. one ``complete_todo`` per row in progress, each with an outcome, all in one message;
3. the answer, once no row is open.

The oracle reads the plan only from the request (``plan_in_request``). It does not loop on a
graph that works otherwise: rows still open after the first closes are all closed in one
message; a plan that never appears, or rows it already asked to close that stay open, get the
answer. Either way it says why in ``problem``, so the run is reported as off the stage path
rather than measured as if it were on it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from bench.scenario import action
from bench.systems.turnplan import TurnplanSystem
from bench.wire import Body, Oracle
from tests.fakes import PlanRow, plan_rows
from tests.http_oracle import plan_view_of
from tests.scripted_openai import Reply, text, tool_calls

STAGE = 1
"""The ``order`` every item gets: one value, so all N items form one stage."""
IN_PROGRESS = ">"
OPEN_MARKS = frozenset({IN_PROGRESS, " "})
ANSWER = "All done."


def plan_in_request(body: Body) -> list[PlanRow]:
    """The plan as the model is shown it in ``body``.

    The one place that knows where the plan view travels (today: a user message after the
    turn's request, read by ``tests.fakes.plan_view``), so moving it changes this function only."""
    return plan_rows(plan_view_of(body))


def _close(rows: list[PlanRow]) -> Reply:
    return tool_calls(
        *(("complete_todo", {"todoId": row.id, "outcome": f"did {row.title}"}) for row in rows)
    )


@dataclass
class StagesOracle:
    """Plan all items as one stage and act on all of them; close every row in progress; answer.

    ``planned`` and ``asked`` only stop it from repeating itself when the graph does not do what
    the stage path expects; every decision is otherwise made from the plan in the request.
    """

    titles: list[str]
    planned: bool = False
    asked: set[str] = field(default_factory=set)
    """Ids of the rows it has already sent ``complete_todo`` for."""
    problem: str = ""
    """The first way the graph left the stage path, or "" (read by ``bench.measure``)."""

    def __call__(self, body: Body) -> Reply:
        rows = plan_in_request(body)
        if not rows:
            if self.planned:
                return self._answer_off_path("create_todo left no plan in the plan view")
            self.planned = True
            items = [{"title": title, "order": STAGE} for title in self.titles]
            return tool_calls(
                ("create_todo", {"items": items}), *(action(title) for title in self.titles)
            )
        open_rows = [row for row in rows if row.mark in OPEN_MARKS and row.id]
        if not open_rows:
            return text(ANSWER)
        in_progress = [row for row in open_rows if row.mark == IN_PROGRESS]
        if not self.asked:
            if len(in_progress) != len(rows):
                self._note(f"the graph started {len(in_progress)} of {len(rows)} rows of the stage")
            wanted = in_progress or open_rows
        else:
            # Rows still open after the stage's closes (a graph that kept part of the stage
            # pending): close them all at once, so the turn never takes a call per row.
            self._note(f"{len(open_rows)} rows still open after closing the stage")
            wanted = open_rows
        fresh = [row for row in wanted if row.id not in self.asked]
        if not fresh:
            return self._answer_off_path("rows it had closed are still open")
        self.asked.update(str(row.id) for row in fresh)
        return _close(fresh)

    def _note(self, problem: str) -> None:
        self.problem = self.problem or problem

    def _answer_off_path(self, problem: str) -> Reply:
        self._note(problem)
        return text(ANSWER)


class TurnplanStagesSystem(TurnplanSystem):
    """turnplan driven along the stage path (see the module docstring)."""

    name = "turnplan-stages"
    path = (
        "create_todo(all N at order 1: one stage) + N actions; "
        "complete_todo for every [>] row; answer (3)"
    )

    def oracle(self, titles: list[str]) -> Oracle:
        return StagesOracle(titles)
