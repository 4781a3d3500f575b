"""The words a request starts a step with when it asks for each kind of task action.

Both task toolsets (personal tasks, the conversation's task list) declare them on their tools
(``agent.tool_names.REQUEST_VERBS_METADATA``), so the compact profile's plan gives a step the
tool its verb names without asking a small model (``agent.prompting.compact_tools``). When two
bound tools share a verb ("add" to my tasks or to this conversation's list), the model chooses
between those two only.
"""

from __future__ import annotations

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
