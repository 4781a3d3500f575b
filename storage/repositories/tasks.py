"""Data access for ``tasks``: one user's personal tasks.

The repository is built for one user and every statement it issues carries that user's id, so
isolation does not depend on each caller remembering a ``WHERE``: a task of another user is simply
not found. Soft-deleted rows are invisible to every read.
"""

from __future__ import annotations

import uuid

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from storage.models import Task, utc_now_iso


class TaskRepository:
    """Create, read, change and soft-delete the tasks of one user."""

    def __init__(self, session: AsyncSession, user_id: str) -> None:
        if not user_id:
            raise ValueError("a TaskRepository needs a user id")
        self._session = session
        self.user_id = user_id

    async def add(self, title: str, description: str = "") -> Task:
        """Insert a pending task; the caller has already validated the text."""
        now = utc_now_iso()
        task = Task(
            id=str(uuid.uuid4()),
            user_id=self.user_id,
            title=title,
            description=description,
            completed=False,
            created_at=now,
            updated_at=now,
            deleted_at=None,
        )
        self._session.add(task)
        await self._session.flush()
        return task

    async def get(self, task_id: str) -> Task | None:
        """The user's live task with this id; another user's or a deleted task is ``None``."""
        statement = select(Task).where(
            Task.id == task_id, Task.user_id == self.user_id, Task.deleted_at.is_(None)
        )
        result: Task | None = await self._session.scalar(statement)
        return result

    async def find(self, completed: bool | None = None) -> list[Task]:
        """The user's live tasks, oldest first; ``completed`` filters by state, ``None`` is all."""
        statement = select(Task).where(Task.user_id == self.user_id, Task.deleted_at.is_(None))
        if completed is not None:
            statement = statement.where(Task.completed.is_(completed))
        statement = statement.order_by(Task.created_at, Task.id)
        return list(await self._session.scalars(statement))

    async def mark_completed(self, task: Task) -> Task:
        """Mark the task done (a no-op apart from the timestamp if it already was)."""
        self._check_owner(task)
        task.completed = True
        task.updated_at = utc_now_iso()
        await self._session.flush()
        return task

    async def update(
        self, task: Task, *, title: str | None = None, description: str | None = None
    ) -> Task:
        """Change the title and/or description; ``None`` leaves a field as it is."""
        self._check_owner(task)
        if title is not None:
            task.title = title
        if description is not None:
            task.description = description
        task.updated_at = utc_now_iso()
        await self._session.flush()
        return task

    async def soft_delete(self, task: Task) -> Task:
        """Hide the task from every read by stamping ``deleted_at``."""
        self._check_owner(task)
        now = utc_now_iso()
        task.deleted_at = now
        task.updated_at = now
        await self._session.flush()
        return task

    def _check_owner(self, task: Task) -> None:
        # Writes take a loaded row; one loaded through another user's repository is a bug.
        if task.user_id != self.user_id:
            raise ValueError("this task belongs to another user")
