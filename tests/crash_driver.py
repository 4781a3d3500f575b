"""A process that runs one supervisor turn on a durable thread, for crash-and-resume tests.

    python -m tests.crash_driver DATABASE_URL THREAD_ID start|resume MARKER_FILE

``start`` sends the request; its ``wait_here`` tool writes ``MARKER_FILE`` and then hangs, so the
test can SIGKILL the process in the middle of a tools step. ``resume`` finishes the thread's
interrupted turn (``wait_here`` now returns at once) and prints the final state as JSON. The
model is whatever ``TURNPLAN_MODEL`` / ``OPENAI_BASE_URL`` name (the tests' scripted server).
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from langchain_core.messages import HumanMessage
from langchain_core.tools import tool

from agent.app.checkpoints import open_checkpointer
from agent.context import Context
from agent.graph import build_graph
from agent.llm.chat_models import close_chat_models
from storage import Database


async def main(url: str, thread: str, phase: str, marker: Path) -> None:
    @tool
    async def wait_here(note: str) -> str:
        """Wait for a slow system (stands in for any long tool)."""
        if phase == "start":
            await asyncio.to_thread(marker.write_text, "in the tools step")
            await asyncio.sleep(3600)
        return json.dumps({"waited": note})

    database = Database(url)
    config = {"configurable": {"thread_id": thread}}
    async with open_checkpointer(database) as checkpointer:
        graph = build_graph(database=database, tools=[wait_here], checkpointer=checkpointer)
        request = {"messages": [HumanMessage(content="Add three tasks")]}
        result = await graph.ainvoke(
            request if phase == "start" else None, config, context=Context(user_id="alice")
        )
    await database.dispose()
    await close_chat_models()
    print(json.dumps({"turnStatus": result["turnStatus"], "todos": result["todos"]}))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], Path(sys.argv[4])))
