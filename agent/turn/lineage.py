"""Which run of a turn this is: the turn's own continuation, the same run resumed, or a fork.

The plan rows live in the database, outside LangGraph's checkpoints. A run started from an older
checkpoint of a turn (Studio's fork or replay, ``update_state`` on a past checkpoint) would
otherwise see rows the original run closed after that checkpoint, and answer "All done" having
done nothing. So every node of a turn counts its step in the state (``turnStep``) and claims the
next step by inserting its row in ``turn_steps`` (``storage.repositories.turn_steps``):

- nobody had the step: the turn goes on;
- the step was taken by this same run (``RunIdentity``): the same LangGraph task (a node run
  again from the same checkpoint: a crash, a cancel, an interrupt's resume) or the same
  LangGraph Server run (the server's retry of a run whose worker died). The turn goes on. If
  the turn had got further than this checkpoint (its newest checkpoints were lost: under
  ``durability="async"`` or ``"exit"`` they are written after the database), the run catches
  up (``catchUpTo`` in the state): its steps up to there are the ones it already took, its model
  answers are the recorded ones (``agent.turn.answer_ledger``) and its tool calls return their
  recorded results, so nothing is done twice;
- another run took it: this run starts from an older checkpoint (LangGraph gives a replay or an
  edit a checkpoint and so task ids of its own). It becomes a turn of its own
  (``<turnId>/fork-<hex>``) whose rows are copies of the plan as the checkpoint saw it
  (``todos`` in the state), so the fork really re-runs the work and the original turn's record is
  never touched.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.config import get_config
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm.attributes import set_committed_value

from agent.errors import ErrorCode, ToolFailure, database_failure
from agent.state import SupervisorState
from storage import Database
from storage.models import (
    CANCELLED_BY,
    TODO_STATUSES,
    TodoCancellation,
    TurnStep,
    TurnTodo,
    utc_now_iso,
)
from storage.repositories import (
    ConversationRepository,
    TodoDependencyRepository,
    TurnRepository,
    TurnScope,
    TurnStepRepository,
    TurnTodoRepository,
    claim_step_alone,
    claim_step_with_answer,
)

FORK_MARK = "/fork-"


class TurnRefused(Exception):
    """The turn cannot start as named; the message says why and what to do instead."""


class ConversationNotYours(TurnRefused):
    """The conversation belongs to another user."""

    def __init__(self, conversation_id: str) -> None:
        super().__init__(
            f"The conversation '{conversation_id}' belongs to another user; nothing was done. "
            "Start a new conversation (another thread, or another conversation_id)."
        )


class TurnIdTaken(TurnRefused):
    """A new message names a turn id that another message's turn already used."""

    def __init__(self, turn_id: str) -> None:
        super().__init__(
            f"The turn id '{turn_id}' already names an earlier turn of this conversation; "
            "send the new message with a new turnId (or none, to use the message id)."
        )


@dataclass(frozen=True)
class TurnClaim:
    """The turn a node works on, and the step the state moves to."""

    scope: TurnScope
    step: int
    forked_from: str | None = None
    rows: list[TurnTodo] | None = None
    """The turn's rows, read in the claim's own transaction when the node asked for them (one
    transaction instead of two, and the rows are exactly those of the step just claimed)."""
    retaken: bool = False
    """This run had taken the step before (it runs again, or catches up): its model answer may
    be recorded already (``agent.turn.answer_ledger``)."""
    catch_up_to: int = 0
    """The turn's step when this run found it had got further than its checkpoint: the steps up
    to it were this run's own, and are taken again without a claim."""

    def update(self) -> dict[str, Any]:
        """State changes that go with the claim: the step, a fork's new turn id, and how far a
        resumed run catches up."""
        changes: dict[str, Any] = {"turnStep": self.step}
        if self.forked_from is not None:
            changes["turnId"] = self.scope.turn_id
        if self.catch_up_to:
            changes["catchUpTo"] = self.catch_up_to
        return changes


