"""The agent state ``TurnPlanMiddleware`` adds to a ``create_agent`` agent.

``todos`` has the shape LangChain's ``TodoListMiddleware`` uses (``content``, ``status``; each
item also carries turnplan's row fields: ``id``, ``title``, ``outcome``, ...), so UIs and code
written for it read turnplan's plan as they read theirs. The other fields are turnplan's own,
under the supervisor graph's names. The ids are runtime values: the model never sees or fills
them; the todo tools read them from this state (``agent.tools.runtime.turn_scope``).
"""

from __future__ import annotations

from typing import Annotated, Any, NotRequired

from langchain.agents.middleware.types import AgentState, OmitFromInput, PrivateStateAttr

from agent.state import add_or_reset, extend_or_reset


class TurnPlanState(AgentState[Any]):
    """State schema of ``TurnPlanMiddleware``."""

    todos: Annotated[NotRequired[list[dict[str, Any]]], OmitFromInput]
    conversationId: Annotated[NotRequired[str], OmitFromInput]
    turnId: Annotated[NotRequired[str], OmitFromInput]
    turnStatus: Annotated[NotRequired[str], OmitFromInput]
    llmCalls: Annotated[NotRequired[int], OmitFromInput]
    iterationBudget: Annotated[NotRequired[int], OmitFromInput]
    promptTokens: Annotated[NotRequired[int], OmitFromInput]
    completionTokens: Annotated[NotRequired[int], OmitFromInput]
    usageEstimated: Annotated[NotRequired[bool], OmitFromInput]
    rowUsage: Annotated[NotRequired[dict[str, dict[str, int]]], PrivateStateAttr]
    modifiedTasks: NotRequired[Annotated[list[dict[str, Any]], OmitFromInput, extend_or_reset]]
    """Personal tasks the turn changed (the personal task tools' ``Command`` updates)."""
    verifierCalls: NotRequired[Annotated[int, OmitFromInput, add_or_reset]]
    """Calls of ``Context.verifier_model`` in this turn (``complete_todo``'s updates)."""
    verifierTokens: NotRequired[Annotated[int, OmitFromInput, add_or_reset]]
    turnRequest: Annotated[NotRequired[str], PrivateStateAttr]
    turnMessageId: Annotated[NotRequired[str], PrivateStateAttr]
    remindersInARow: Annotated[NotRequired[int], PrivateStateAttr]
    idleRounds: Annotated[NotRequired[int], PrivateStateAttr]
    idleCalls: Annotated[NotRequired[list[str]], PrivateStateAttr]
    progressMark: Annotated[NotRequired[str], PrivateStateAttr]
    approvePlan: Annotated[NotRequired[bool], PrivateStateAttr]
    planApproved: Annotated[NotRequired[bool], PrivateStateAttr]
    turnRunId: Annotated[NotRequired[str], PrivateStateAttr]
    """The server run that last went on with the turn (recorded as a step of it)."""
    supersededNote: Annotated[NotRequired[str], PrivateStateAttr]
    """What earlier turns a newer run stopped left undone and what stays done
    (``agent.turn.superseded``), for the turn's first model call."""
