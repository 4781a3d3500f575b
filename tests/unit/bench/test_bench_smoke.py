"""The N-item benchmark runs in process and reports what the user would check (no timings)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from langchain_core.language_models import BaseChatModel
from langchain_core.tools import BaseTool
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.types import Checkpointer

from bench.measure import _instant_run
from bench.run import run_benchmark
from bench.systems import PreparedTurn, TurnResult
from bench.systems.react import ReactSystem
from bench.systems.turnplan import TurnplanSystem

NS = (1, 3)


async def test_benchmark_reports_turnplan_and_react_for_every_n() -> None:
    report = await run_benchmark(NS, [TurnplanSystem(), ReactSystem()], repeats=1)

    by_key = {(m.system, m.n): m for m in report.measurements}
    assert set(by_key) == {(s, n) for s in ("turnplan", "react") for n in NS}
    assert all(m.ok for m in report.measurements), [m.problem for m in report.measurements]
    for n in NS:
        turnplan = by_key["turnplan", n]
        assert turnplan.calls == n + 2
        assert turnplan.rows_completed == n
        assert by_key["react", n].calls == 2
        assert turnplan.prompt_tokens > turnplan.max_prompt_tokens > 0
        assert turnplan.shared_prefix is not None and 0 < turnplan.shared_prefix <= 1

    assert all(m.checkpointed_overhead_seconds > 0 for m in report.measurements)
    table = report.table()
    assert "| shared prefix % |" in table.splitlines()[0]
    assert "| checkpointed ms/item | checkpointed x turnplan |" in table.splitlines()[0]
    for system in ("turnplan", "react"):
        for n in NS:
            assert f"| {system} | {n} |" in table
    assert "turnplan" in report.growth() and "## Growth in N" in report.markdown()


class _CountedReact(ReactSystem):
    """react, whose first turn on each built agent loses its answer when ``spoil_first``."""

    def __init__(self, *, spoil_first: bool) -> None:
        self.spoil_first = spoil_first
        self.turns: list[int] = []

    def prepare(
        self,
        model: BaseChatModel,
        tool: BaseTool,
        workdir: Path,
        n: int,
        checkpointer: Checkpointer = None,
        database_url: str | None = None,
    ) -> PreparedTurn:
        turn = super().prepare(model, tool, workdir, n, checkpointer, database_url)
        runs = 0

        async def run(request: str) -> TurnResult:
            nonlocal runs
            runs += 1
            self.turns.append(runs)
            result = await turn.run(request)
            return replace(result, answer="") if self.spoil_first and runs == 1 else result

        return replace(turn, run=run)


async def test_overhead_is_timed_on_the_second_turn_of_an_agent_and_both_must_be_good() -> None:
    """The first turn fills what a running server fills once (compiled SQL, bound schemas); a
    failure in it still fails the figure."""
    good = _CountedReact(spoil_first=False)
    overhead, problem = await _instant_run(good, 2)
    assert (problem, good.turns) == ("", [1, 2]) and overhead > 0

    spoiled = _CountedReact(spoil_first=True)
    _, problem = await _instant_run(spoiled, 2)
    assert problem == "warm-up turn: the turn ended without an answer"


class _OneRowShort(TurnplanSystem):
    """turnplan, whose rows are counted one completed row short after each turn."""

    def prepare(
        self,
        model: BaseChatModel,
        tool: BaseTool,
        workdir: Path,
        n: int,
        checkpointer: Checkpointer = None,
        database_url: str | None = None,
    ) -> PreparedTurn:
        turn = super().prepare(model, tool, workdir, n, checkpointer, database_url)

        async def run(request: str) -> TurnResult:
            result = await turn.run(request)
            counted = result.count_rows
            assert counted is not None

            async def one_short() -> tuple[int, int]:
                total, completed = await counted()
                return total, completed - 1

            return replace(result, count_rows=one_short)

        return replace(turn, run=run)


async def test_plan_rows_are_checked_after_the_timed_turn_and_a_short_count_fails_it() -> None:
    _, problem = await _instant_run(_OneRowShort(), 2)
    assert problem == "1 of 2 plan rows completed"


class _Checkpointed(TurnplanSystem):
    """turnplan, noting how many checkpoints its checkpointer holds after each turn."""

    def __init__(self) -> None:
        self.checkpoints: list[int] = []

    def prepare(
        self,
        model: BaseChatModel,
        tool: BaseTool,
        workdir: Path,
        n: int,
        checkpointer: Checkpointer = None,
        database_url: str | None = None,
    ) -> PreparedTurn:
        turn = super().prepare(model, tool, workdir, n, checkpointer, database_url)
        assert isinstance(checkpointer, AsyncSqliteSaver)

        async def run(request: str) -> TurnResult:
            result = await turn.run(request)
            self.checkpoints.append(len([c async for c in checkpointer.alist(None)]))
            return result

        return replace(turn, run=run)


async def test_the_checkpointed_overhead_runs_every_step_of_both_turns_through_a_checkpointer() -> (
    None
):
    system = _Checkpointed()
    overhead, problem = await _instant_run(system, 2, checkpointed=True)
    assert problem == "" and overhead > 0
    first, both = system.checkpoints
    # Each turn in a thread of its own, each of its steps written: the second adds as many.
    assert first > 2 * 2 and both == 2 * first