@dataclass(frozen=True)
class RunIdentity:
    """What stays the same when the same run of a turn runs a node again.

    ``task_id``: LangGraph derives a task's id from the checkpoint it runs from, so a node run
    again from that checkpoint (a crash, a cancel, an interrupt's resume, ``ainvoke(None)``) has
    the same one, and a replay or an edit in Studio (LangGraph writes them a checkpoint of their
    own) never has. ``run_id``: a LangGraph Server run's id, the same for every attempt when
    the server retries the run after its worker died (the server then starts it over from its
    input, so its task ids are new); else the ``run_id`` a Python caller put in the config's
    ``configurable``; else empty. ``saved``: the graph's own checkpointer, for Python runs
    without a run id (``lost_since``).
    """

    task_id: str
    run_id: str = ""
    thread_id: str = ""
    saved: BaseCheckpointSaver[Any] | None = field(default=None, compare=False)

    def took(self, claimer: TurnStep) -> bool:
        """Whether the step this row records was taken by this same run."""
        return claimer.taskId == self.task_id or bool(self.run_id and claimer.runId == self.run_id)

    async def lost_since(self, claimer: TurnStep, latest: TurnStep) -> bool:
        """Whether the steps from ``claimer``'s to ``latest`` were taken by a run whose
        checkpoints of them were never saved (its process died under ``durability="async"`` or
        ``"exit"``): a Python run without a run id that starts from the newest checkpoint it
        could find then continues that run. A replay or an edit starts from an older checkpoint
        than those the turn saved between the two steps, and forks. (With one step between
        them nothing tells the two apart: the run catches up, reusing that step's recorded
        answer.)"""
        if not self.reads_checkpoints or self.saved is None:
            return False
        since, until = _when(claimer.claimedAt), _when(latest.claimedAt)
        where = {"thread_id": self.thread_id, "checkpoint_ns": ""}
        thread: RunnableConfig = {"configurable": where}
        async for saved in self.saved.alist(thread):
            made = _when(saved.checkpoint["ts"])
            if made <= since:
                return True  # newest first: nothing was saved while the turn went on
            if made < until:
                return False  # the turn's progress after the step was saved: a fork
        return True

    @property
    def reads_checkpoints(self) -> bool:
        """Whether ``lost_since`` can tell anything: a run without a run id, in a graph
        compiled with its checkpointer."""
        return not self.run_id and self.saved is not None and bool(self.thread_id)


