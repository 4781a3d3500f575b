"""Turns a newer run stopped on the LangGraph server: their open rows are closed, and the next
turn is told what they had already done (issue 41, "Rollback").

A server thread runs one run at a time. A run sent with ``multitask_strategy="rollback"`` while
another is busy cancels that run and deletes it with its checkpoints; ``"interrupt"`` cancels it
and keeps them. Either way the old run stops in the middle of a node: its rows stay ``pending``
or ``in_progress`` with nothing left to close them, and after a rollback its turn is on no branch
of the thread, so a continuation never finds them and the next turn says nothing is unfinished.

In the database such a turn looks like a plan left open on purpose: by budget exhaustion (a
later "continue" must still find it open), by a pause (``ask_user``, plan approval) or on a
branch Studio forked away from. What tells them apart is what became of the server run that
last took a step of the turn (``turn_steps.runId``, the run identity of
``agent.turn.lineage.RunIdentity``), and only the server knows it: deleted (rolled back) or
interrupted, against finished, failed or still running. So a new turn asks (``RunFates``) about
the runs of the conversation's turns with open rows, and closes only the rows of runs a newer
run stopped: ``cancelled``, with an outcome that says why. The calls those runs made stay done
(a rollback deletes checkpoints, not a task already added to the user's list): the new turn's
first LLM call is told them, so its answer can say so.

A rolled-back turn with no open rows (a direct answer, or a plan already drained) has nothing
to close, but what it did is as invisible to the new turn: its messages went with its
checkpoints. So the new turn also asks about the turns that began on the same checkpoint as
itself (``siblings``), and reports those rolled back that changed something. A later turn
follows this one, not that checkpoint, so each is reported to the turn that replaced it. (An
interrupted turn keeps its checkpoints: the new turn follows it and its history shows what it
did, with the results of the calls it left unanswered, ``agent.prompting.orphan_results``.)

Without a way to ask (a Python caller, which has no server runs) nothing is closed.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from sqlalchemy.exc import SQLAlchemyError

from agent.errors import database_failure
from agent.tool_names import ASK_USER, PLAN_CHANGING_TOOLS, TODO_TOOL_NAMES
from agent.turn.call_ledger import turn_results_in
from prompts import Prompts, chosen
from storage import Database
from storage.models import OPEN_TODO_STATUSES, utc_now_iso
from storage.repositories import (
    TodoContinuationRepository,
    TurnScope,
    TurnStepRepository,
    TurnTodoRepository,
)

RunFate = Literal["rolled_back", "interrupted", "other"]
"""What became of a server run: deleted by a rollback, cancelled by an interrupt, or anything
else (finished, failed, still running, paused at an interrupt of its own)."""

RunFates = Callable[[str, str], Awaitable[RunFate]]
"""``fate(thread_id, run_id)``: asks the server what became of one of its runs."""

OUTCOMES: dict[RunFate, str] = {
    "rolled_back": "rolled back by a newer run",
    "interrupted": "interrupted by a newer run",
}
"""The outcome a stopped run's open rows are closed with."""

PLAN_ONLY_TOOLS = TODO_TOOL_NAMES | PLAN_CHANGING_TOOLS | {ASK_USER}
"""Calls whose only effect is on the plan or the conversation: not side effects that stay."""

EFFECTS_LISTED = 10
"""Calls of one stopped turn the note names (the count says how many there were)."""
EFFECT_CHARS = 200
"""Characters of one call's recorded result the note quotes."""


@dataclass(frozen=True)
class SupersededTurn:
    """One turn whose run a newer run stopped, as this run left it."""

    turn_id: str
    fate: RunFate
    closed: tuple[str, ...]
    """Titles of the rows this run closed (open until now); none for a rolled-back turn that
    had nothing left open."""
    effects: tuple[str, ...]
    """The calls the stopped run made that changed something outside the plan, as
    ``tool: recorded result``, in the order they ran."""


async def close_superseded_turns(
    database: Database,
    scope: TurnScope,
    *,
    thread_id: str,
    run_id: str,
    fates: RunFates,
    continuing: bool = False,
) -> list[SupersededTurn]:
    """Close the open rows of the conversation's turns whose last server run a newer run
    rolled back or interrupted, and return those turns (the ones whose rows another writer
    closed first are left out: they are reported once). ``run_id`` is this run's: its own
    turns are never closed here. Only a conversation that is its thread (the default) is
    looked at. ``continuing``: this run continues the branch's open rows (``continuePlan``):
    an interrupted turn on the branch (a Stop, or a message sent with ``"interrupt"``) keeps
    its rows open for it to continue."""
    if not run_id or thread_id != scope.conversation_id:
        # A conversation named in the context may span threads; the server is asked about a
        # run by its thread, and a run of another thread would read as deleted: nothing is
        # closed rather than a guess.
        return []
    try:
        candidates = await _open_turns_of_other_runs(database, scope, run_id)
        stopped: list[SupersededTurn] = []
        for turn_id, (other_run, on_branch) in candidates.items():
            fate = await fates(thread_id, other_run)
            if fate == "interrupted" and not on_branch:
                # A run whose rollback is still deleting it reads as interrupted; its turn is
                # already off this run's branch (this run started before it).
                fate = "rolled_back"
            if fate == "other" or (continuing and fate == "interrupted"):
                continue
            turn = await _close_turn(database, TurnScope(scope.conversation_id, turn_id), fate)
            if turn.closed:
                stopped.append(turn)
        stopped.extend(
            await _rolled_back_siblings(database, scope, run_id, thread_id, fates, candidates)
        )
    except (SQLAlchemyError, OSError) as error:
        raise database_failure(error) from error
    return stopped


