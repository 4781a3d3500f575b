"""One repository a table. Each takes an ``AsyncSession``, flushes, and never commits; the
exceptions are the writes that are transactions of their own (most through
``Database.write_alone`` and ``Database.write_chain``): a step claim (``claim_step_alone``), a
model answer (``record_answer_alone``), both at once (``claim_step_with_answer``), the records of
calls whose effect is elsewhere (``record_alone``; ``record_with_evidence``, one session for a
batch) and the usage of plan rows (``save_row_usage_alone``)."""

from storage.repositories.asked_questions import AskedQuestionRepository
from storage.repositories.audit import CallOrigin, ToolAuditRepository
from storage.repositories.row_usage import RowUsageRepository, save_row_usage_alone
from storage.repositories.tasks import TaskRepository
from storage.repositories.todo_continuations import TodoContinuationRepository
from storage.repositories.todo_dependencies import TodoDependencyRepository, copy_dependencies
from storage.repositories.todo_evidence import TodoEvidenceRepository
from storage.repositories.tool_results import (
    ToolCallKey,
    ToolResultRepository,
    record_alone,
    record_in,
    record_with_evidence,
)
from storage.repositories.turn_steps import (
    ModelAnswerRepository,
    TurnStepRepository,
    claim_step_alone,
    claim_step_with_answer,
    record_answer_alone,
)
from storage.repositories.turn_todos import NewTurnTodo, TurnScope, TurnTodoRepository
from storage.repositories.turns import ConversationRepository, TurnRepository

__all__ = [
    "AskedQuestionRepository",
    "CallOrigin",
    "ConversationRepository",
    "ModelAnswerRepository",
    "NewTurnTodo",
    "RowUsageRepository",
    "TaskRepository",
    "TodoContinuationRepository",
    "TodoDependencyRepository",
    "TodoEvidenceRepository",
    "ToolAuditRepository",
    "ToolCallKey",
    "ToolResultRepository",
    "TurnRepository",
    "TurnScope",
    "TurnStepRepository",
    "TurnTodoRepository",
    "claim_step_alone",
    "claim_step_with_answer",
    "copy_dependencies",
    "record_alone",
    "record_answer_alone",
    "record_in",
    "record_with_evidence",
    "save_row_usage_alone",
]
