"""turnplan as a piece of a LangChain agent: ``create_agent(model, tools,
middleware=[TurnPlanMiddleware(...), ...])`` (docs/middleware.md)."""

from agent.middleware.state import TurnPlanState
from agent.middleware.turn_plan import TurnPlanMiddleware

__all__ = ["TurnPlanMiddleware", "TurnPlanState"]
