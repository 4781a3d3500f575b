"""One todo list per MCP session, forgotten when the session ends.

The seed scopes a list to a session and keeps nothing after it ("no persistence complexity"), so
lists live in memory. A long-running HTTP server sees many sessions come and go; each list is
dropped the moment its session closes (client DELETE, idle timeout, server stop), so memory
follows the sessions that are open, not every session ever served.

Memory has caps at every level, since any client that can open a session can make the server
keep a list: one list holds at most ``MAX_ITEMS`` items and ``MAX_LIST_BYTES`` bytes
(``agent.todolist.validation``), and the lists of all open sessions together at most
``SessionLists.max_bytes`` (``DEFAULT_MEMORY_BUDGET``, counted as UTF-8 JSON); a list that would
pass it is refused with ``server_full`` and the session keeps its old list. The HTTP transport
caps the number of sessions and the size of a request (``agent.todolist.transports``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final, TypedDict

from agent.todolist.schemas import Summary, Todo, summarize
from agent.todolist.validation import ErrorCode, TodoListError, list_bytes

logger = logging.getLogger(__name__)

DEFAULT_MEMORY_BUDGET: Final = 16 * 1024 * 1024
"""Bytes (UTF-8 JSON) the lists of all open sessions may hold together: 256 lists of the
largest size; about 25 MB of Python objects."""


class ListState(TypedDict):
    """What ``todolist__get`` returns."""

    todos: list[Todo]
    summary: Summary


class TodoList:
    """One session's list. ``replace`` takes a list that already passed validation; its
    bytes are charged to ``budget`` (the server's open sessions), if any."""

    def __init__(self, budget: SessionLists | None = None) -> None:
        self._todos: list[Todo] = []
        self.size = 0
        """The list's bytes as UTF-8 JSON."""
        self._budget = budget

    def state(self) -> ListState:
        todos = [Todo(**todo) for todo in self._todos]
        return ListState(todos=todos, summary=summarize(todos))

    def replace(self, todos: list[Todo]) -> Summary:
        """Store ``todos`` (``TodoListError`` ``server_full``: the budget is spent; the old
        list stays)."""
        size = list_bytes(list(todos))
        if self._budget is not None:
            self._budget.charge(self.size, size)
        self._todos = [Todo(**todo) for todo in todos]
        self.size = size
        return summarize(self._todos)


class SessionLists:
    """The lists of the sessions open now. A server holds one, and opens a list per session."""

    def __init__(self, max_bytes: int = DEFAULT_MEMORY_BUDGET) -> None:
        self._open: set[TodoList] = set()
        self.max_bytes = max_bytes
        self.bytes = 0
        """The bytes the open sessions' lists hold now."""

    def __len__(self) -> int:
        return len(self._open)

    @contextmanager
    def open_session(self) -> Iterator[TodoList]:
        """A new, empty list for the session that runs inside this block; gone when it ends."""
        todo_list = TodoList(self)
        self._open.add(todo_list)
        logger.info("todolist session opened (%d open)", len(self._open))
        try:
            yield todo_list
        finally:
            self._open.discard(todo_list)
            self.bytes -= todo_list.size
            logger.info("todolist session closed (%d open)", len(self._open))

    def charge(self, old: int, new: int) -> None:
        """Swap a list of ``old`` bytes for one of ``new`` in the budget, or refuse it."""
        if self.bytes - old + new > self.max_bytes:
            raise TodoListError.single(
                ErrorCode.SERVER_FULL,
                f"The server holds as many todo lists as its memory budget allows "
                f"({self.max_bytes} bytes for every open session together); this list of {new} "
                "bytes does not fit. Your list is unchanged: shorten it, or try again later",
            )
        self.bytes += new - old
