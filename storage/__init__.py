"""Persistence for turnplan: an async SQLAlchemy engine, the ORM tables and their repositories.

Repositories take an ``AsyncSession`` and only ever ``flush``; the caller owns the transaction,
so one tool call is one commit and a failed call leaves nothing half-written.
"""

from storage.engine import Database, default_database_url

__all__ = ["Database", "default_database_url"]
