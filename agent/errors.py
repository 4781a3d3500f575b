"""The structured error every tool returns (seed 003's envelope): the one home for error codes.

A tool raises ``ToolFailure`` for anything the model or user can act on; the tools node turns it
into a ``ToolMessage`` with ``status="error"`` whose content is the JSON envelope. Anything else a
tool raises is a bug or a failure nobody foresaw: the supervisor's tools node sends it back as
``TOOL_ERROR`` (``raised_failure``) and logs it, or lets it propagate when
``Context.handle_tool_errors`` is false. Argument validation errors from the model's JSON get
the same envelope, so a malformed call never shows the model a stack trace.
"""

import json
from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Any

from langchain_core.messages import AnyMessage, ToolMessage
from langgraph.prebuilt.tool_node import ToolInvocationError
from pydantic import ValidationError


class ConfigurationError(RuntimeError):
    """A setting cannot work as configured (model, database, checkpointer); the message names
    the fix, so a command-line user sees one actionable line instead of a traceback."""


class ErrorCode(StrEnum):
    NOT_FOUND = "NOT_FOUND"
    VALIDATION_ERROR = "VALIDATION_ERROR"
    INVALID_ID = "INVALID_ID"
    DATABASE_ERROR = "DATABASE_ERROR"
    WORKER_ERROR = "WORKER_ERROR"
    MCP_ERROR = "MCP_ERROR"
    """An MCP server could not be reached or broke off the call."""
    BUDGET_EXHAUSTED = "BUDGET_EXHAUSTED"
    """The turn's LLM-call budget ran out while a worker was still working on its item; the
    item stays open."""
    NOT_RUN = "NOT_RUN"
    """The call was not carried out (its run was interrupted, or it came from a fork); nothing
    changed."""
    INVALID_DEPENDENCY = "INVALID_DEPENDENCY"
    """A ``blockedBy`` of ``create_todo`` names itself, an unknown item, a later stage, or closes
    a cycle; the whole call is refused and nothing is written (issue 30)."""
    BLOCKED = "BLOCKED"
    """A row was completed or delegated while rows it waits for (``blockedBy``) are still open;
    the error names them (issue 30)."""
    COMPLETION_REFUSED = "COMPLETION_REFUSED"
    """A completion check (``build_graph(completion_checks=...)`` or ``Context.verifier_model``)
    refused to close the row; it stays open and the message carries the check's reason."""
    TOOL_ERROR = "TOOL_ERROR"
    """The tool raised an exception (``Context.handle_tool_errors``): what it changed before it
    failed is unknown, so the call is not run again by a resumed run."""
    COMPLETION_CHECK_FAILED = "COMPLETION_CHECK_FAILED"
    """A completion check raised, or the verifier model could not be reached: the operator's
    fault, not the model's; the row stays open."""


OPERATOR_FAULTS = frozenset(
    {
        ErrorCode.DATABASE_ERROR,
        ErrorCode.WORKER_ERROR,
        ErrorCode.MCP_ERROR,
        ErrorCode.COMPLETION_CHECK_FAILED,
        ErrorCode.TOOL_ERROR,
    }
)
"""Failures that are not the model's doing: an operator should hear of them."""


def error_code_of(content: object) -> ErrorCode | None:
    """The code of an error envelope (a tool message's content), or None for anything else.

    ``drain`` asks this of every tool result of the turn when it judges an answer, and nearly
    all of them are JSON, so JSON that cannot hold an ``error`` key is told apart without
    parsing it: the key is spelled out, or escaped (``\\u``), in any object that has it."""
    if not isinstance(content, str) or not content.startswith("{"):
        return None
    if '"error"' not in content and "\\u" not in content:
        return None
    try:
        payload = json.loads(content)
    except ValueError:
        return None
    code = payload.get("error") if isinstance(payload, dict) else None
    try:
        return ErrorCode(code) if isinstance(code, str) else None
    except ValueError:
        return None


