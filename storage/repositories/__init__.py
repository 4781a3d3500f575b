"""One repository a table. Each takes an ``AsyncSession``, flushes, and never commits; the
exceptions are the writes that are transactions of their own (``Database.write_alone``): a step
claim (``advance_alone``) and the records of calls whose effect is elsewhere (``record_alone``)."""

from storage.repositories.asked_questions import AskedQuestionRepository
from storage.repositories.audit import CallOrigin, ToolAuditRepository
from storage.repositories.tasks import TaskRepository
from storage.repositories.tool_results import ToolCallKey, ToolResultRepository, record_alone
from storage.repositories.turn_todos import NewTurnTodo, TurnScope, TurnTodoRepository
from storage.repositories.turns import ConversationRepository, TurnRepository, advance_alone

__all__ = [
    "AskedQuestionRepository",
    "CallOrigin",
    "ConversationRepository",
    "NewTurnTodo",
    "TaskRepository",
    "ToolAuditRepository",
    "ToolCallKey",
    "ToolResultRepository",
    "TurnRepository",
    "TurnScope",
    "TurnTodoRepository",
    "advance_alone",
    "record_alone",
]
