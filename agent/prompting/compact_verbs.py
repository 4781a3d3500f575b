"""What the compact profile knows of the tools it plans with, keyed by tool name: the words a
request starts a step with when it asks for each tool, the subject some of those words need, and
the tool that lists what a tool acts on.

Why here and not on the tools: only the compact profile (a small model whose plan is made from
the user's own verbs, ``agent.prompting.compact_plan``) reads any of it. The shared tools stay
what every profile binds, and a deployment without the compact profile never loads this. When
two bound tools share a verb ("add" to my tasks or to this conversation's list), the model
chooses between those two only.

A tool of the user's that the registry does not name may declare its own verbs in its
``metadata`` (``REQUEST_VERBS_METADATA``: ``{"turnplan_request_verbs": ["print"]}``): the
compact profile's one extension point, read by nothing else.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from langchain_core.tools import BaseTool

from agent.tool_names import CONTINUE_OPEN_TODOS

REQUEST_VERBS_METADATA = "turnplan_request_verbs"
"""Tool metadata a user's tool may set: the verbs a request asks for it with ("print")."""

TASK_VERBS: dict[str, tuple[str, ...]] = {
    "add": (
        "add",
        "create",
        "put",
        "insert",
        "include",
        "note",
        "note down",
        "write down",
        "jot down",
        "remember",
        "remember to",
        "remind me to",
        "new task",
        "make a task",
        "stick",
        "set a reminder to",
        "add a reminder to",
        "make a note to",
        "don't forget to",
        "do not forget to",
        "don't let me forget to",
        "do not let me forget to",
    ),
    "list": (
        "show",
        "list",
        "display",
        "what",
        "what's",
        "which",
        "tell me",
        "let me see",
        "give me",
        "read",
        "see",
        "view",
        "how many",
        "anything",
        "any",
        "is there",
        "are there",
        "do i have",
        "do i still have",
        "have i got",
        "remind me what",
    ),
    "complete": (
        "mark",
        "complete",
        "finish",
        "check off",
        "tick off",
        "cross off",
        "tick",
        "close",
        "i finished",
        "i completed",
        "i did",
        "i've done",
        "i have done",
        "i'm done with",
    ),
    "update": ("rename", "change", "update", "edit", "reword", "retitle"),
    "delete": (
        "delete",
        "remove",
        "drop",
        "erase",
        "get rid of",
        "cancel",
        "forget",
        "take off",
        "scrap",
        "ditch",
    ),
    "uncomplete": ("reopen", "unmark", "uncheck", "undo", "mark as not done"),
}


TASK_VERBS_NEEDING_SUBJECT: frozenset[str] = frozenset(
    {
        # add: "note that the meeting moved" is no task; "note 'x'" is.
        "create",
        "put",
        "insert",
        "include",
        "note",
        "note down",
        "write down",
        "jot down",
        "remember",
        "stick",
        # list: "what is 12 times 12?", "tell me a joke" are questions, not listings.
        "what",
        "what's",
        "which",
        "tell me",
        "let me see",
        "give me",
        "read",
        "see",
        "view",
        "how many",
        "anything",
        "any",
        "is there",
        "are there",
        "do i have",
        "do i still have",
        "have i got",
        "remind me what",
        # complete: "finish the report by Friday" is a plan of the user's, not a task closed.
        "mark",
        "finish",
        "close",
        "tick",
        "i did",
        # update: "change my mind", "update me".
        "change",
        "update",
        "edit",
        "reword",
        "retitle",
        # delete: "forget it", "cancel that" take nothing back that was not named.
        "drop",
        "cancel",
        "forget",
        "take off",
        "scrap",
        "ditch",
        # uncomplete
        "undo",
    }
)
"""Verbs that name a task action only in a step about tasks (``TASK_SUBJECT``) or one that
quotes a title: alone they are everyday words ("what", "note", "tell me", "finish", "forget"),
and a rule that read them as actions acted on guesses (issue 40)."""

TASK_SUBJECT = (
    r"\b(?:tasks?|todos?|to-dos?|to do|(?:task |todo |to-do )?list|left|remaining|remain|"
    r"pending|open|done|complete|completed|finished|everything|all of them)\b"
)
"""Words by which a step is about the user's tasks ("show me what is left", "mark X as done",
"what's on my list")."""

LIST_SUBJECT = (
    rf"{TASK_SUBJECT}|\b(?:plate|agenda|chores|errands|(?:need|have|got) to do|"
    r"(?:do|work on) (?:next|now|first|today))\b"
)
"""Words by which a question is about what the user has to do ("what's on my plate?", "anything
left for me to do?"): wider than ``TASK_SUBJECT``, because a listing only reads, so one given to
a question about something else changes nothing; the words that change a task keep the narrow
subject ("note", "put" on an agenda add nothing)."""

