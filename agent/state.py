"""Graph state of the supervisor.

The ids live here so that every node and tool sees the same turn; tools read them through
``ToolRuntime.state`` and the model never types them.

Each field's help is its ``Field(description=...)`` in the annotation: LangGraph builds the
input, output and state JSON schemas (what Studio shows beside each field) from the annotated
types, and an attribute docstring never reaches them. A reducer goes last in ``Annotated``:
LangGraph takes the last item as the reducer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from langchain_core.messages import AnyMessage
from langgraph.channels import UntrackedValue
from langgraph.graph.message import add_messages
from langgraph.graph.ui import AnyUIMessage, ui_message_reducer
from pydantic import Field

TurnStatus = Literal[
    "running", "answered", "budget_exhausted", "stalled", "no_answer", "incomplete", "failed"
]

TodoSnapshot = dict[str, Any]
"""One ``turn_todos`` row in seed 004's ``list_todo`` shape."""


def extend_or_reset(current: list[dict[str, Any]], update: Any) -> list[dict[str, Any]]:
    """Reducer for per-turn lists: an update extends the list; an empty list empties it (the
    ``plan`` node sends one when a turn starts, so the updates stream shows ``[]``, nothing
    stranger). Tools that changed nothing send no update at all."""
    if not update:
        return []
    return [*current, *update]


def add_or_reset(current: int, update: int) -> int:
    """Reducer for per-turn counters that calls of one step add to side by side: a positive
    update adds, 0 resets (the ``plan`` node sends 0 when a turn starts)."""
    return current + update if update else 0


# The side models' counters, declared once for both schemas (the state, and what a run returns).
VerifierCalls = Annotated[
    int,
    Field(description="Calls of `Context.verifier_model` in this turn (apart from `llmCalls`)."),
    add_or_reset,
]
AuditCalls = Annotated[
    int,
    Field(
        description=(
            "Calls of `Context.audit_model` in this turn (apart from `llmCalls`). Non-zero while "
            "the turn runs: its answer was audited and it was sent back with what was missing "
            "(it is sent back once at most)."
        )
    ),
    add_or_reset,
]
SideModelTokens = Annotated[
    int,
    Field(
        description=(
            "Tokens (prompt plus completion) of that model's calls in this turn: its usage, "
            "else estimated as characters / 4."
        )
    ),
    add_or_reset,
]


@dataclass(kw_only=True)
class InputState:
    """What a caller sends: the conversation's messages (the newest human message is the turn)."""

    messages: Annotated[
        list[AnyMessage],
        Field(
            description=(
                "The conversation. A human message's `metadata.turnId` (in `additional_kwargs` "
                "or `response_metadata`), else its `id`, names the turn."
            )
        ),
        add_messages,
    ] = field(default_factory=list)

    planEdits: Annotated[
        list[dict[str, Any]] | None,
        Field(
            description=(
                "Edits to the current turn's plan, sent without a new message and applied with "
                'no LLM call: {"op": "add", "title", "description"?}, {"op": "cancel", "id", '
                '"reason"?}, {"op": "move", "id", "position"} (0-based among the open rows, an '
                "integer). 1 to `Context.max_plan_edits` edits (default 50); an empty list, a "
                "longer one or a field of the wrong type is refused with VALIDATION_ERROR and "
                "nothing changes. A paused turn stays paused and is asked again with the edited "
                "plan; planEditResult says what was done. Set back to None by every `plan` step "
                "(`agent.turn.plan_edits`)."
            )
        ),
    ] = None

    continuePlan: Annotated[
        bool,
        Field(
            description=(
                "Continue the plan earlier turns of this conversation left unfinished: their "
                "open rows become this turn's plan (`agent.turn.continuation`). With a new human "
                "message it is that turn's; without one, the turn is 'continue the plan' alone. "
                "Read once by `plan`, which sets it back to False, so the next run does not "
                "continue again unless it asks. A JSON boolean only: anything else is refused "
                "(inputError)."
            )
        ),
    ] = False


