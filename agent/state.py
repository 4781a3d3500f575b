"""Graph state of the supervisor.

The ids live here so that every node and tool sees the same turn; tools read them through
``ToolRuntime.state`` and the model never types them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from langchain_core.messages import AnyMessage
from langgraph.channels import UntrackedValue
from langgraph.graph.message import add_messages
from langgraph.graph.ui import AnyUIMessage, ui_message_reducer

TurnStatus = Literal["running", "answered", "budget_exhausted", "stalled", "no_answer", "failed"]

TodoSnapshot = dict[str, Any]
"""One ``turn_todos`` row in seed 004's ``list_todo`` shape."""


def extend_or_reset(current: list[dict[str, Any]], update: Any) -> list[dict[str, Any]]:
    """Reducer for per-turn lists: an update extends the list; an empty list empties it (the
    ``plan`` node sends one when a turn starts, so the updates stream shows ``[]``, nothing
    stranger). Tools that changed nothing send no update at all."""
    if not update:
        return []
    return [*current, *update]


@dataclass(kw_only=True)
class InputState:
    """What a caller sends: the conversation's messages (the newest human message is the turn)."""

    messages: Annotated[list[AnyMessage], add_messages] = field(default_factory=list)
    """The conversation. A human message's ``metadata.turnId`` (in ``additional_kwargs`` or
    ``response_metadata``), else its ``id``, names the turn."""


@dataclass(kw_only=True)
class SupervisorState(InputState):
    """Everything the nodes share during a turn; persisted per thread by the checkpointer."""

    conversationId: str = ""
    """Conversation the turn belongs to: the context's ``conversation_id``, else the thread."""

    turnId: str = ""
    """Id of the current turn; scopes its ``turn_todos`` rows. Set by ``plan``."""

    turnStep: int = 0
    """Nodes of this turn run so far. With the turn's steps in the database it tells the turn's
    own continuation from a run started at an older checkpoint (a fork, which gets a turn of its
    own); see ``agent.turn.lineage``."""

    catchUpTo: int = 0
    """The turn's step in the database when this run found that it had already got further
    than its checkpoint (its newest checkpoints were lost: a crash under ``durability="async"``,
    a server retry). Until ``turnStep`` reaches it, each step is one this run took before: its
    model answer and tool results are the recorded ones. 0 otherwise."""

    todos: list[TodoSnapshot] = field(default_factory=list)
    """The turn's plan rows as the last step that changed or read them left them (a tools step's
    last plan change, else ``execute`` or ``drain``): shown in Studio, returned to the caller,
    and copied into a fork's own rows."""

    turnRequest: str = ""
    """Text of the human message that opened the turn, shown with every LLM call."""

    turnMessageId: str = ""
    """Id of that human message, to tell whether it is still inside the history window."""

    llmCalls: int = 0
    """LLM calls made in this turn so far."""

    iterationBudget: int = 0
    """LLM calls this turn may make; extended while todos remain, never past the cap."""

    remindersInARow: int = 0
    """Premature answers since the last tool round; past ``max_reminders`` the turn stops."""

    approvePlan: bool = False
    """``Context.approve_plan`` of the run that started the turn (a resume may not send it)."""

    planApproved: bool = False
    """The user approved the turn's plan (only asked when ``Context.approve_plan``)."""

    turnStatus: TurnStatus = "running"
    """How the turn ended: answered (the model's own words, or, when the last allowed call
    closed the last item, the completed plan); budget_exhausted or stalled (an honest partial
    answer listing what was and was not done); no_answer (the model replied with nothing, no
    text and no tool call, twice in a row, the second time when asked again for a reply, or on
    the last call the budget allowed: the message says so and gives the plan's state); failed
    (model or database error). Only answered is an answer."""

    toolErrors: int = 0
    """Tool calls of this turn that failed through no fault of the model (``DATABASE_ERROR``,
    ``WORKER_ERROR``). A turn may still answer after one; a non-zero count says to check the
    server log before trusting that answer."""

    modifiedTasks: Annotated[list[dict[str, Any]], extend_or_reset] = field(default_factory=list)
    """Personal tasks changed in this turn as ``{"action", "task_id", "title"}`` (seed 003), so a
    UI can refresh."""

    ui: Annotated[list[AnyUIMessage], ui_message_reducer] = field(default_factory=list)
    """LangGraph generative UI messages (``push_ui_message``): one plan card per turn, replaced
    as the plan moves, that agent-chat-ui shows under the turn's newest AI message
    (``agent.turn.plan_card``)."""

    # What one step of a run hands to the next so the next need not read the database. These
    # channels are never checkpointed (``UntrackedValue``): a run that starts from a checkpoint
    # (a resume, a Studio replay, a fork) has neither, reads, and so never trusts them. Neither
    # is input nor output.

    handedRows: Annotated[object, UntrackedValue] = None
    """The turn's rows as the step before left them, with the ``todos`` list they go with
    (``agent.turn.rows_handoff.HandedRows``)."""

    freshMessage: Annotated[object, UntrackedValue] = None
    """The AI message the model step before just wrote, at the step it claimed: its calls need
    no gate read (``agent.calls.gate.FreshMessage``)."""


@dataclass(kw_only=True)
class OutputState:
    """What a run returns to the caller (the fields mean what they mean in SupervisorState)."""

    messages: Annotated[list[AnyMessage], add_messages] = field(default_factory=list)
    """The conversation, ending with the turn's final answer."""
    conversationId: str = ""
    """Conversation the turn was filed under."""
    turnId: str = ""
    """Id of the turn; its ``turn_todos`` rows carry it."""
    turnStatus: TurnStatus = "running"
    """answered, budget_exhausted, stalled, no_answer or failed (see SupervisorState)."""
    todos: list[TodoSnapshot] = field(default_factory=list)
    """The turn's plan rows as the turn left them (empty when it made no plan)."""
    toolErrors: int = 0
    """Tool calls that failed through no fault of the model (database, worker)."""
    llmCalls: int = 0
    """LLM calls the turn made."""
    modifiedTasks: Annotated[list[dict[str, Any]], extend_or_reset] = field(default_factory=list)
    """Personal tasks the turn changed."""
    ui: Annotated[list[AnyUIMessage], ui_message_reducer] = field(default_factory=list)
    """Generative UI messages: each turn's plan card (see SupervisorState)."""
