"""``python -m bench.soak``: memory, open files and threads over many turns (GUIDE § 5 soak).

Two ways a long-running program drives turnplan, measured with the model taken from settings
(``openai:`` through ``ChatOpenAI`` and real HTTP, against the scripted OpenAI-compatible server
with a two-item planning oracle):

- ``per-loop``: each turn in its own ``asyncio.run(graph.ainvoke(...))``, nothing disposed by
  the caller (scripts, notebooks, job runners);
- ``one-loop``: every turn in one event loop (servers).

Every ``--every`` turns it prints resident memory (``VmRSS``), open file descriptors and
threads. The goal is a flat line: at most 15 MB of growth between turn 50 and turn 150.

    python -m bench.soak                       # both modes, 150 turns each
    python -m bench.soak --mode per-loop --turns 300
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from langchain_core.messages import HumanMessage

from agent.context import Context
from agent.graph import SupervisorGraph, build_graph
from agent.state import InputState
from storage import Database
from tests.http_oracle import HttpPlanOracle
from tests.scripted_openai import ScriptedOpenAIServer

GROWTH_GOAL_MB = 15.0


def sample(turn: int) -> dict[str, Any]:
    """Resident memory (MB), open file descriptors and threads of this process now."""
    gc.collect()
    rss_kb = 0
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss_kb = int(line.split()[1])
    return {
        "turn": turn,
        "rss_mb": round(rss_kb / 1024, 1),
        "open_files": len(os.listdir("/proc/self/fd")),
        "threads": threading.active_count(),
    }


async def one_turn(graph: SupervisorGraph, n: int) -> None:
    result = await graph.ainvoke(
        InputState(messages=[HumanMessage(content=f"two things, round {n}")]),
        context=Context(user_id="soak"),
    )
    if result["turnStatus"] != "answered":
        raise RuntimeError(f"turn {n} ended {result['turnStatus']}")


def soak(
    mode: str, turns: int, every: int, folder: Path, server: ScriptedOpenAIServer
) -> list[dict[str, Any]]:
    """Run ``turns`` turns the ``mode`` way, sampling every ``every`` turns.

    The scripted server keeps every request body it receives (tests read them); the harness
    forgets them after each turn, so the figures measure turnplan and not the harness.
    """
    graph = build_graph(
        "openai:scripted", database=Database(f"sqlite+aiosqlite:///{folder / f'{mode}.db'}")
    )
    samples = []
    if mode == "per-loop":
        for n in range(1, turns + 1):
            asyncio.run(one_turn(graph, n))
            server.requests.clear()
            if n % every == 0:
                samples.append(sample(n))
    else:

        async def all_turns() -> None:
            for n in range(1, turns + 1):
                await one_turn(graph, n)
                server.requests.clear()
                if n % every == 0:
                    samples.append(sample(n))

        asyncio.run(all_turns())
    return samples


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__)
    parser.add_argument("--mode", choices=["per-loop", "one-loop", "both"], default="both")
    parser.add_argument("--turns", type=int, default=150)
    parser.add_argument("--every", type=int, default=50)
    args = parser.parse_args(argv)
    modes = ["per-loop", "one-loop"] if args.mode == "both" else [args.mode]
    report: dict[str, Any] = {}
    with ScriptedOpenAIServer() as server, tempfile.TemporaryDirectory() as folder:
        os.environ.update(
            OPENAI_BASE_URL=server.base_url, OPENAI_API_KEY="soak", TURNPLAN_MODEL="openai:x"
        )
        server.respond_with(HttpPlanOracle(["one", "two"], lambda t: ("add_task", {"title": t})))
        for mode in modes:
            samples = soak(mode, args.turns, args.every, Path(folder), server)
            growth = samples[-1]["rss_mb"] - samples[0]["rss_mb"] if len(samples) > 1 else 0.0
            report[mode] = {
                "samples": samples,
                "growth_mb": round(growth, 1),
                "ok": growth <= GROWTH_GOAL_MB,
            }
    print(json.dumps(report, indent=2))
    return 0 if all(entry["ok"] for entry in report.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
