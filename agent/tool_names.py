"""Names of the tools the graph treats specially, below the modules that build them, so the
prompt profiles and workers can name them without importing the tools."""

TODO_TOOL_NAMES = frozenset({"create_todo", "list_todo", "complete_todo"})
"""Seed 004's plan tools."""
ASK_USER = "ask_user"
"""The question to the user (``agent.tools.ask_user``)."""
