"""Names of the tools the graph treats specially, below the modules that build them, so the
prompt profiles and workers can name them without importing the tools."""

TODO_TOOL_NAMES = frozenset({"create_todo", "list_todo", "complete_todo"})
"""Seed 004's plan tools."""
PLAN_CHANGING_TOOLS = frozenset({"create_todo", "complete_todo", "continue_open_todos"})
"""Plan tools whose successful calls the plan view reports (the items, outcomes, what is next)."""
CONTINUE_OPEN_TODOS = "continue_open_todos"
"""Copies the rows earlier turns left open into the turn (``agent.tools.continue_plan``): bound
only in a plan step that was told such rows exist."""
ASK_USER = "ask_user"
"""The question to the user (``agent.tools.ask_user``)."""
ORDERED_TOOL_NAMES = TODO_TOOL_NAMES | {ASK_USER}
"""Tools whose calls wait for every call written before them in one message
(``agent.calls.ordering``): the plan's changes and the question must follow the model's order."""
IN_ORDER_METADATA = "turnplan_in_order"
"""A tool whose ``metadata`` sets this to True waits for every call written before it in one
message, like the tools above (``agent.calls.ordering``): for tools whose calls depend on each
other's effects (ids handed out in order, an item added then completed)."""

WORKER_TOOLS_METADATA = "turnplan_worker_tools"
"""Tool metadata of ``delegate``: the tools its workers hold, as ``{tool name: {"agentType":
worker, "description": first line, "metadata": the tool's own metadata}}``, the first worker's
for a name two hold: what a profile that plans by tool may hand to a worker."""
