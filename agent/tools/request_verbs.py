"""The words a request starts a step with when it asks for each kind of task action.

Both task toolsets (personal tasks, the conversation's task list) declare them on their tools
(``agent.tool_names.REQUEST_VERBS_METADATA``), so the compact profile's plan gives a step the
tool its verb names without asking a small model (``agent.prompting.compact_tools``). When two
bound tools share a verb ("add" to my tasks or to this conversation's list), the model chooses
between those two only.
"""

from __future__ import annotations

from typing import Any

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
    "delete": ("delete", "remove", "drop", "erase", "get rid of", "cancel", "forget"),
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

REQUEST_SUBJECT: dict[str, Any] = {"verbs": TASK_VERBS_NEEDING_SUBJECT, "pattern": TASK_SUBJECT}
"""What the task tools declare under ``agent.tool_names.REQUEST_SUBJECT_METADATA``."""
