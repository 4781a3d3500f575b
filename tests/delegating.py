"""A scripted supervisor that delegates one of three items to the personal-task worker, and the
worker's script: shared by the delegation tests and the prompt-folder tests."""

from __future__ import annotations

import json

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.tools import tool

from tests.fakes import ScriptedChatModel, ai, plan_rows, plan_view, tool_call, window_of

DONE: list[str] = []
"""What ``record`` was called with, in order (cleared by the tests that read it)."""


@tool
def record(note: str) -> str:
    """Record a note (the supervisor's own domain action in these tests)."""
    DONE.append(note)
    return json.dumps({"recorded": note})


ITEMS = [
    {"title": "Note a"},
    {
        "title": "Add the groceries task",
        "context": "Task title: buy groceries",
        "completionCriteria": "the task exists",
        "agentType": "tasks",
    },
    {"title": "Note c"},
]


class DelegatingSupervisor:
    """Plans three items, does 1 and 3 itself, delegates 2 and closes it with the worker's
    result (or cancels it if the worker failed); reads only what the model is sent."""

    def __call__(self, messages: list[BaseMessage]) -> AIMessage:
        rows = plan_rows(plan_view(messages))
        if not rows:
            return ai(tool_call("create_todo", items=ITEMS), tool_call("record", note="a"))
        current = next((row for row in rows if row.mark == ">"), None)
        if current is None:
            return AIMessage(content="All three items are done.")
        if current.title == "Note a":
            following = rows[1]
            return ai(
                tool_call("complete_todo", todoId=current.id, outcome="did a"),
                tool_call("delegate", todoId=following.id),
            )
        if current.title == "Add the groceries task":
            last = window_of(messages)[-1]
            assert isinstance(last, ToolMessage) and last.name == "delegate"
            if last.status == "error":
                close = tool_call(
                    "complete_todo",
                    todoId=current.id,
                    outcome=f"worker failed: {json.loads(str(last.content))['error']}",
                    status="cancelled",
                )
            else:
                result = json.loads(str(last.content))["result"]
                close = tool_call("complete_todo", todoId=current.id, outcome=f"worker: {result}")
            return ai(close, tool_call("record", note="c"))
        return ai(tool_call("complete_todo", todoId=current.id, outcome=f"did {current.title}"))


def worker_model() -> ScriptedChatModel:
    return ScriptedChatModel(
        script=[
            ai(tool_call("add_task", title="buy groceries")),
            AIMessage(content="Added 'buy groceries'."),
        ]
    )
