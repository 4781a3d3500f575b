"""Names of the tools the graph treats specially, below the modules that build them, so the
prompt profiles and workers can name them without importing the tools."""

TODO_TOOL_NAMES = frozenset({"create_todo", "list_todo", "complete_todo"})
"""Seed 004's plan tools."""
PLAN_CHANGING_TOOLS = frozenset({"create_todo", "complete_todo", "continue_open_todos"})
"""Plan tools whose successful calls the plan view reports (the items, outcomes, what is next)."""
CONTINUE_OPEN_TODOS = "continue_open_todos"
"""Copies the rows earlier turns left open into the turn (``agent.tools.continue_plan``): bound
only in a plan step that was told such rows exist."""
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
"""The words a request starts with when it asks to go on with the plan earlier turns left open:
``continue_open_todos`` declares them, and the compact profile says there is nothing to continue
for them when no row is open. "finish the rest" beats the task verb "finish": the longest verb a
step starts with names its tool (``agent.prompting.compact_plan.steps_by_verb``)."""
ASK_USER = "ask_user"
"""The question to the user (``agent.tools.ask_user``)."""
ORDERED_TOOL_NAMES = TODO_TOOL_NAMES | {ASK_USER}
"""Tools whose calls wait for every call written before them in one message
(``agent.calls.ordering``): the plan's changes and the question must follow the model's order."""
IN_ORDER_METADATA = "turnplan_in_order"
"""A tool whose ``metadata`` sets this to True waits for every call written before it in one
message, like the tools above (``agent.calls.ordering``): for tools whose calls depend on each
other's effects (ids handed out in order, an item added then completed)."""

REQUEST_VERBS_METADATA = "turnplan_request_verbs"
"""Tool metadata: the words a request starts a step with when it asks for what the tool does
("add", "remove", "show me"). The compact profile's plan (``agent.prompting.compact_tools``)
gives a step the tool its verb names, so a small model only decides the steps no verb names."""

REQUEST_SUBJECT_METADATA = "turnplan_request_subject"
"""Tool metadata: ``{"verbs": [...], "pattern": regex}``: the request verbs of the tool that
name it only in a step whose words match ``pattern`` (its subject: "tasks", "my list") or that
quotes a title. "what", "note" and "tell me" alone are everyday words, not a listing or an
addition (``agent.tools.request_verbs.TASK_VERBS_NEEDING_SUBJECT``)."""

LOOKUP_TOOL_METADATA = "turnplan_lookup_tool"
"""Tool metadata: the name of the tool of the same toolset that lists what this tool acts on
("list_tasks" for ``complete_task``). The compact profile calls it before the action when the
user named the task in words that are not its title ("I paid the electricity bill, tick it
off") or when the tool takes only an id (``CompleteTask``), and passes the id of the listed
task whose title the user's words match (``agent.prompting.compact_lookup``)."""

DELEGATED_TOOLS_METADATA = "turnplan_delegated_tools"
"""Tool metadata of ``delegate``: the tools its workers hold that declare request verbs, as
``{tool name: {"agentType": worker, "verbs": [...], "description": first line}}``. The compact
profile's plan gives a step a worker's tool by its verb like one of its own, and the row the
worker's ``agentType``, so the item is delegated (``agent.prompting.compact_plan``)."""
AGENT_TYPE_METADATA = "turnplan_agent_type"
"""Tool metadata of the compact plan's stand-in for a worker's tool: the worker it belongs to."""