@dataclass(kw_only=True)
class SupervisorState(InputState):
    """Everything the nodes share during a turn; persisted per thread by the checkpointer."""

    conversationId: Annotated[
        str,
        Field(
            description=(
                "Conversation the turn belongs to: the context's `conversation_id`, else the "
                "thread."
            )
        ),
    ] = ""

    turnId: Annotated[
        str,
        Field(description="Id of the current turn; scopes its `turn_todos` rows. Set by `plan`."),
    ] = ""

    turnStep: Annotated[
        int,
        Field(
            description=(
                "Nodes of this turn run so far. With the turn's steps in the database it tells "
                "the turn's own continuation from a run started at an older checkpoint (a fork, "
                "which gets a turn of its own); see `agent.turn.lineage`."
            )
        ),
    ] = 0

    catchUpTo: Annotated[
        int,
        Field(
            description=(
                "The turn's step in the database when this run found that it had already got "
                "further than its checkpoint (its newest checkpoints were lost: a crash under "
                '`durability="async"`, a server retry). Until `turnStep` reaches it, each step '
                "is one this run took before: its model answer and tool results are the "
                "recorded ones. 0 otherwise."
            )
        ),
    ] = 0

    todos: Annotated[
        list[TodoSnapshot],
        Field(
            description=(
                "The turn's plan rows as the last step that changed or read them left them (a "
                "tools step's last plan change, else `execute` or `drain`): shown in Studio, "
                "returned to the caller, and copied into a fork's own rows. A cancelled row "
                "says who cancelled it in `cancelledBy`: user (a rejected plan, a planEdits "
                "cancel), agent (the model or the harness, for a failure) or system (continued "
                "in a later turn); null for one cancelled before this was recorded."
            )
        ),
    ] = field(default_factory=list)

    turnRequest: Annotated[
        str,
        Field(
            description=(
                "Text of the human message that opened the turn, shown with every LLM call."
            )
        ),
    ] = ""

    turnMessageId: Annotated[
        str,
        Field(
            description=(
                "Id of that human message, to tell whether it is still inside the history window."
            )
        ),
    ] = ""

    llmCalls: Annotated[
        int,
        Field(description="LLM calls made in this turn so far."),
    ] = 0

    iterationBudget: Annotated[
        int,
        Field(
            description=(
                "LLM calls this turn may make; extended while todos remain, never past the cap."
            )
        ),
    ] = 0

    remindersInARow: Annotated[
        int,
        Field(
            description=(
                "Premature answers since the last tool round; past `max_reminders` the turn stops."
            )
        ),
    ] = 0

    promptTokens: Annotated[
        int,
        Field(description="Prompt tokens of this turn's LLM calls so far (`agent.turn.usage`)."),
    ] = 0

    completionTokens: Annotated[
        int,
        Field(description="Completion tokens of this turn's LLM calls so far."),
    ] = 0

    usageEstimated: Annotated[
        bool,
        Field(
            description="Some call's usage was estimated from characters: the server reported none."
        ),
    ] = False

    rowUsage: Annotated[
        dict[str, dict[str, int]],
        Field(
            description=(
                'Usage charged to each row of the turn, by row id: `{"llmCalls", "promptTokens", '
                '"completionTokens"}` (a stage in progress together shares each call\'s tokens '
                "evenly). `todos` shows it as each row's `usage`."
            )
        ),
    ] = field(default_factory=dict)

    idleRounds: Annotated[
        int,
        Field(
            description=(
                "Tool rounds in a row that started or closed no row and only read the plan or "
                "repeated a call of this turn (`agent.turn.idle`); at `max_idle_rounds` the turn "
                "ends stalled."
            )
        ),
    ] = 0

    idleCalls: Annotated[
        list[str],
        Field(description="The calls of those idle rounds, as the stalled report names them."),
    ] = field(default_factory=list)

    progressMark: Annotated[
        str,
        Field(
            description=(
                "A digest of the rows' ids and statuses after the last tool round: a round that "
                "leaves it unchanged started or closed no row."
            )
        ),
    ] = ""

    approvePlan: Annotated[
        bool,
        Field(
            description=(
                "`Context.approve_plan` of the run that started the turn (a resume may not send "
                "it)."
            )
        ),
    ] = False

    planApproved: Annotated[
        bool,
        Field(
            description=(
                "The user approved the turn's plan (only asked when `Context.approve_plan`)."
            )
        ),
    ] = False

    planEditResult: Annotated[
        dict[str, Any] | None,
        Field(
            description=(
                'What this run\'s `planEdits` did: `{"status": "applied", "applied": <count>}` '
                'or `{"status": "error", "error", "message", "suggestion", "edit"?}` (nothing '
                "changed). None in a run that sent none."
            )
        ),
    ] = None

    inputError: Annotated[
        dict[str, Any] | None,
        Field(
            description=(
                "Why this run's input was refused, if it was: "
                '`{"error": "VALIDATION_ERROR", "message", "suggestion", "field", "limit"?}` '
                "(new messages longer than `Context.max_message_chars`, a `continuePlan` that "
                "is not a boolean, a continuation past `Context.max_plan_rows`). A refused run "
                "changes nothing: its messages are removed from the thread, no turn starts, and "
                "a paused turn is asked again. None when the input was accepted "
                "(`agent.turn.run_input`)."
            )
        ),
    ] = None

    turnStatus: Annotated[
        TurnStatus,
        Field(
            description=(
                "How the turn ended: answered (everything asked was done: the model's own "
                "words, or, when the last allowed call closed the last item, the completed plan; "
                "items the user cancelled, by rejecting the plan or with planEdits, count as "
                "the user's choice); budget_exhausted or stalled "
                "(an honest partial answer listing what was and was not done); no_answer (the "
                "model replied with nothing, no text and no tool call, twice in a row, the "
                "second time when asked again for a reply, or on the last call the budget "
                "allowed: the message says so and gives the plan's state); incomplete (part of "
                "the request was not done: an item was cancelled for a failure, not by the user "
                "(its `cancelledBy` is not user), an action done without a plan failed, or "
                "`Context.audit_model` still found parts of the request not done after the "
                "supervisor was sent back once: the answer says what and why); failed "
                "(model or database error, or an audit that failed). Only answered is an answer."
            )
        ),
    ] = "running"

    toolErrors: Annotated[
        int,
        Field(
            description=(
                "Tool calls of this turn that failed through no fault of the model "
                "(`DATABASE_ERROR`, `WORKER_ERROR`, `TOOL_ERROR`: a tool that raised). A turn "
                "may still answer after one; a "
                "non-zero count says to check the server log before trusting that answer."
            )
        ),
    ] = 0

    modifiedTasks: Annotated[
        list[dict[str, Any]],
        Field(
            description=(
                'Personal tasks changed in this turn as `{"action", "task_id", "title"}` (seed '
                "003), so a UI can refresh."
            )
        ),
        extend_or_reset,
    ] = field(default_factory=list)

    workerLlmCalls: Annotated[
        list[int],
        Field(
            description=(
                "LLM calls made by workers in the last tool round, one entry per delegation "
                "(several may run side by side in one round, so each adds its own entry instead "
                "of writing `llmCalls`). `execute` adds them to `llmCalls` after the round and "
                "empties the list: a worker's calls count against the turn's budget like the "
                "supervisor's own."
            )
        ),
        extend_or_reset,
    ] = field(default_factory=list)

    workerUsage: Annotated[
        list[dict[str, Any]],
        Field(
            description=(
                'Tokens spent by workers in the last tool round, one `{"todoId", "llmCalls", '
                '"promptTokens", "completionTokens", "estimated"}` per delegation (a list for the '
                "same reason as `workerLlmCalls`). `execute` adds them to the turn's and the "
                "delegated row's usage after the round and empties the list, so a worker's "
                "tokens count against `max_turn_tokens` like the supervisor's own."
            )
        ),
        extend_or_reset,
    ] = field(default_factory=list)

    evidenceLog: Annotated[
        list[dict[str, Any]],
        Field(
            description=(
                "Tool calls recorded as evidence since `todos` was last written, as "
                '`{"todoIds", "tool", "isError"}`: the next snapshot folds them into its rows\' '
                "`evidence` summaries and empties it (`agent.turn.evidence`)."
            )
        ),
        extend_or_reset,
    ] = field(default_factory=list)

    verifierCalls: VerifierCalls = 0
    verifierTokens: SideModelTokens = 0
    auditCalls: AuditCalls = 0
    auditTokens: SideModelTokens = 0

    ui: Annotated[
        list[AnyUIMessage],
        Field(
            description=(
                "LangGraph generative UI messages (`push_ui_message`): one plan card per turn, "
                "replaced as the plan moves, that agent-chat-ui shows under the turn's newest AI "
                "message (`agent.turn.plan_card`)."
            )
        ),
        ui_message_reducer,
    ] = field(default_factory=list)

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

    messages: Annotated[
        list[AnyMessage],
        Field(description="The conversation, ending with the turn's final answer."),
        add_messages,
    ] = field(default_factory=list)
    conversationId: Annotated[
        str,
        Field(description="Conversation the turn was filed under."),
    ] = ""
    turnId: Annotated[
        str,
        Field(description="Id of the turn; its `turn_todos` rows carry it."),
    ] = ""
    turnStatus: Annotated[
        TurnStatus,
        Field(
            description=(
                "answered (everything asked was done), budget_exhausted, stalled, no_answer, "
                "incomplete (part of it was not done: the answer says what and why) or failed "
                "(see SupervisorState)."
            )
        ),
    ] = "running"
    todos: Annotated[
        list[TodoSnapshot],
        Field(
            description=(
                "The turn's plan rows as the turn left them (empty when it made no plan; a "
                "cancelled one says who cancelled it in `cancelledBy`), each "
                'with the `usage` charged to it: `{"llmCalls", "promptTokens", '
                '"completionTokens"}`.'
            )
        ),
    ] = field(default_factory=list)
    toolErrors: Annotated[
        int,
        Field(
            description=(
                "Tool calls that failed through no fault of the model (database, worker, a tool "
                "that raised)."
            )
        ),
    ] = 0
    llmCalls: Annotated[
        int,
        Field(description="LLM calls the turn made."),
    ] = 0
    promptTokens: Annotated[
        int,
        Field(
            description="Prompt tokens the turn's LLM calls used (estimated when `usageEstimated`)."
        ),
    ] = 0
    completionTokens: Annotated[
        int,
        Field(description="Completion tokens the turn's LLM calls used."),
    ] = 0
    usageEstimated: Annotated[
        bool,
        Field(
            description=(
                "Some call's usage was estimated from characters (the server reported none)."
            )
        ),
    ] = False
    modifiedTasks: Annotated[
        list[dict[str, Any]],
        Field(description="Personal tasks the turn changed."),
        extend_or_reset,
    ] = field(default_factory=list)
    planEditResult: Annotated[
        dict[str, Any] | None,
        Field(description="What this run's `planEdits` did (see SupervisorState)."),
    ] = None
    inputError: Annotated[
        dict[str, Any] | None,
        Field(description="Why this run's input was refused, if it was (see SupervisorState)."),
    ] = None
    verifierCalls: VerifierCalls = 0
    verifierTokens: SideModelTokens = 0
    auditCalls: AuditCalls = 0
    auditTokens: SideModelTokens = 0
    ui: Annotated[
        list[AnyUIMessage],
        Field(description="Generative UI messages: each turn's plan card (see SupervisorState)."),
        ui_message_reducer,
    ] = field(default_factory=list)
