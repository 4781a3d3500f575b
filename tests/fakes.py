"""Scripted chat models for unit tests of graph logic (no HTTP; see scripted_openai for wire tests).

``ScriptedChatModel`` answers each call from a list of replies or from a responder function, and
records every prompt it was sent, so a test can assert what the model saw at call k.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import re
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from importlib.machinery import ModuleSpec
from typing import Any, TypeVar

import pytest
from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import tool
from pydantic import ConfigDict, Field

from storage import Database

Reply = AIMessage | Exception
Responder = Callable[[list[BaseMessage]], Reply]

_call_ids = itertools.count()


def tool_name(tool: Any) -> str:
    """The name of a tool as bound: a tool object, or an OpenAI tool definition."""
    if isinstance(tool, dict):
        return str(tool.get("function", tool).get("name"))
    return str(getattr(tool, "name", tool))


def tool_call(name: str, **args: Any) -> dict[str, Any]:
    return {"name": name, "args": args, "id": f"call_{next(_call_ids)}", "type": "tool_call"}


def ai(*calls: dict[str, Any], content: str = "") -> AIMessage:
    """An AI message with the given tool calls."""
    return AIMessage(content=content, tool_calls=list(calls))


class ScriptedChatModel(BaseChatModel):
    """A chat model whose answers come from a script; records prompts and bound tools."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    script: list[Any] = Field(default_factory=list)
    """Replies in order: AI messages, or exceptions to raise."""
    responder: Responder | None = None
    prompts: list[list[BaseMessage]] = Field(default_factory=list)
    bound_tool_names: list[str] = Field(default_factory=list)
    """The tools of the newest ``bind_tools`` call."""
    offered_tool_names: list[str] = Field(default_factory=list)
    """Every tool any ``bind_tools`` call offered, in the order first offered (a call binds the
    tools of its step: the plan tools change once the turn has a plan)."""
    tool_choices: list[Any] = Field(default_factory=list)
    """``tool_choice`` of every ``bind_tools`` call, in order."""
    choices_seen: list[Any] = Field(default_factory=list)
    """The ``tool_choice`` each call was made with (None: the model was free)."""

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Runnable[Any, AIMessage]:
        self.bound_tool_names = [tool_name(t) for t in tools]
        self.offered_tool_names.extend(
            name for name in self.bound_tool_names if name not in self.offered_tool_names
        )
        self.tool_choices.append(kwargs.get("tool_choice"))
        return self.bind(tool_choice=kwargs.get("tool_choice"))

    def _next(self, messages: list[BaseMessage], tool_choice: Any = None) -> ChatResult:
        self.prompts.append(list(messages))
        self.choices_seen.append(tool_choice)
        if self.responder is not None:
            reply = self.responder(list(messages))
        elif self.script:
            reply = self.script.pop(0)
        else:
            raise AssertionError(f"unexpected model call #{len(self.prompts)}")
        if isinstance(reply, Exception):
            raise reply
        return ChatResult(generations=[ChatGeneration(message=reply)])

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return self._next(messages, kwargs.get("tool_choice"))

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return self._next(messages, kwargs.get("tool_choice"))

    @property
    def calls(self) -> int:
        return len(self.prompts)

    def system_prompt(self, call: int) -> str:
        first = self.prompts[call][0]
        assert isinstance(first, SystemMessage)
        return str(first.content)

    def plan_view(self, call: int) -> str:
        """The plan view sent with call ``call`` ("" if none): see ``plan_view``."""
        return plan_view(self.prompts[call])


PLAN_LINE = re.compile(
    r"^- \[(?P<mark>.)\] (?P<title>.+?)(?: \(id (?P<id>[0-9a-f-]{36})\))?(?: — .*)?$"
)


@dataclass
class PlanRow:
    mark: str
    title: str
    id: str | None


PLAN_HEADING = "## Current plan"
"""How the full profile's plan view starts (``prompts/plan_view.md``)."""


Message = BaseMessage | Mapping[str, Any]
"""A LangChain message, or one of the ``messages`` of an OpenAI request body."""
M = TypeVar("M", BaseMessage, Mapping[str, Any])


def _content_text(message: Message) -> str:
    content = message.get("content") if isinstance(message, Mapping) else message.content
    if isinstance(content, list):
        return "\n".join(
            str(part.get("text", "")) if isinstance(part, Mapping) else str(part)
            for part in content
        )
    return "" if content is None else str(content)


def _is_user_or_system(message: Message) -> bool:
    return _role(message) in ("user", "human", "system")


def _view_in(text: str) -> str:
    """The plan view inside ``text``: from its heading to the next blank line (the view is one
    paragraph; it may be joined to the user messages around it)."""
    if PLAN_HEADING not in text:
        return ""
    return PLAN_HEADING + text.split(PLAN_HEADING, 1)[1].split("\n\n", 1)[0]


def plan_view(messages: Sequence[Message]) -> str:
    """The plan view a model was sent, or "" when there was none: the one reader every oracle
    uses, so tests do not depend on where the prompt puts it.

    ``messages`` are LangChain messages or the ``messages`` of an OpenAI request body. Only user
    messages and the system prompt are read, the newest first (the view travels in a user
    message, after the turn's request), never tool results, so an old plan in a tool result
    cannot pass for the current one.
    """
    for message in reversed(messages):
        if _is_user_or_system(message):
            view = _view_in(_content_text(message))
            if view:
                return view
    return ""


