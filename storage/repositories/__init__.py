"""One repository a table. Each takes an ``AsyncSession``, flushes, and never commits."""

from storage.repositories.turn_todos import NewTurnTodo, TurnScope, TurnTodoRepository

__all__ = ["NewTurnTodo", "TurnScope", "TurnTodoRepository"]
