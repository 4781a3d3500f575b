"""A process that runs several supervisor turns at once on durable threads, for crash-resume
tests under each checkpoint durability.

    python -m tests.async_crash_driver DATABASE_URL DURABILITY start|resume TURNS [RUN_IDS]

``start`` sends each thread its request (thread ``t<i>``, user ``user-<i>``, message id
``m-<i>``) with the given durability, all turns at once; the test SIGKILLs the process while
they run. ``resume`` finishes every thread the way a caller that lost its process would: a
thread whose checkpoint holds the request and no ending goes on from there (``ainvoke(None)``,
which also applies the writes of steps that finished after it); a thread whose checkpoint does
not hold the request yet (it was lost) gets the same request again. With ``RUN_IDS``
(``run-ids``) each thread's run carries a stable ``run_id`` in its configurable, as a LangGraph
Server gives its runs; without, the runs are plain ``ainvoke`` calls. It prints every thread's
final ``turnStatus`` as JSON. The model is whatever ``TURNPLAN_MODEL`` / ``OPENAI_BASE_URL``
name (the tests' scripted server).
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any, Literal, cast

from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig

from agent.app.checkpoints import open_checkpointer
from agent.context import Context
from agent.graph import build_graph
from agent.llm.chat_models import close_chat_models
from storage import Database

Durability = Literal["sync", "async", "exit"]


def request(index: int) -> dict[str, Any]:
    return {"messages": [HumanMessage(content="Add one, two and three", id=f"m-{index}")]}


RUN_IDS = "run-ids" in sys.argv[5:]


def config_of(index: int) -> RunnableConfig:
    if RUN_IDS:
        return {"configurable": {"thread_id": f"t{index}", "run_id": f"run-{index}"}}
    return {"configurable": {"thread_id": f"t{index}"}}


async def finish(graph: Any, index: int, durability: Durability) -> str:
    config, context = config_of(index), Context(user_id=f"user-{index}")
    state = await graph.aget_state(config)
    values = state.values
    holds_request = any(m.id == f"m-{index}" for m in values.get("messages", []))
    ended = values.get("turnMessageId") == f"m-{index}" and values.get("turnStatus") not in (
        None,
        "running",
    )
    if ended:
        return str(values["turnStatus"])
    if holds_request:
        result = await graph.ainvoke(None, config, context=context, durability=durability)
    else:
        result = await graph.ainvoke(request(index), config, context=context, durability=durability)
    return str(result.get("turnStatus"))


async def main(url: str, durability: Durability, phase: str, turns: int) -> None:
    database = Database(url)
    async with open_checkpointer(database) as checkpointer:
        graph = build_graph(database=database, checkpointer=checkpointer)
        if phase == "start":
            await asyncio.gather(
                *(
                    graph.ainvoke(
                        request(i),
                        config_of(i),
                        context=Context(user_id=f"user-{i}"),
                        durability=durability,
                    )
                    for i in range(turns)
                )
            )
            statuses: list[str] = []
        else:
            statuses = list(
                await asyncio.gather(*(finish(graph, i, durability) for i in range(turns)))
            )
    await database.dispose()
    await close_chat_models()
    print(json.dumps({"statuses": statuses}))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], cast(Durability, sys.argv[2]), sys.argv[3], int(sys.argv[4])))