async def _rolled_back_siblings(
    database: Database,
    scope: TurnScope,
    run_id: str,
    thread_id: str,
    fates: RunFates,
    closed: Mapping[str, object],
) -> list[SupersededTurn]:
    """The turns begun on the same checkpoint as ``scope``'s that were stopped with nothing
    after them and changed something, not yet told to a turn that lived on: a sibling that a
    turn follows, or whose run ended on its own, lived on, and was told of the stopped
    siblings before it (newest first, each stops the search). ``closed``: the turns whose
    open rows were just closed (reported already)."""
    async with database.session(readonly=True) as session:
        siblings = await TodoContinuationRepository(session).siblings(scope)
        steps = TurnStepRepository(session)
        runs: dict[str, str] = {}
        for sibling in siblings:
            last = await steps.last(TurnScope(scope.conversation_id, sibling.turn_id))
            runs[sibling.turn_id] = last.runId if last is not None else ""
    stopped: list[SupersededTurn] = []
    for sibling in reversed(siblings):
        other_run = runs[sibling.turn_id]
        if sibling.followed or not other_run or other_run == run_id:
            break
        # With nothing after it, an "interrupted" run is one whose rollback is under way.
        if await fates(thread_id, other_run) == "other":
            break
        if sibling.turn_id not in closed:
            turn = await _effects_of(database, TurnScope(scope.conversation_id, sibling.turn_id))
            if turn.effects:
                stopped.insert(0, turn)
    return stopped


async def _effects_of(database: Database, scope: TurnScope) -> SupersededTurn:
    """A rolled-back turn with nothing left open, and the calls of it that stay done."""
    async with database.session(readonly=True) as session:
        calls = await turn_results_in(session, scope)
    return SupersededTurn(scope.turn_id, "rolled_back", (), _effects(calls))


def _effects(calls: Sequence[tuple[str, str]]) -> tuple[str, ...]:
    """``tool: result`` of each call that changed something outside the plan."""
    return tuple(
        f"{name}: {_shortened(content)}" for name, content in calls if name not in PLAN_ONLY_TOOLS
    )


async def _open_turns_of_other_runs(
    database: Database, scope: TurnScope, run_id: str
) -> dict[str, tuple[str, bool]]:
    """``{turn id: (server run of its last step, on scope's branch)}`` for the conversation's
    other turns with open rows whose last step another server run took."""
    async with database.session(readonly=True) as session:
        links = TodoContinuationRepository(session)
        rows = await links.open_in_other_turns(scope)
        off_branch = await links.other_branches(scope)
        steps = TurnStepRepository(session)
        found: dict[str, tuple[str, bool]] = {}
        for turn_id in dict.fromkeys(row.turnId for row in rows):
            last = await steps.last(TurnScope(scope.conversation_id, turn_id))
            if last is not None and last.runId and last.runId != run_id:
                found[turn_id] = (last.runId, turn_id not in off_branch)
    return found


async def _close_turn(database: Database, scope: TurnScope, fate: RunFate) -> SupersededTurn:
    """Close the turn's open rows as ``cancelled`` with the fate's outcome (each only if still
    open), and read the calls of the turn that stay done, in one transaction."""
    async with database.session() as session:
        todos = TurnTodoRepository(session)
        closed_at = utc_now_iso()
        closed = []
        for row in await todos.find_by_turn(scope, OPEN_TODO_STATUSES):
            if await todos.close_if_open(
                row.id,
                status="cancelled",
                outcome=OUTCOMES[fate],
                completed_at=closed_at,
                cancelled_by="system",
            ):
                closed.append(row.title)
        calls = await turn_results_in(session, scope)
    return SupersededTurn(scope.turn_id, fate, tuple(closed), _effects(calls))


def _shortened(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= EFFECT_CHARS else flat[: EFFECT_CHARS - 1] + "…"


def superseded_note(turns: Sequence[SupersededTurn], prompts: Prompts | None = None) -> str:
    """The lines telling the new turn's first call which turns were stopped, what was left
    undone and what stays done (empty when none were)."""
    lines = []
    for turn in turns:
        effects = "; ".join(turn.effects[:EFFECTS_LISTED])
        if len(turn.effects) > EFFECTS_LISTED:
            effects += f"; and {len(turn.effects) - EFFECTS_LISTED} more"
        if turn.closed:
            line = chosen(prompts).render(
                "superseded_turn_note",
                outcome=OUTCOMES[turn.fate],
                titles=", ".join(f"'{title}'" for title in turn.closed),
                effects=effects or "nothing",
            )
        else:
            line = chosen(prompts).render(
                "superseded_turn_done_note", outcome=OUTCOMES[turn.fate], effects=effects
            )
        lines.append(line)
    return "\n".join(lines)
