"""The wrapper every personal-task tool runs inside: one transaction, one audit row, one error
envelope.

Auditing lives here, not in each tool, so a tool cannot forget it: a task tool gets its
``TaskRepository`` only from this wrapper (as an injected argument the model never sees), and the
wrapper opens the transaction, scopes the repository to the run's user and records the call.

- Success: the audit row is written in the same transaction as the change, so a change is never
  committed without its audit row (and if the audit write fails, the change rolls back).
- Failure: the operation's transaction rolls back first; the audit row is then written in a
  transaction of its own, so it lands even though nothing else did. If even that write fails
  (the database is gone), the failure is logged and the model still gets the original error.
- Argument validation (pydantic) happens inside the wrapped call, so a rejected call is audited
  too, and comes back in the seed 003 envelope with ``"status": "error"``.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from langchain_core.messages import ToolCall
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import StructuredTool
from langgraph.errors import GraphBubbleUp
from langgraph.prebuilt import ToolRuntime
from pydantic import ValidationError
from sqlalchemy.exc import SQLAlchemyError

from agent.auth import acting_user
from agent.errors import ErrorCode, ToolFailure, describe_validation_error, driver_reason
from agent.tools.runtime import ToolRuntimeT, record_key, run_context, state_value
from agent.turn.call_ledger import CallAlreadyRecorded, record_result
from agent.turn.evidence import carried_evidence
from storage import Database
from storage.repositories import CallOrigin, TaskRepository, ToolAuditRepository

logger = logging.getLogger(__name__)

REPOSITORY_ARGUMENT = "tasks"
"""Name of the injected ``TaskRepository`` parameter every task tool declares."""

INJECTED_ARGUMENTS = frozenset({"runtime", REPOSITORY_ARGUMENT})
"""Arguments the model never supplies; anything it sends under these names is replaced."""

READ_ONLY_TOOLS = frozenset({"list_tasks"})
"""Task tools that change nothing, so running them again needs no record."""

UNEXPECTED_ERROR = "UNEXPECTED_ERROR"
"""Audit code for a bug (an exception that is not a ``ToolFailure``); the bug still raises."""


def call_origin(runtime: ToolRuntimeT) -> CallOrigin:
    """Who is calling and from which turn, from the run's context and state."""
    return CallOrigin(
        user_id=acting_user(run_context(runtime).user_id, runtime.config),
        conversation_id=state_value(runtime, "conversationId", "") or "",
        turn_id=state_value(runtime, "turnId", "") or "",
        tool_call_id=runtime.tool_call_id or "",
    )


def task_store_failure(error: BaseException) -> ToolFailure:
    """The task store's failure as the model and user see it, with the driver's reason
    (locked, disk full, read-only): the user's tasks are unavailable, nothing was saved."""
    reason = driver_reason(error)
    return ToolFailure(
        ErrorCode.DATABASE_ERROR,
        f"The task database could not be read or changed ({reason}); nothing was saved.",
        "Tell the user their tasks are unavailable right now and to try again in a moment. "
        "Do not say the change was made.",
        status="error",
    )


def invalid_arguments(tool_name: str, error: ValidationError) -> ToolFailure:
    return ToolFailure(
        ErrorCode.VALIDATION_ERROR,
        f"Invalid arguments for {tool_name}: {describe_validation_error(error)}.",
        "Fix the arguments named above to match the tool's schema and call again; if the user "
        "did not give a needed value (a title, which task), ask them.",
        status="error",
    )


def _tool_call_with_runtime(
    input: str | dict[str, Any] | ToolCall,
) -> tuple[ToolCall, ToolRuntimeT]:
    # A task tool needs the runtime the tools node injects; called any other way it is misused.
    if isinstance(input, dict) and input.get("type") == "tool_call":
        runtime = input.get("args", {}).get("runtime")
        if isinstance(runtime, ToolRuntime):
            call: ToolCall = {
                "name": input["name"],
                "args": input["args"],
                "id": input.get("id"),
                "type": "tool_call",
            }
            return call, runtime
    raise TypeError("personal-task tools must be called with a tool call, from a tools node")


class AuditedTaskTool(StructuredTool):
    """A personal-task tool bound to a database; see the module docstring for the contract."""

    database: Database

    async def ainvoke(
        self,
        input: str | dict[str, Any] | ToolCall,
        config: RunnableConfig | None = None,
        **kwargs: Any,
    ) -> Any:
        call, runtime = _tool_call_with_runtime(input)
        origin = call_origin(runtime)
        arguments = {k: v for k, v in call["args"].items() if k not in INJECTED_ARGUMENTS}
        try:
            if not origin.user_id:
                raise ToolFailure(
                    ErrorCode.VALIDATION_ERROR,
                    "This run has no authenticated user, so personal tasks are unavailable.",
                    "Tell the user you cannot reach their tasks in this session.",
                    status="error",
                )
            async with self.database.session() as session:
                tasks = TaskRepository(session, origin.user_id)
                injected = {**call["args"], REPOSITORY_ARGUMENT: tasks}
                result = await super().ainvoke({**call, "args": injected}, config, **kwargs)
                await ToolAuditRepository(session).record(
                    origin, self.name, arguments, status="success"
                )
                if self.name not in READ_ONLY_TOOLS:  # with the change (agent.turn.call_ledger)
                    key = record_key(runtime, self.name)
                    evidence = carried_evidence(runtime.config, key.tool_call_id)
                    await record_result(session, key, result, evidence)
            return result
        except (GraphBubbleUp, CallAlreadyRecorded):
            raise
        except ToolFailure as failure:
            await self._record_failure(origin, arguments, failure.code.value)
            raise
        except ValidationError as error:
            rejected = invalid_arguments(self.name, error)
            await self._record_failure(origin, arguments, rejected.code.value)
            raise rejected from error
        except (SQLAlchemyError, OSError) as error:
            logger.warning("%s failed on the database: %s", self.name, error)
            unavailable = task_store_failure(error)
            await self._record_failure(origin, arguments, unavailable.code.value)
            raise unavailable from error
        except Exception:
            await self._record_failure(origin, arguments, UNEXPECTED_ERROR)
            raise

    async def _record_failure(
        self, origin: CallOrigin, arguments: Mapping[str, Any], error_code: str
    ) -> None:
        """Audit a failed call in its own transaction, never masking the original error."""
        try:
            async with self.database.session() as session:
                await ToolAuditRepository(session).record(
                    origin, self.name, arguments, status="error", error_code=error_code
                )
        except (SQLAlchemyError, OSError):
            logger.exception("could not audit a failed %s call", self.name)


TaskToolFunction = Callable[..., Awaitable[Any]]


def audited_task_tool(database: Database, function: TaskToolFunction) -> AuditedTaskTool:
    """Turn a task tool function into a tool: its name is the function's, its description the
    function's docstring (the model reads it), and ``database`` the one it works on."""
    tool = AuditedTaskTool.from_function(
        coroutine=function,
        description=inspect.cleandoc(function.__doc__ or ""),
        database=database,
    )
    if not isinstance(tool, AuditedTaskTool):  # from_function is typed as returning the base
        raise TypeError(f"expected an AuditedTaskTool, got {type(tool).__name__}")
    return tool
