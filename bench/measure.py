"""Run one system for one N, twice: over HTTP for calls and tokens, in process for overhead.

A run counts only if the turn really happened: every item's action ran exactly once, the turn
ended with an answer, (for turnplan systems) every plan row is completed, and the oracle did not
have to leave its path to finish. A run that breaks any of these is reported with ``ok = False``
and the reason, never silently.
"""

from __future__ import annotations

import tempfile
import time
from contextlib import AsyncExitStack
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from bench.postgres import PostgresBench, postgres_checkpointer
from bench.prefix import mean_shared_prefix
from bench.scenario import ActionLog, request_for, titles_for
from bench.systems import PreparedTurn, System, TurnResult
from bench.wire import Body, InstantChatModel, Oracle, UsageRecorder, scripted_chat_model
from tests.scripted_openai import Reply, ScriptedOpenAIServer


@dataclass
class HttpRun:
    """What the HTTP run of one turn leaves behind."""

    usage: UsageRecorder
    bodies: list[Body]
    """The request bodies the server received for this turn, in order."""
    result: TurnResult
    problem: str


@dataclass
class Measurement:
    """The figures of one system at one N."""

    system: str
    n: int
    calls: int
    prompt_tokens: int
    max_prompt_tokens: int
    completion_tokens: int
    shared_prefix: float | None
    """Mean over the turn's calls after the first of the share of each prompt equal to the
    previous prompt from the start (``bench.prefix``); None for a one-call turn."""
    overhead_seconds: float
    """Wall time of the turn with the instant model, minus the time spent inside the model."""
    checkpointed_overhead_seconds: float
    """The same with a SQLite checkpointer compiled into the agent (``AsyncSqliteSaver`` on a
    file): every step's state written, as ``langgraph dev`` or any durable deployment runs it."""
    ok: bool
    problem: str = ""
    rows_completed: int | None = None
    """Plan rows completed in the database after the HTTP run (turnplan systems only)."""

    @property
    def overhead_ms(self) -> float:
        return 1000 * self.overhead_seconds

    @property
    def overhead_ms_per_item(self) -> float:
        return self.overhead_ms / self.n

    @property
    def checkpointed_overhead_ms(self) -> float:
        return 1000 * self.checkpointed_overhead_seconds

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "overhead_ms_per_item": self.overhead_ms_per_item}


def _checked(oracle: Oracle, unbound: set[str]) -> Oracle:
    """``oracle``, noting any tool it calls that the request did not offer: a framework answers
    such a call with an error message and carries on, which must not pass as a good run."""

    def respond(body: Body) -> Reply:
        reply = oracle(body)
        offered = {tool["function"]["name"] for tool in body.get("tools") or []}
        unbound.update(name for name, _ in reply.tool_calls if name not in offered)
        return reply

    return respond


def _off_path(oracle: Oracle) -> str:
    """Why the framework left the oracle's path, for an oracle that can tell (its ``problem``
    attribute, e.g. ``StagesOracle``): a fallback that still finishes the turn must not pass
    as the path being measured."""
    return str(getattr(oracle, "problem", "") or "")


def _problem(
    result: TurnResult,
    log: ActionLog,
    titles: list[str],
    unbound: set[str] | None = None,
    off_path: str = "",
) -> str:
    """Why a finished turn does not count, or "" when it does."""
    if unbound:
        return f"called tools the agent does not offer: {', '.join(sorted(unbound))}"
    if not log.did_each_once(titles):
        return f"actions ran {len(log.done)} times for {len(titles)} items"
    if not result.answer:
        return "the turn ended without an answer"
    if result.rows_total is not None and result.rows_completed != len(titles):
        return f"{result.rows_completed} of {result.rows_total} plan rows completed"
    if off_path:
        return f"off the oracle's path: {off_path}"
    return ""


async def _http_run(system: System, n: int, server: ScriptedOpenAIServer) -> HttpRun:
    titles = titles_for(n)
    usage = UsageRecorder()
    unbound: set[str] = set()
    before = len(server.requests)
    oracle = system.oracle(titles)
    server.respond_with(_checked(oracle, unbound))
    model = scripted_chat_model(server, callbacks=[usage])
    log = ActionLog()
    with tempfile.TemporaryDirectory(prefix="bench-") as workdir:
        turn = system.prepare(model, log.tool(), Path(workdir), n)
        try:
            await turn.warm()
            result = await (await turn.run(request_for(titles))).settled()
        finally:
            await turn.close()
    return HttpRun(
        usage=usage,
        bodies=list(server.requests[before:]),
        result=result,
        problem=_problem(result, log, titles, unbound, _off_path(oracle)),
    )


@dataclass(frozen=True)
class TimedTurn:
    """The timed turn of ``timed_turn``: its wall time, the time spent inside the model, the
    model's calls, and why it does not count ("" when it does)."""

    wall_seconds: float
    model_seconds: float
    calls: int
    problem: str


