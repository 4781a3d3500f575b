"""The read a supervisor tool call makes before it runs, in one transaction.

Two checks guard every call (see ``agent.nodes.tools``): the run must not come from an older
checkpoint than the turn has reached (``agent.turn_lineage``), and a call whose result is
recorded already happened (``agent.tool_ledger``). Both are reads of the same moment, so one
read transaction answers both; each used to open its own, and a call's transactions are most of
the framework's cost per plan item.
"""

from __future__ import annotations

from sqlalchemy.exc import SQLAlchemyError

from agent.errors import database_failure
from agent.tool_ledger import RecordedResult, recorded_results_in
from agent.turn_lineage import check_current
from storage import Database
from storage.repositories import TurnScope


async def recorded_if_current(
    database: Database, scope: TurnScope, step: int, record_id: str
) -> RecordedResult | None:
    """The call's recorded result, or None when it has not run; ``NOT_RUN`` (a ``ToolFailure``)
    when the run started from an older checkpoint of the turn."""
    try:
        async with database.session(readonly=True) as session:
            await check_current(session, scope, step)
            recorded = await recorded_results_in(session, scope.conversation_id, [record_id])
    except (SQLAlchemyError, OSError) as error:
        raise database_failure(error, "tool call record") from error
    return recorded.get(record_id)
