"""Finding the task a compact step acts on from the user's words, through its toolset's list.

Why: users name a task in their own words ("I paid the electricity bill, tick it off" for the
task "pay the electricity bill", "check both off" after "I washed the car and mowed the lawn"),
and some tools take only an id (the conversation list's ``CompleteTask`` needs "3"). A small
model can neither rewrite the words into the title nor copy an id it never saw. So before an
action on one existing task, the harness calls the tool the registry names as the acting
tool's lookup (``agent.prompting.compact_verbs.CompactTool.lookup``), without a model call, and
passes the id of the listed task the step's words name **without doubt**:

1. a title equal to the words (case-insensitive), when only one task has it;
2. else, for words the user did not quote, the one title whose every content word the words
   use (stems compared, so "washed"/"wash", "paid"/"pay" meet; a light verb such as "do" in
   "do the laundry" need not be said): the words fully cover it, and no other title shares
   any of their words;
3. else, for unquoted words of at least two content words ("the Dan meeting"), the one title
   that has every one of them ("prepare for the meeting with Dan"), when no other title
   shares any of them: the user's own words name it and nothing else.

Nothing else is a match: never a title that merely contains the words (a short word or a
pronoun such as "it" is inside many titles), never the nearest of several. Titles that share
words with them are the ``candidates`` the harness asks the user to choose from
(``agent.prompting.compact_questions``); with none, the item says no task has that name. An
action that cannot be taken back is never made on a guess (issue 40).

The lookup call's id starts with ``LOOKUP_CALL_PREFIX``, so its result is not taken for the
item's action (``agent.prompting.compact_tools`` closes an item once its action returned).
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool

from agent.prompting.compact_verbs import tool_entry
from agent.tool_names import TODO_TOOL_NAMES

LOOKUP_CALL_PREFIX = "call_lookup_"
"""The start of the tool-call id of every lookup the harness makes."""

_STOP_WORDS = frozenset(
    [
        "a",
        "an",
        "the",
        "my",
        "our",
        "your",
        "this",
        "that",
        "these",
        "those",
        "to",
        "of",
        "for",
        "on",
        "in",
        "at",
        "with",
        "and",
        "or",
        "is",
        "are",
        "was",
        "it",
        "its",
        "i",
        "we",
        "you",
        "me",
        "us",
        "today",
        "tonight",
        "yesterday",
        "morning",
        "evening",
        "afternoon",
        "now",
        "just",
        "already",
        "task",
        "tasks",
        "todo",
        "item",
        "list",
        "done",
        "off",
        "up",
        "as",
    ]
)
_WORD = re.compile(r"[a-z0-9]+")


def lookup_tool(tool: BaseTool, tools: Sequence[BaseTool]) -> BaseTool | None:
    """The bound tool that lists what ``tool`` acts on, if it declares one and it is bound."""
    name = tool_entry(tool).lookup
    return next((other for other in tools if other.name == name), None)


def is_lookup(message: ToolMessage) -> bool:
    """Whether ``message`` is the result of a harness lookup rather than an action."""
    return message.tool_call_id.startswith(LOOKUP_CALL_PREFIX)


def lookup_call(tool: BaseTool) -> AIMessage:
    """The harness's call of the lookup tool with no arguments (every listed task)."""
    call_id = f"{LOOKUP_CALL_PREFIX}{uuid.uuid4().hex[:20]}"
    return AIMessage(content="", tool_calls=[{"name": tool.name, "args": {}, "id": call_id}])


def looked_up(history: Sequence[AnyMessage]) -> list[dict[str, Any]] | None:
    """The tasks the current item's lookup listed (since the newest user message or plan-tool
    result), or None when no lookup was made for it yet."""
    for message in reversed(history):
        if isinstance(message, HumanMessage):
            return None
        if isinstance(message, ToolMessage):
            if message.name in TODO_TOOL_NAMES:
                return None
            if is_lookup(message):
                return _listed(message)
    return None


def _listed(message: ToolMessage) -> list[dict[str, Any]]:
    try:
        payload = json.loads(message.text)
    except ValueError:
        return []
    tasks = payload.get("tasks", payload.get("items")) if isinstance(payload, dict) else None
    if not isinstance(tasks, list):
        return []
    return [task for task in tasks if isinstance(task, dict) and "title" in task]


