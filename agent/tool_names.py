"""Names of the tools the graph treats specially, below the modules that build them, so the
prompt profiles and workers can name them without importing the tools."""

TODO_TOOL_NAMES = frozenset({"create_todo", "list_todo", "complete_todo"})
"""Seed 004's plan tools."""
PLAN_CHANGING_TOOLS = frozenset({"create_todo", "complete_todo"})
"""Plan tools whose successful calls the plan view reports (the items, outcomes, what is next)."""
ASK_USER = "ask_user"
"""The question to the user (``agent.tools.ask_user``)."""