CONTINUE_VERBS: tuple[str, ...] = (
    "continue",
    "go on",
    "carry on",
    "keep going",
    "resume",
    "proceed",
    "pick up where",
    "finish the rest",
    "finish what's left",
    "finish what is left",
    "finish the remaining",
    "do the rest",
    "do what's left",
    "do what is left",
)
"""The words a request starts with when it asks to go on with the plan earlier turns left open
(``continue_open_todos``); with no row open the compact profile says there is nothing to
continue. "finish the rest" beats the task verb "finish": the longest verb a step starts with
names its tool (``agent.prompting.compact_plan.steps_by_verb``)."""


@dataclass(frozen=True)
class RequestSubject:
    """Verbs that name a tool only in a step whose words match ``pattern`` (its subject:
    "tasks", "my list") or that quotes a title."""

    verbs: frozenset[str]
    pattern: str


TASK_SUBJECT_RULE = RequestSubject(TASK_VERBS_NEEDING_SUBJECT, TASK_SUBJECT)
LIST_SUBJECT_RULE = RequestSubject(TASK_VERBS_NEEDING_SUBJECT, LIST_SUBJECT)


@dataclass(frozen=True)
class CompactTool:
    """What the compact profile knows of one tool.

    ``verbs``: the words a step starts with when it asks for the tool; ``subject``: the verbs
    among them that need the tool's subject; ``lookup``: the tool of the same toolset that
    lists what this one acts on ("list_tasks" for ``complete_task``), called by the harness
    before the action so the target is the listed task the user's words name
    (``agent.prompting.compact_lookup``); ``agent_type``: the worker whose tool this is, for the
    plan's stand-in of a worker's tool (``agent.prompting.compact_plan.planning_tools``);
    ``reads``: it only reads (a listing), so doing it on a request in doubt changes nothing.
    An entry the registry does not know changes things, as far as the profile can tell."""

    verbs: tuple[str, ...] = ()
    subject: RequestSubject | None = None
    lookup: str | None = None
    agent_type: str | None = None
    reads: bool = False


def _task_tool(kind: str, lookup: str | None = None) -> CompactTool:
    subject = LIST_SUBJECT_RULE if kind == "list" else TASK_SUBJECT_RULE
    return CompactTool(TASK_VERBS[kind], subject, lookup, reads=kind == "list")


COMPACT_TOOLS: dict[str, CompactTool] = {
    # The personal tasks (agent.tools.personal_tasks): they find a task by what the user
    # called it, through list_tasks.
    "add_task": _task_tool("add"),
    "list_tasks": _task_tool("list"),
    "complete_task": _task_tool("complete", "list_tasks"),
    "update_task": _task_tool("update", "list_tasks"),
    "delete_task": _task_tool("delete", "list_tasks"),
    # The conversation's task list (agent.tools.conversation_tasks): the changes take an id
    # that ListTasks gives.
    "ListTasks": _task_tool("list"),
    "AddTask": _task_tool("add"),
    "CompleteTask": _task_tool("complete", "ListTasks"),
    "UncompleteTask": _task_tool("uncomplete", "ListTasks"),
    "DeleteTask": _task_tool("delete", "ListTasks"),
    CONTINUE_OPEN_TODOS: CompactTool(CONTINUE_VERBS),
}
"""The tools the compact profile plans with by verb, by name."""

COMPACT_METADATA = "turnplan_compact"
"""Metadata of the compact plan's own stand-in tools: their ``CompactTool``."""


def tool_entry(tool: BaseTool) -> CompactTool:
    """What the compact profile knows of ``tool``: a stand-in's own, the registry's entry for
    its name, else the verbs the tool declares itself (``REQUEST_VERBS_METADATA``)."""
    metadata: Mapping[str, object] = tool.metadata or {}
    own = metadata.get(COMPACT_METADATA)
    if isinstance(own, CompactTool):
        return own
    return named_entry(tool.name, metadata)


def named_entry(name: str, metadata: Mapping[str, object] | None = None) -> CompactTool:
    """The registry's entry for ``name``, else the verbs ``metadata`` declares (none: an empty
    entry, a tool the model may still choose)."""
    if name in COMPACT_TOOLS:
        return COMPACT_TOOLS[name]
    declared = (metadata or {}).get(REQUEST_VERBS_METADATA)
    if isinstance(declared, (list, tuple)):
        return CompactTool(tuple(verb for verb in declared if isinstance(verb, str)))
    return CompactTool()
