"""One todo list per MCP session, forgotten when the session ends.

The seed scopes a list to a session and keeps nothing after it ("no persistence complexity"), so
lists live in memory. A long-running HTTP server sees many sessions come and go; each list is
dropped the moment its session closes (client DELETE, idle timeout, server stop), so memory
follows the sessions that are open, not every session ever served.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TypedDict

from agent.todolist.schemas import Summary, Todo, summarize

logger = logging.getLogger(__name__)


class ListState(TypedDict):
    """What ``todolist__get`` returns."""

    todos: list[Todo]
    summary: Summary


class TodoList:
    """One session's list. ``replace`` takes a list that already passed validation."""

    def __init__(self) -> None:
        self._todos: list[Todo] = []

    def state(self) -> ListState:
        todos = [Todo(**todo) for todo in self._todos]
        return ListState(todos=todos, summary=summarize(todos))

    def replace(self, todos: list[Todo]) -> Summary:
        self._todos = [Todo(**todo) for todo in todos]
        return summarize(self._todos)


class SessionLists:
    """The lists of the sessions open now. A server holds one, and opens a list per session."""

    def __init__(self) -> None:
        self._open: set[TodoList] = set()

    def __len__(self) -> int:
        return len(self._open)

    @contextmanager
    def open_session(self) -> Iterator[TodoList]:
        """A new, empty list for the session that runs inside this block; gone when it ends."""
        todo_list = TodoList()
        self._open.add(todo_list)
        logger.info("todolist session opened (%d open)", len(self._open))
        try:
            yield todo_list
        finally:
            self._open.discard(todo_list)
            logger.info("todolist session closed (%d open)", len(self._open))