IRREGULAR_PAST = {
    "paid": "pay",
    "bought": "buy",
    "did": "do",
    "done": "do",
    "made": "make",
    "went": "go",
    "took": "take",
    "sent": "send",
    "wrote": "write",
    "written": "write",
    "got": "get",
    "gave": "give",
    "ran": "run",
    "sold": "sell",
    "told": "tell",
    "found": "find",
    "brought": "bring",
    "fed": "feed",
    "met": "meet",
    "kept": "keep",
    "spent": "spend",
    "built": "build",
    "drove": "drive",
    "ate": "eat",
    "rang": "ring",
    "swept": "sweep",
    "hung": "hang",
    "read": "read",
}
"""Past forms a user reports a task done with ("I paid the bill") that no suffix rule meets."""


def _stem(word: str) -> str:
    if word in IRREGULAR_PAST:
        return IRREGULAR_PAST[word]
    if word.endswith("ied") and len(word) > 4:  # "emptied" -> "empty", "tidied" -> "tidy"
        return word[:-3] + "y"
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            break
    if len(word) > 3 and word[-1] == word[-2]:  # "stopp(ed)" -> "stop"
        word = word[:-1]
    return word.rstrip("e")  # "wash"/"washe", "mow"/"mowe"


def content_stems(text: str) -> set[str]:
    """The words of ``text`` that say what it is about, stemmed."""
    return {_stem(word) for word in _WORD.findall(text.casefold()) if word not in _STOP_WORDS}


def _normal(text: str) -> str:
    return " ".join(str(text).casefold().split())


def matching_task(
    words: str, tasks: Sequence[Mapping[str, Any]], *, quoted: bool
) -> Mapping[str, Any] | None:
    """The one listed task ``words`` name without doubt, by the rules of the module
    docstring, or None."""
    said = _normal(words)
    exact = [task for task in tasks if _normal(task["title"]) == said]
    if exact:
        return exact[0] if len(exact) == 1 else None
    if quoted:
        return None
    stems = content_stems(words)
    covered = [
        task
        for task in tasks
        if (title := content_stems(str(task["title"])) - LIGHT_VERBS) and title <= stems
    ]
    if not covered and len(stems) >= MIN_NAMING_WORDS:
        # "the Dan meeting" for "prepare for the meeting with Dan": every word said is in one
        # title (and, below, in no other).
        covered = [task for task in tasks if stems <= content_stems(str(task["title"]))]
    if len(covered) != 1:
        return None
    others = [task for task in tasks if task is not covered[0]]
    if any(stems & content_stems(str(task["title"])) for task in others):
        return None  # another title shares the words: there is doubt, the user is asked
    return covered[0]


MIN_NAMING_WORDS = 2
"""Content words the user's words need to name a title they do not fully cover: each of them
in that title and no other title sharing any. One word ("the report") is too little: it is
asked about."""

LIGHT_VERBS = frozenset({"do", "make", "get", "go", "have", "take"})
"""Verbs a title may start with that do not tell it apart ("do the laundry", "go to the gym"):
the user's "laundry" or "gym" names it, when no other title shares their words."""


def candidate_tasks(
    words: str, tasks: Sequence[Mapping[str, Any]], limit: int = 10
) -> list[Mapping[str, Any]]:
    """The listed tasks ``words`` may mean when they name none without doubt: the titles they
    equal (several tasks may share one), else those sharing a content word with them, the
    most shared first. What the harness offers the user to choose from."""
    said = _normal(words)
    exact = [task for task in tasks if _normal(task["title"]) == said]
    if exact:
        return exact[:limit]
    stems = content_stems(words)
    shared = [
        (len(stems & content_stems(str(task["title"]))), index, task)
        for index, task in enumerate(tasks)
    ]
    ranked = sorted((item for item in shared if item[0] > 0), key=lambda item: (-item[0], item[1]))
    return [task for _, _, task in ranked[:limit]]


def task_reference(task: Mapping[str, Any]) -> str:
    """What the acting tool is given for the matched task: its id, else its title."""
    identifier = task.get("id", task.get("task_id"))
    return str(identifier) if identifier not in (None, "") else str(task["title"])
