"""Graph nodes, one a module: ``plan``, ``execute``, ``drain`` and the ordered tools node."""

from __future__ import annotations

from typing import Any, Protocol

from langgraph.runtime import Runtime

from agent.context import Context
from agent.state import SupervisorState


class SupervisorNode(Protocol):
    """A node of the supervisor: state in, a state update out (``agent.nodes.routing`` picks the
    next node from the updated state)."""

    async def __call__(
        self, state: SupervisorState, *, runtime: Runtime[Context]
    ) -> dict[str, Any]: ...
