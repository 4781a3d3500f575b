"""``python -m bench.prompt_size [--n 20]``: how many characters turnplan sends per LLM call, and
on what (issue 12, prompt size).

The turn is the benchmark's N-item turn on turnplan as users run it: ``build_graph`` with its
default toolsets (personal tasks), the full prompt profile, ``ChatOpenAI`` talking real HTTP to
``tests.scripted_openai.ScriptedOpenAIServer``, plus the benchmark's ``do_item`` tool, driven by
``tests.http_oracle.HttpPlanOracle`` (plan and act; per call close one and act on the next;
answer: N + 2 calls).

Each request is split into the parts a prompt change moves: the tool schemas, the system
prompt, the plan view (wherever the prompt puts it), the history window, and the envelope (the
model name, flags and JSON punctuation around them). The parts add up to the total exactly, so
a figure never hides a part. Sizes are characters of the request body as the ``openai`` client
serializes it (compact JSON, non-ASCII unescaped), which is what a provider receives.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from langchain_core.messages import HumanMessage

from agent.context import Context
from agent.graph import build_graph
from agent.state import InputState
from bench.scenario import ActionLog, action, request_for, titles_for
from bench.systems import RECURSION_LIMIT
from bench.wire import Body, scripted_chat_model
from storage import Database
from tests.fakes import plan_view
from tests.http_oracle import HttpPlanOracle
from tests.scripted_openai import ScriptedOpenAIServer

DEFAULT_N = 20


def chars(payload: Any) -> int:
    """Characters of ``payload`` as the ``openai`` client sends it (``openapi_dumps``)."""
    return len(json.dumps(payload, ensure_ascii=False, separators=(",", ":")))


@dataclass(frozen=True)
class CallSize:
    """One request, split; ``total`` is the sum of the other fields."""

    tools: int
    system: int
    """The system prompt without any plan view in it."""
    plan_view: int
    window: int
    """History messages (everything but the system prompt and the plan view)."""
    envelope: int
    """The rest of the body: model name, ``stream``, and the JSON punctuation joining the parts."""

    @property
    def total(self) -> int:
        return self.tools + self.system + self.plan_view + self.window + self.envelope


def split_request(body: Body) -> CallSize:
    """Where the characters of one request body go (see the module docstring)."""
    messages: list[dict[str, Any]] = list(body.get("messages") or [])
    tools = body.get("tools") or []
    view = plan_view(messages)
    # The plan view travels as its own message, joined to a user message (after the turn's
    # request), or inside the system prompt.
    view_message = next(
        (i for i, m in enumerate(messages) if view and m.get("content") == view), None
    )
    holder = next(
        (
            i
            for i in range(len(messages) - 1, -1, -1)
            if view and view_message is None and view in str(messages[i].get("content") or "")
        ),
        None,
    )
    system = chars(messages[0]) if messages else 0
    plan = 0
    inside = 0  # the view's share of the message that holds it, when it is not on its own
    if holder is not None:
        plan = inside = chars(view) - 2  # the view's escaped text in that message, no quotes
        if holder == 0:
            system -= inside
            inside = 0
    elif view_message is not None:
        plan = chars(messages[view_message])
    window = sum(chars(m) for i, m in enumerate(messages) if i not in (0, view_message)) - inside
    total = chars(body)
    return CallSize(
        tools=chars(tools),
        system=system,
        plan_view=plan,
        window=window,
        envelope=total - chars(tools) - sum(chars(m) for m in messages),
    )


async def turn_requests(n: int, server: ScriptedOpenAIServer) -> list[Body]:
    """Run the N-item turn over HTTP; the request bodies it sent, in order."""
    titles = titles_for(n)
    log = ActionLog()
    server.respond_with(HttpPlanOracle(titles, action))
    before = len(server.requests)
    model = scripted_chat_model(server)
    with tempfile.TemporaryDirectory(prefix="bench-prompt-") as workdir:
        database = Database(f"sqlite+aiosqlite:///{Path(workdir) / 'turnplan.db'}")
        graph = build_graph(model, tools=[log.tool()], database=database)
        try:
            await graph.ainvoke(
                InputState(messages=[HumanMessage(content=request_for(titles))]),
                config={"recursion_limit": RECURSION_LIMIT},
                context=Context(max_batch_items=max(50, n)),
            )
        finally:
            await database.dispose()
    if not log.did_each_once(titles):
        raise RuntimeError(f"the turn did {len(log.done)} actions for {n} items")
    return server.requests[before:]


async def measure_turn(n: int, server: ScriptedOpenAIServer) -> list[CallSize]:
    """Run the N-item turn over HTTP and split every request it sent."""
    return [split_request(body) for body in await turn_requests(n, server)]


def report(n: int, sizes: Sequence[CallSize]) -> str:
    """The figures as a short markdown table: the turn's total, the average call, the split."""
    total = sum(size.total for size in sizes)
    lines = [
        f"N-item turn, N = {n}: {len(sizes)} LLM calls, {total:,} characters "
        f"({total // max(1, len(sizes)):,} per call on average)",
        "",
        "| part | characters (turn) | per call | share |",
        "|---|---:|---:|---:|",
    ]
    for part in (f.name for f in fields(CallSize)):
        value = sum(getattr(size, part) for size in sizes)
        share = value / total if total else 0.0
        lines.append(
            f"| {part.replace('_', ' ')} | {value:,} | {value // max(1, len(sizes)):,} | "
            f"{share:.0%} |"
        )
    return "\n".join(lines)


async def _run(n: int) -> str:
    with ScriptedOpenAIServer() as server:
        return report(n, await measure_turn(n, server))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.prompt_size", description=__doc__)
    parser.add_argument("--n", type=int, default=DEFAULT_N, help="items in the turn (20)")
    args = parser.parse_args(argv)
    print(asyncio.run(_run(args.n)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
