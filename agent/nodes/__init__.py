"""Graph nodes, one a module: ``plan``, ``execute``, ``drain`` and the ordered tools node."""

from __future__ import annotations

from typing import Protocol, TypeVar

from langgraph.runtime import Runtime
from langgraph.types import Command

from agent.context import Context
from agent.state import SupervisorState

Target = TypeVar("Target")


class SupervisorNode(Protocol[Target]):
    """A node of the supervisor: state in, a ``Command`` naming where to go next out."""

    async def __call__(
        self, state: SupervisorState, *, runtime: Runtime[Context]
    ) -> Command[Target]: ...
