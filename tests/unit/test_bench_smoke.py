"""The N-item benchmark runs in process and reports what the user would check (no timings)."""

from __future__ import annotations

from bench.run import run_benchmark
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

    table = report.table()
    assert "| shared prefix % |" in table.splitlines()[0]
    for system in ("turnplan", "react"):
        for n in NS:
            assert f"| {system} | {n} |" in table
    assert "turnplan" in report.growth() and "## Growth in N" in report.markdown()