class ToolFailure(Exception):
    """An error the model can recover from: a code, what went wrong, and what to do next."""

    def __init__(self, code: ErrorCode, message: str, suggestion: str, **extra: Any) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.suggestion = suggestion
        self.extra = extra

    def envelope(self) -> dict[str, Any]:
        return {
            "error": self.code.value,
            "message": self.message,
            "suggestion": self.suggestion,
            **self.extra,
        }


def raised_failure(tool: str, error: BaseException) -> ToolFailure:
    """A tool's exception as the error result the model gets (``TOOL_ERROR``): the exception's
    type and message, and the choices the model has, since what the tool did before it raised
    is unknown."""
    reason = " ".join(str(error).split()) or "no message"
    return ToolFailure(
        ErrorCode.TOOL_ERROR,
        f"{tool} raised {type(error).__name__}: {reason}"[:1000],
        "Retry once if the error looks passing; otherwise cancel the item (complete_todo with "
        "status 'cancelled') and say why it could not be done. Do not claim it was done.",
    )


def driver_reason(error: BaseException) -> str:
    """The database driver's own reason for a failure (locked, disk full, read-only), not
    SQLAlchemy's wrapper text, so the message says what an operator can fix."""
    return str(getattr(error, "orig", None) or error).strip() or type(error).__name__


def database_failure(error: BaseException, what: str = "plan") -> ToolFailure:
    """A failure of the plan store (or a record the graph keeps) as the ``DATABASE_ERROR`` the
    model and user see: the driver's reason and the fact that nothing changed. The model may
    retry; the personal-task store words its own (``agent.tools.audited``)."""
    reason = driver_reason(error)
    return ToolFailure(
        ErrorCode.DATABASE_ERROR,
        f"The {what} could not be saved or read: {reason}. Nothing was changed.",
        "Try the same call once more; if it fails again, tell the user the plan store is down.",
    )


def _describe_error_details(details: Sequence[Mapping[str, Any]]) -> str:
    parts = []
    for item in details:
        location = ".".join(str(part) for part in item.get("loc", ())) or "arguments"
        parts.append(f"{location}: {item.get('msg', 'invalid value')}")
    return "; ".join(parts)


def describe_validation_error(error: ValidationError) -> str:
    """Pydantic's errors as one line per field, without the URLs and input echoes it adds."""
    return _describe_error_details(error.errors(include_url=False, include_input=False))


def describe_invalid_arguments(error: ToolInvocationError) -> str:
    """The argument errors of a tool call, without errors about injected arguments the model
    never sees."""
    if error.filtered_errors is None:
        return describe_validation_error(error.source)
    return _describe_error_details(error.filtered_errors)


def tool_error_content(error: ToolFailure | ToolInvocationError) -> str:
    """The ``ToolMessage`` content for a handled tool error (used as ``handle_tool_errors``).

    ``ToolNode`` hands this function any exception that escapes a tool-call wrapper, whatever
    its type, so anything that is not a recoverable tool error is re-raised here: bugs must
    surface, not be shown to the model as if it could fix them.
    """
    if isinstance(error, ToolFailure):
        return json.dumps(error.envelope(), ensure_ascii=False)
    if not isinstance(error, ToolInvocationError):
        raise error
    return json.dumps(
        {
            "error": ErrorCode.VALIDATION_ERROR.value,
            "message": f"The tool arguments are invalid: {describe_invalid_arguments(error)}",
            "suggestion": "Call the tool again with arguments that match its schema.",
        },
        ensure_ascii=False,
    )


def operator_faults(messages: Sequence[AnyMessage], turn_message_id: str) -> int:
    """Tool results of this turn (after its human message) that are operator faults: the
    output's ``toolErrors``, counted after every tool round and when the turn ends."""
    count = 0
    for message in reversed(messages):
        if turn_message_id and message.id == turn_message_id:
            break
        if isinstance(message, ToolMessage) and error_code_of(message.content) in OPERATOR_FAULTS:
            count += 1
    return count