def _when(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def task_id_of(config: RunnableConfig | None) -> str:
    """The running LangGraph task's id: the same when a node runs again from the same
    checkpoint, different for any other run of it."""
    metadata: Mapping[str, Any] = (config or {}).get("metadata") or {}
    namespace = str(metadata.get("langgraph_checkpoint_ns") or "")
    return namespace.rpartition(":")[2] or str(uuid.uuid4())


def server_run_id_of(config: RunnableConfig | None) -> str:
    """The LangGraph Server run this node runs in (``run_id`` in the run's configurable, which
    the server sets on every attempt), else empty."""
    configurable: Mapping[str, Any] = (config or {}).get("configurable") or {}
    return str(configurable.get("run_id") or "")


def identity_of(
    config: RunnableConfig | None, saved: BaseCheckpointSaver[Any] | None = None
) -> RunIdentity:
    """The running node's ``RunIdentity``; ``saved`` is the checkpointer the graph was compiled
    with, if any (a server brings its own, and its run ids)."""
    configurable: Mapping[str, Any] = (config or {}).get("configurable") or {}
    return RunIdentity(
        task_id_of(config),
        server_run_id_of(config),
        thread_id=str(configurable.get("thread_id") or ""),
        saved=saved,
    )


def fork_scope(scope: TurnScope) -> TurnScope:
    """A fresh turn id for a fork of ``scope`` (forks of forks stay readable: one suffix)."""
    base = scope.turn_id.split(FORK_MARK, 1)[0]
    return TurnScope(scope.conversation_id, f"{base}{FORK_MARK}{uuid.uuid4().hex[:8]}")


async def begin_turn(
    database: Database,
    scope: TurnScope,
    *,
    message_id: str,
    identity: RunIdentity,
    user_id: str,
    previous_turn: str | None = None,
) -> TurnClaim:
    """Claim step 1 of a turn for the ``plan`` node, for ``user_id``; the claim's rows are
    known (none) for a turn that starts now or a fork of a whole turn. ``previous_turn``: the
    turn before it on the thread's branch (the state's), recorded for a turn that starts now
    (``storage.models.TurnBranch``).

    A conversation belongs to the user who started it: another user naming it gets
    ``ConversationNotYours`` and nothing changes. A turn id seen for the first time starts the
    turn. The same run again (``RunIdentity``) resumes it, catching up with the steps it already
    took. The same message in another run (a replay of the whole turn) is a fork with an empty
    plan. Another message naming a used turn id raises ``TurnIdTaken``: a finished turn is
    never reopened.
    """
    try:
        asked = FirstStep(message_id, identity, user_id, previous_turn)
        claim = await _claim_first_step(database, scope, asked, None)
        if claim is None:
            # Step 1 was taken by another task: whether that was this run, whose checkpoints
            # were lost, is read from the checkpoints outside the write transaction (as
            # ``continue_turn`` does); a turn that starts now never needs the read.
            lost = await _lost_steps(database, scope, 1, identity)
            claim = await _claim_first_step(database, scope, asked, lost)
        if claim is None:  # pragma: no cover - decided once ``lost`` is known
            raise RuntimeError("the claim of a turn's first step stayed undecided")
        return claim
    except IntegrityError:
        # Two first runs of one turn id raced; the loser re-reads what the winner wrote.
        return await begin_turn(
            database,
            scope,
            message_id=message_id,
            identity=identity,
            user_id=user_id,
            previous_turn=previous_turn,
        )
    except (SQLAlchemyError, OSError) as error:
        raise database_failure(error, "turn") from error


async def record_run_going_on(database: Database, scope: TurnScope, identity: RunIdentity) -> None:
    """Record that the server run ``identity`` goes on with the turn (after a pause another run
    began): a step of its own after the turn's last, so a newer run that stops it is asked
    about this run, not the one that began the turn (``agent.turn.superseded``). For
    ``TurnPlanMiddleware``, which claims a turn's first step only; the supervisor graph claims
    every step. A run without a run id (a Python caller's) has nothing to record."""
    if not identity.run_id:
        return
    try:
        async with database.session() as session:
            steps = TurnStepRepository(session)
            last = await steps.last(scope)
            if last is None or last.runId == identity.run_id:
                return
            # Another run recording the same step first is left as it is.
            await steps.claim(
                scope, step=last.step + 1, task_id=identity.task_id, run_id=identity.run_id
            )
    except (SQLAlchemyError, OSError) as error:
        raise database_failure(error, "turn") from error


@dataclass(frozen=True)
class FirstStep:
    """Who asks for a turn's first step, and after which turn of the thread's branch."""

    message_id: str
    identity: RunIdentity
    user_id: str
    previous_turn: str | None


async def _claim_first_step(
    database: Database, scope: TurnScope, asked: FirstStep, lost: bool | None
) -> TurnClaim | None:
    """``begin_turn``'s claim in a write transaction; None when it depends on
    ``RunIdentity.lost_since`` (step 1 taken by another task, checkpoints readable), which the
    caller reads outside this transaction and passes as ``lost``."""
    message_id, identity, user_id = asked.message_id, asked.identity, asked.user_id
    async with database.session() as session:
        owner = await ConversationRepository(session).claim(scope.conversation_id, user_id)
        if owner != user_id:
            raise ConversationNotYours(scope.conversation_id)
        turns, steps = TurnRepository(session), TurnStepRepository(session)
        known = await turns.find(scope)
        if known is None:
            await turns.create(scope, message_id=message_id, step=1, task_id=identity.task_id)
            await turns.record_branch(scope, asked.previous_turn)
            await steps.claim(scope, step=1, task_id=identity.task_id, run_id=identity.run_id)
            return TurnClaim(scope, 1, rows=[])  # a turn that starts now has no rows yet
        first = await steps.claimer(scope, 1)
        if first is not None and identity.took(first):
            return await _retaken(steps, scope, 1)
        if first is not None and identity.reads_checkpoints:
            if lost is None:
                return None
            if lost:
                return await _retaken(steps, scope, 1)
        if message_id and known.messageId != message_id:
            raise TurnIdTaken(scope.turn_id)
        earlier = await turns.find_fork(scope, task_id=identity.task_id, step=1)
        if earlier is not None:  # this node forked already, and runs again
            fork = TurnScope(scope.conversation_id, earlier.turnId)
            return replace(await _retaken(steps, fork, 1), forked_from=scope.turn_id)
        fork = fork_scope(scope)
        await turns.create(
            fork,
            message_id=message_id,
            step=1,
            task_id=identity.task_id,
            forked_from=scope.turn_id,
        )
        await turns.record_branch(fork, asked.previous_turn)  # a replay: the branch it is on
        await steps.claim(fork, step=1, task_id=identity.task_id, run_id=identity.run_id)
        return TurnClaim(fork, 1, forked_from=scope.turn_id, rows=[])


async def _lost_steps(
    database: Database, scope: TurnScope, step: int, identity: RunIdentity
) -> bool:
    """``RunIdentity.lost_since`` for ``step`` of the turn, read outside any write transaction:
    the checkpointer may be another connection to the same SQLite file, whose writes would wait
    for ours while ours waited for its read."""
    if not identity.reads_checkpoints:
        return False
    async with database.session(readonly=True) as session:
        steps = TurnStepRepository(session)
        claimer, last = await steps.claimer(scope, step), await steps.last(scope)
    if claimer is None or last is None or identity.took(claimer):
        return False
    return await identity.lost_since(claimer, last)


async def _retaken(steps: TurnStepRepository, scope: TurnScope, step: int) -> TurnClaim:
    """The claim of a step this run took before: it goes on from there, catching up with the
    steps it took after it if its checkpoint is older than the turn."""
    latest = await steps.latest(scope) or step
    return TurnClaim(scope, step, retaken=True, catch_up_to=latest if latest > step else 0)


async def continue_turn(
    database: Database,
    scope: TurnScope,
    *,
    step: int,
    identity: RunIdentity,
    message_id: str,
    todos: Sequence[Mapping[str, Any]],
    read_rows: bool = False,
    known_rows: list[TurnTodo] | None = None,
    catch_up_to: int = 0,
) -> TurnClaim:
    """Claim the next step of a running turn for ``execute`` or ``drain``; a run from an older
    checkpoint gets a fork whose rows are copied from ``todos`` (the state's plan snapshot).
    ``read_rows`` also reads the claimed turn's rows, in the same transaction; ``known_rows``
    are the rows as of ``step`` (``agent.turn.rows_handoff``), taken instead unless the claim forks.
    While ``catch_up_to`` is ahead the step is one this run took before: nothing is claimed."""
    try:
        if step + 1 <= catch_up_to:
            again = TurnClaim(scope, step + 1, retaken=True, catch_up_to=catch_up_to)
            if known_rows is not None or not read_rows:
                return replace(again, rows=known_rows)
            async with database.session(readonly=True) as session:
                return replace(again, rows=await TurnTodoRepository(session).find_by_turn(scope))
        # Nothing to read with it: the plain claim is one INSERT, a transaction of its own.
        # Anything else (a fork, a step taken before, a turn to adopt) is settled below.
        nothing_to_read = known_rows is not None or not read_rows
        if nothing_to_read and await claim_step_alone(
            database, scope, step=step + 1, task_id=identity.task_id, run_id=identity.run_id
        ):
            return TurnClaim(scope, step + 1, rows=known_rows)
        claim = await _settle_claim(
            database, scope, step, identity, message_id, todos, None, read_rows, known_rows
        )
        if claim is None:
            # Whether a step another task took is this run's own depends on the checkpoints,
            # read outside the write transaction; then the claim is settled knowing it.
            lost = await _lost_steps(database, scope, step + 1, identity)
            claim = await _settle_claim(
                database, scope, step, identity, message_id, todos, lost, read_rows, known_rows
            )
        if claim is None:  # pragma: no cover - _claim_step decides once ``lost`` is known
            raise RuntimeError("a step claim stayed undecided with the checkpoints read")
        return claim
    except (SQLAlchemyError, OSError) as error:
        raise database_failure(error, "turn") from error


@dataclass(eq=False)
class DeferredClaim:
    """The next step's claim for a run that goes straight on from a step of its own (the rows
    were handed over, ``agent.turn.rows_handoff``): made after the model call, in the
    transaction that records its answer (one transaction a model step instead of two), or alone
    when there is no answer to record. Either way it is made before any of the answer's calls
    runs, so the claim still fences the tools step. A run that finds the step taken meanwhile
    (another run of the same turn at the same step: a server's retry racing the run it
    replaces) records nothing and settles its claim as any other run does (``continue_turn``),
    having spent one model call. A run from a checkpoint (a resume, a replay, a fork) has
    nothing handed over, and claims before it calls the model."""

    database: Database
    scope: TurnScope
    step: int
    identity: RunIdentity
    taken: bool | None = None
    """Whether this run took the step; None until the claim is made."""

    @classmethod
    def next_of(cls, database: Database, state: SupervisorState) -> DeferredClaim:
        scope = TurnScope(state.conversationId, state.turnId)
        return cls(database, scope, state.turnStep + 1, identity_of(get_config()))

    async def with_answer(self, call_index: int, history_length: int, message: str) -> bool:
        """Claim the step and record the answer; whether the answer was recorded (not when
        the step was taken meanwhile, nor when its place holds another answer already)."""
        try:
            self.taken, recorded = await claim_step_with_answer(
                self.database,
                self.scope,
                step=self.step,
                task_id=self.identity.task_id,
                run_id=self.identity.run_id,
                call_index=call_index,
                history_length=history_length,
                message=message,
            )
        except (SQLAlchemyError, OSError) as error:
            raise database_failure(error, "turn") from error
        return recorded

    async def alone(self) -> bool:
        """Make the claim if the answer's record has not: whether this run took the step."""
        if self.taken is None:
            try:
                self.taken = await claim_step_alone(
                    self.database,
                    self.scope,
                    step=self.step,
                    task_id=self.identity.task_id,
                    run_id=self.identity.run_id,
                )
            except (SQLAlchemyError, OSError) as error:
                raise database_failure(error, "turn") from error
        return self.taken


async def _settle_claim(
    database: Database,
    scope: TurnScope,
    step: int,
    identity: RunIdentity,
    message_id: str,
    todos: Sequence[Mapping[str, Any]],
    lost: bool | None,
    read_rows: bool,
    known_rows: list[TurnTodo] | None,
) -> TurnClaim | None:
    """``_claim_step`` in a write transaction of its own, with the claimed turn's rows (the
    ones handed over, else read in the same transaction when asked for)."""
    async with database.session() as session:
        claim = await _claim_step(session, scope, step, identity, message_id, todos, lost)
        if claim is None:
            return None
        if known_rows is not None and claim.forked_from is None:
            return replace(claim, rows=known_rows)
        if not read_rows:
            return claim
        return replace(claim, rows=await TurnTodoRepository(session).find_by_turn(claim.scope))


async def _claim_step(
    session: AsyncSession,
    scope: TurnScope,
    step: int,
    identity: RunIdentity,
    message_id: str,
    todos: Sequence[Mapping[str, Any]],
    lost: bool | None,
) -> TurnClaim | None:
    """The claim of the next step; None when it depends on ``RunIdentity.lost_since``, which
    the caller reads outside this transaction and passes as ``lost``."""
    turns, steps = TurnRepository(session), TurnStepRepository(session)
    taken = step + 1
    if await steps.claim(scope, step=taken, task_id=identity.task_id, run_id=identity.run_id):
        if await turns.find(scope) is None:
            # A turn that began before turns were recorded: adopt it as it is.
            await turns.create(scope, message_id=message_id, step=taken, task_id=identity.task_id)
        return TurnClaim(scope, taken)
    claimer = await steps.claimer(scope, taken)
    if claimer is not None and identity.took(claimer):
        return await _retaken(steps, scope, taken)
    if claimer is not None and identity.reads_checkpoints:
        if lost is None:
            return None
        if lost:
            return await _retaken(steps, scope, taken)
    earlier = await turns.find_fork(scope, task_id=identity.task_id, step=taken)
    if earlier is not None:  # this node forked already, and runs again (a pause, a crash)
        fork = TurnScope(scope.conversation_id, earlier.turnId)
        return replace(await _retaken(steps, fork, taken), forked_from=scope.turn_id)
    fork = fork_scope(scope)
    await turns.create(
        fork,
        message_id=message_id,
        step=taken,
        task_id=identity.task_id,
        forked_from=scope.turn_id,
    )
    branch = await turns.branch_of(scope)
    if branch is not None:  # the fork follows what the turn it copies followed
        await turns.record_branch(fork, branch.previousTurnId)
    await steps.claim(fork, step=taken, task_id=identity.task_id, run_id=identity.run_id)
    copies = copied_rows(fork, todos)
    session.add_all(copies)
    await session.flush()
    edges = copied_edges(todos, copies)
    await TodoDependencyRepository(session).add(fork, edges)
    await _copy_cancellations(session, fork, todos, copies)
    by_id = {copy.id: copy for copy in copies}
    for copy in copies:  # loaded as a read would load them: the fork's rows are handed on
        waits_for = [by_id[blocker] for todo_id, blocker in edges if todo_id == copy.id]
        set_committed_value(copy, "blockers", waits_for)
    return TurnClaim(fork, taken, forked_from=scope.turn_id)


async def claim_next_step(
    database: Database,
    state: SupervisorState,
    *,
    read_rows: bool = False,
    known_rows: list[TurnTodo] | None = None,
    saved: BaseCheckpointSaver[Any] | None = None,
) -> TurnClaim:
    """``continue_turn`` for the node that is running now, from its state."""
    return await continue_turn(
        database,
        TurnScope(state.conversationId, state.turnId),
        step=state.turnStep,
        identity=identity_of(get_config(), saved),
        message_id=state.turnMessageId,
        todos=state.todos,
        read_rows=read_rows,
        known_rows=known_rows,
        catch_up_to=state.catchUpTo,
    )


async def moved_on(database: Database, scope: TurnScope, step: int, catch_up_to: int = 0) -> bool:
    """Whether the turn has gone past ``step`` (and past the steps this run is catching up
    with): a run from this state is from an older checkpoint (a fork or replay), and its next
    claim will fork."""
    try:
        async with database.session(readonly=True) as session:
            current = await TurnRepository(session).step_of(scope)
    except (SQLAlchemyError, OSError) as error:
        raise database_failure(error, "turn") from error
    return current is not None and current > max(step, catch_up_to)


async def check_current(
    session: AsyncSession,
    scope: TurnScope,
    step: int,
    catch_up_to: int = 0,
    identity: RunIdentity | None = None,
) -> None:
    """Refuse a tool call made from an older checkpoint than the turn has reached, so a fork
    never changes the original turn's rows (the fork's ``drain`` then copies the plan). A run
    catching up with its own steps (``catch_up_to``, or a next step its ``identity`` took: its
    checkpoints were lost) is not older: its calls replay."""
    current = await TurnRepository(session).step_of(scope)
    if current is not None and current > max(step, catch_up_to):
        if identity is not None:
            steps = TurnStepRepository(session)
            claimer, last = await steps.claimer(scope, step + 1), await steps.last(scope)
            if claimer is not None and identity.took(claimer):
                return
            if (
                claimer is not None
                and last is not None
                and await identity.lost_since(claimer, last)
            ):
                return
        raise ToolFailure(
            ErrorCode.NOT_RUN,
            "Not run: this run started from an earlier point of the turn (a fork or replay), "
            "so it continues as a new turn with a copy of the plan as it stood then.",
            "Call the tool again with the ids shown in the plan view.",
        )


def copied_edges(
    todos: Sequence[Mapping[str, Any]], copies: Sequence[TurnTodo]
) -> list[tuple[str, str]]:
    """The snapshot's ``blockedBy`` edges (issue 30) between the copies of its rows, so a fork
    keeps its plan's dependencies."""
    new_id = {str(todo.get("id")): copy.id for todo, copy in zip(todos, copies, strict=True)}
    return [
        (copy.id, new_id[str(blocker)])
        for todo, copy in zip(todos, copies, strict=True)
        for blocker in todo.get("blockedBy") or ()
        if str(blocker) in new_id
    ]


async def _copy_cancellations(
    session: AsyncSession,
    fork: TurnScope,
    todos: Sequence[Mapping[str, Any]],
    copies: Sequence[TurnTodo],
) -> None:
    """Who cancelled each cancelled row of the snapshot, recorded for its copy: a plan the user
    rejected stays the user's choice in the fork, so its end is judged the same way
    (``agent.turn.outcome.turn_end_status``). Every copy gets its ``cancelledBy`` as a read
    would load it."""
    now = utc_now_iso()
    for todo, copy in zip(todos, copies, strict=True):
        by = todo.get("cancelledBy") if copy.status == "cancelled" else None
        known = by if by in CANCELLED_BY else None
        if known is not None:
            session.add(
                TodoCancellation(
                    todoId=copy.id,
                    conversationId=fork.conversation_id,
                    turnId=fork.turn_id,
                    cancelledBy=known,
                    createdAt=now,
                )
            )
        set_committed_value(copy, "cancelledBy", known)
    await session.flush()


def copied_rows(scope: TurnScope, todos: Sequence[Mapping[str, Any]]) -> list[TurnTodo]:
    """New rows for ``scope`` with the snapshot's titles, statuses and outcomes, new ids."""
    rows = []
    for index, todo in enumerate(todos):
        status = str(todo.get("status") or "pending")
        rows.append(
            TurnTodo(
                id=str(uuid.uuid4()),
                conversationId=scope.conversation_id,
                turnId=scope.turn_id,
                title=str(todo.get("title") or ""),
                context=str(todo.get("context") or ""),
                completionCriteria=str(todo.get("completionCriteria") or ""),
                agentType=todo.get("agentType"),
                status=status if status in TODO_STATUSES else "pending",
                priority=int(todo.get("priority") or 0),
                outcome=todo.get("outcome"),
                createdAt=str(todo.get("createdAt") or utc_now_iso(offset_microseconds=index)),
                startedAt=todo.get("startedAt"),
                completedAt=todo.get("completedAt"),
            )
        )
    return rows