async def _instant_run(system: System, n: int, *, checkpointed: bool = False) -> tuple[float, str]:
    """The overhead of one turn (``timed_turn`` with the instant model): its wall time minus
    the time spent inside the model, and its problem."""
    turn = await timed_turn(system, n, checkpointed=checkpointed)
    return turn.wall_seconds - turn.model_seconds, turn.problem


async def timed_turn(
    system: System,
    n: int,
    *,
    checkpointed: bool = False,
    latency: float = 0.0,
    postgres: PostgresBench | None = None,
) -> TimedTurn:
    """The second turn of a freshly built agent, timed. The first, untimed and with an instant
    model, fills what a running server has filled once for all its turns (compiled SQL
    statements, bound tool schemas, lazy imports), for every system alike; it must be a good
    run too. ``checkpointed``: the agent is compiled with a SQLite checkpointer on a file (each
    turn in a thread of its own). ``latency``: each model call of the timed turn takes that
    many seconds (``InstantChatModel.latency``), counted in ``model_seconds``. ``postgres``:
    the checkpointer and turnplan's tables are on a fresh database of that server instead."""
    titles = titles_for(n)
    unbound: set[str] = set()
    oracle = system.oracle(titles)
    model = InstantChatModel(oracle=_checked(oracle, unbound))
    log = ActionLog()
    with tempfile.TemporaryDirectory(prefix="bench-") as workdir:
        async with AsyncExitStack() as stack:
            name = postgres.fresh_database() if postgres is not None else None
            checkpointer = (
                await stack.enter_async_context(
                    postgres_checkpointer(postgres, name)
                    if postgres is not None and name is not None
                    else AsyncSqliteSaver.from_conn_string(str(Path(workdir) / "checkpoints.db"))
                )
                if checkpointed
                else None
            )
            url = postgres.sqlalchemy_url(name) if postgres is not None and name else None
            turn = system.prepare(model, log.tool(), Path(workdir), n, checkpointer, url)
            return await _timed_second_turn(
                system, turn, model, _TurnCheck(oracle, log, titles, unbound), latency
            )


@dataclass
class _TurnCheck:
    """What a turn is checked against: its oracle, its action log, its items and the tools the
    oracle called that were not offered."""

    oracle: Oracle
    log: ActionLog
    titles: list[str]
    unbound: set[str]

    def problem(self, result: TurnResult) -> str:
        return _problem(result, self.log, self.titles, self.unbound, _off_path(self.oracle))


async def _timed_second_turn(
    system: System,
    turn: PreparedTurn,
    model: InstantChatModel,
    checked: _TurnCheck,
    latency: float,
) -> TimedTurn:
    """Run ``turn`` twice, the second timed (see ``timed_turn``), and close it; ``checked``'s
    oracle drives the first (``model`` answers through it)."""
    try:
        await turn.warm()
        result = await (await turn.run(request_for(checked.titles))).settled()
        warm_up_problem = checked.problem(result)
        checked.oracle = system.oracle(checked.titles)
        model.oracle = _checked(checked.oracle, checked.unbound)
        model.model_seconds, model.calls, model.latency = 0.0, 0, latency
        checked.log.done.clear()
        started = time.perf_counter()
        result = await turn.run(request_for(checked.titles))
        wall = time.perf_counter() - started
        result = await result.settled()
    finally:
        await turn.close()
    problem = checked.problem(result)
    if warm_up_problem and not problem:
        problem = f"warm-up turn: {warm_up_problem}"
    # A call takes ``latency`` or, when building its answer took longer, that time.
    model_seconds = max(model.model_seconds, model.calls * latency)
    return TimedTurn(wall, model_seconds, model.calls, problem)


async def measure(
    system: System, n: int, server: ScriptedOpenAIServer, *, repeats: int = 3
) -> Measurement:
    """Calls, tokens and shared prefix from one HTTP run; overhead as the best of ``repeats``
    instant runs, without and with a checkpointer (the minimum is the least disturbed by the
    rest of the machine)."""
    http = await _http_run(system, n, server)
    usage, requests, problem = http.usage, len(http.bodies), http.problem
    if requests != len(usage.prompt):
        problem = problem or f"{requests} requests but {len(usage.prompt)} usage reports"
    overheads: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(max(1, repeats)):
        for checkpointed, times in overheads.items():
            overhead, instant_problem = await _instant_run(system, n, checkpointed=checkpointed)
            times.append(overhead)
            problem = problem or instant_problem
    return Measurement(
        system=system.name,
        n=n,
        calls=requests,
        prompt_tokens=sum(usage.prompt),
        max_prompt_tokens=max(usage.prompt, default=0),
        completion_tokens=sum(usage.completion),
        shared_prefix=mean_shared_prefix(http.bodies),
        overhead_seconds=min(overheads[False]),
        checkpointed_overhead_seconds=min(overheads[True]),
        ok=not problem,
        problem=problem,
        rows_completed=http.result.rows_completed,
    )