def window_of(messages: Sequence[M]) -> list[M]:
    """The history window a model was sent: its messages without the system prompt in front and
    the plan view, so an oracle reading "the newest result" reads the history's.

    A plan view joined to a user message (the prompt never sends two user messages in a row) is
    taken off that message, which is returned as the history has it; a message that was only
    the view is left out."""
    start = 1 if messages and _role(messages[0]) == "system" else 0
    window: list[M] = []
    for message in messages[start:]:
        text = _content_text(message)
        if not (_is_user_or_system(message) and _view_in(text)):
            window.append(message)
            continue
        rest = _without_plan_view(message)
        if _content_text(rest).strip():
            window.append(rest)
    return window


def _without_plan_view(message: M) -> M:
    """``message`` as it was before the plan view joined it (``agent.prompting.builder``)."""
    content = message.get("content") if isinstance(message, Mapping) else message.content
    if isinstance(content, list):  # the view is a block of its own
        kept: Any = [
            block
            for block in content
            if not (isinstance(block, Mapping) and PLAN_HEADING in str(block.get("text", "")))
        ]
    else:
        text = str(content)
        view = _view_in(text)
        before, after = text.split(view, 1)
        kept = "\n\n".join(
            part for part in (before.removesuffix("\n\n"), after.removeprefix("\n\n")) if part
        )
    if isinstance(message, BaseMessage):
        return message.model_copy(update={"content": kept})
    return {**message, "content": kept}


def _role(message: Message) -> str:
    if isinstance(message, Mapping):
        return str(message.get("role"))
    return "system" if isinstance(message, SystemMessage) else message.type


def plan_rows(view: str) -> list[PlanRow]:
    """The rows of a plan view (``plan_view``): mark, title and, for open rows, the id."""
    if PLAN_HEADING not in view:
        return []
    rows = []
    for line in view.split(PLAN_HEADING, 1)[1].splitlines():
        match = PLAN_LINE.match(line.split("  <- in progress")[0])
        if match:
            rows.append(PlanRow(match["mark"], match["title"], match["id"]))
    return rows


@dataclass
class PlanOracle:
    """The cheapest path a model can take through an N-item request on turnplan.

    Call 1 plans every item and acts on the first; each later call closes the item in progress
    and acts on the next one in the same message; then one call closes the last item and one
    answers: N + 2 calls. It reads only what the model is sent (the plan view).
    """

    titles: list[str]
    action: Callable[[str], dict[str, Any]]
    acted: set[str] = field(default_factory=set)

    def __call__(self, messages: list[BaseMessage]) -> AIMessage:
        rows = plan_rows(plan_view(messages))
        if not rows:
            self.acted.add(self.titles[0])
            return ai(
                tool_call("create_todo", items=[{"title": t} for t in self.titles]),
                self.action(self.titles[0]),
            )
        current = next((row for row in rows if row.mark == ">"), None)
        if current is None:
            return AIMessage(content=f"Done: {len(rows)} items.")
        calls = [tool_call("complete_todo", todoId=current.id, outcome=f"did {current.title}")]
        following = next((row for row in rows if row.mark == " "), None)
        if following is not None:
            self.acted.add(following.title)
            calls.append(self.action(following.title))
        return ai(*calls)


def pretend_llama_cpp_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    """As on a machine without the ``local`` extra: ``llama_cpp`` cannot be found."""
    real_find_spec = importlib.util.find_spec

    def find_spec(name: str, package: str | None = None) -> ModuleSpec | None:
        return None if name == "llama_cpp" else real_find_spec(name, package)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)


# --- a scripted turn that refers to the plan's rows by position --------------------------------

Step = Callable[[list[str]], AIMessage]
"""The model's next message, given the ids of the turn's rows in plan order."""


def plan_items(*items: dict[str, Any]) -> Step:
    return lambda _: ai(tool_call("create_todo", items=list(items)))


def close_row(index: int = 0, outcome: str = "done", status: str = "completed") -> Step:
    return lambda ids: ai(
        tool_call("complete_todo", todoId=ids[index], outcome=outcome, status=status)
    )


def act(*calls: dict[str, Any]) -> Step:
    return lambda _: ai(*calls)


def answer_with(text: str = "Done.") -> Step:
    return lambda _: AIMessage(content=text)


def scripted_turn(database: Database, *steps: Step) -> ScriptedChatModel:
    """A model that plays ``steps`` in order, each given the plan's row ids."""
    queue = list(steps)
    path = database.url.split("///", 1)[1]

    def respond(_: list[BaseMessage]) -> AIMessage:
        with closing(sqlite3.connect(path)) as connection:
            rows = connection.execute(
                "SELECT id FROM turn_todos ORDER BY priority, createdAt"
            ).fetchall()
        return queue.pop(0)([row_id for (row_id,) in rows])

    return ScriptedChatModel(responder=respond)


def tool_results(result: dict[str, Any], name: str) -> list[ToolMessage]:
    return [m for m in result["messages"] if isinstance(m, ToolMessage) and m.name == name]


RECORDED_NOTES: list[str] = []
"""What ``record`` did in the running test (the ``recorded_notes`` fixture empties it first)."""


@tool
def record(note: str) -> str:
    """Record a note (the real work of a test whose checks look for it)."""
    RECORDED_NOTES.append(note)
    return json.dumps({"recorded": note})
